"""Running the dml-ep command in process for the CLI tests: its status and output, whether an error
is one line, the mark of POSIX-only tests, and a model file of float unary ops to run it on."""

import os

import onnx
import pytest
from onnx import TensorProto, helper

from dml_ep.cli import commands as cli

POSIX = pytest.mark.skipif(os.name != "posix", reason="FIFOs, /dev/, modes, signals and unprivileged symbolic links are POSIX")


def run_cli(capsys, *argv):
    """``cli.main`` in process; argparse's own exits (usage errors, --help) count as statuses too."""
    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(err: str) -> bool:
    return err.startswith("dml-ep: error: ") and err.count("\n") == 1 and "Traceback" not in err


def unary_model(path, ops_and_outputs, shape=(3,), dtype=TensorProto.FLOAT):
    """Input x of ``shape``, and one output per (op type, output name), each op applied to x."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], [name]) for op, name in ops_and_outputs], "g",
        [helper.make_tensor_value_info("x", dtype, list(shape))],
        [helper.make_tensor_value_info(name, dtype, list(shape)) for _, name in ops_and_outputs],
    )
    onnx.save(helper.make_model(graph), path)
    return path
