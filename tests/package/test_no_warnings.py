"""No warning reaches the user's terminal from numpy, onnxruntime or dml_ep during ``run``,
``inspect`` and ``compare``: each command runs as under ``python -W error`` (a warning fails it) on
the shipped models, and on inputs of NaN and infinities, and nothing is printed to stderr (where
onnxruntime's C++ log writes)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dml_ep.cli.commands import main
from dml_ep.reports.report import compare_tensors

MODELS = Path(__file__).resolve().parents[2] / "models"
SHIPPED = ["mlp", "small_cnn", "small_cnn.qdq", "transformer_block", "transformer_block.dynamic", "llm/tiny_llm.int4.dml"]
LLM_PROMPT = ["--shape", "input_ids=1,8", "--shape", "attention_mask=1,8", "--shape", "position_ids=1,8", "--val-range", "input_ids=0,255",
              "--val-range", "attention_mask=1,1", "--val-range", "position_ids=0,7",
              *[a for layer in (0, 1) for kv in ("key", "value") for a in ("--shape", f"past_key_values.{layer}.{kv}=1,2,0,16")]]
COMMANDS = [["run"], ["inspect"], ["compare", "--per-node"], ["compare", "--per-node", "--arithmetic", "onnxruntime"]]


def run_strict(capfd, argv) -> int:
    """The CLI's exit status, any warning raised as an error; nothing may go to stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status = main([str(a) for a in argv])
    err = capfd.readouterr().err
    # under QEMU (scripts/qemu_tests.sh) the emulator itself warns of CPUID features it lacks
    assert [line for line in err.splitlines() if not line.startswith("qemu-x86_64: ")] == []
    return status


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_models_print_no_warning(capfd, name):
    model = MODELS / f"{name}.onnx"
    shapes = LLM_PROMPT if name.startswith("llm") else []
    for command in COMMANDS:
        assert run_strict(capfd, [*command, model, *shapes]) in (0, 1), command


def special_values_model(tmp_path: Path) -> list[str]:
    """Log (of negatives: NaN; of 0: -inf) -> QuantizeLinear -> DequantizeLinear -> MatMul, and the
    Log's float output, fed NaN, infinities, zero, negatives and the float32 extremes; the CLI's
    arguments for it."""
    nodes = [helper.make_node("Log", ["x"], ["log"]), helper.make_node("QuantizeLinear", ["log", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]), helper.make_node("MatMul", ["dq", "w"], ["y"])]
    graph = helper.make_graph(nodes, "special", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]), helper.make_tensor_value_info("log", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("z", TensorProto.UINT8, [], [128]),
                               helper.make_tensor("w", TensorProto.FLOAT, [4, 2], [1, -1, 0.5, 2, -3.4e38, 3.4e38, 1e-3, 0])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "special.onnx")
    x = np.array([[np.nan, np.inf, -np.inf, 0], [-1, 3.4e38, 1e-45, 2]], np.float32)
    np.save(tmp_path / "x.npy", x)
    return [str(tmp_path / "special.onnx"), "--input", f"x={tmp_path / 'x.npy'}"]


@pytest.mark.host_sensitive
def test_nan_and_infinities_print_no_warning(capfd, tmp_path):
    argv = special_values_model(tmp_path)
    for command in [*COMMANDS, ["compare", "--per-node", "--html", str(tmp_path / "r.html")]]:
        assert run_strict(capfd, [*command, *argv]) in (0, 1), command


def test_a_difference_beside_the_float32_extremes_counts_ulps_without_overflow():
    """An attention mask's -3.4e38 set the scale of max_ulps, whose np.spacing overflowed there."""
    expected = np.array([-3.4028235e38, 1.0, 2.0], np.float32)
    actual = np.array([-3.4028235e38, 1.0, 2.0000002], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        comparison = compare_tensors("masked", actual, expected, None)
    assert comparison.max_ulps == pytest.approx(2.384185791015625e-07 / 2.0 ** 104)
