"""What ``dml-ep`` costs before it works: ``--version``, ``--help`` and usage errors import none of
the heavy packages (onnx and its ml_dtypes alone took most of a second), and ``dml-ep run`` of a
model of many outputs keeps to onnxruntime's memory. scripts/startup_bench.py times the rest."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core import about
from dml_ep.numerics.kernels import compiled

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"onnxruntime", "onnx", "ml_dtypes", "numpy", "jinja2", "rich", "distributed", "dask"}
# The modules a ``dml-ep`` process has imported once ``main`` returns (or exits), one a line.
_MODULES = """
import contextlib, io, sys
from dml_ep.__main__ import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print("\\n".join(sorted(sys.modules)))
"""
pytestmark = pytest.mark.native_children


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"], ["compare", "--help"], ["sweep", "--help"],
                                  ["run", "model.onnx", "--no-such-option"]], ids=" ".join)
def test_parsing_imports_no_heavy_package(argv):
    result = subprocess.run([sys.executable, "-c", _MODULES, *argv], capture_output=True, text=True, cwd=ROOT, check=True)
    imported = {name.partition(".")[0] for name in result.stdout.split()}
    assert "dml_ep" in imported and imported & HEAVY == set()


def test_the_package_imports_its_api_on_first_use():
    code = "import sys, dml_ep; print(sorted(set(sys.modules) & {'onnxruntime', 'numpy'})); print(dml_ep.get_device())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["[]", "DML"]
    assert set(dml_ep.__all__) <= set(dir(dml_ep)) and dml_ep.InferenceSession.__module__ == "dml_ep.runtime.session"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        dml_ep.nothing  # noqa: B018


def test_version_says_what_the_modules_would():
    """``--version`` reads versions and kernel builds without importing them: the same answers."""
    import onnxruntime

    assert about.onnxruntime_version() == onnxruntime.__version__
    assert about.kernels_summary(*about.kernel_builds()) == compiled.summary()
    assert list(about.x86_64_levels()) == compiled.SUPPORTED


def _best_of_three(argv: list[str]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def test_version_answers_within_a_second():
    """The best of three (a loaded machine slows some), and the interpreter's own start taken off:
    0.1-0.3 s on 2 loaded cores; importing onnx alone would take most of a second more."""
    version, bare = _best_of_three(["-m", "dml_ep", "--version"]), _best_of_three(["-c", "pass"])
    assert version < 1.0 and version - bare < 0.6, (version, bare)


# A small Python that starts a command and prints its peak RSS: a child's ru_maxrss starts at its
# parent's, and pytest's is larger than either run's.
_PEAK = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
# onnxruntime's run on random inputs as dml-ep run makes them (numpy's generator)
_ORT_RUN = ("import sys, numpy as np, onnxruntime; session = onnxruntime.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
            "session.run(None, {'x': np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)})")


@pytest.mark.host_insensitive("measures the runs' memory, compares none of their values")
def test_a_run_of_many_outputs_keeps_to_onnxruntime_s_memory(tmp_path):
    """2,000 outputs, each its own Add, Relu or Mul of the input: each Relu (a fallback) had an
    onnxruntime session of its own, and the output table was laid out by rich (10,000 outputs:
    415 MB against onnxruntime's 122). dml_ep's modules come compiled, as installed (compiling
    them at the run, under PYTHONDONTWRITEBYTECODE, takes memory too)."""
    ops = ("Add", "Relu", "Mul")
    nodes = [helper.make_node(ops[i % 3], ["x"] + ([] if i % 3 == 1 else ["c"]), [f"y{i}"]) for i in range(2000)]
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 64])  # noqa: E731
    graph = helper.make_graph(nodes, "outputs", [value("x")], [value(f"y{i}") for i in range(2000)],
                              [numpy_helper.from_array(np.full((1, 64), 0.5, np.float32), "c")])
    path = tmp_path / "outputs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(dml_ep.__file__).parent)], check=True, env=env)
    ours = _peak_kib(env, sys.executable, "-m", "dml_ep", "run", path)
    theirs = _peak_kib(env, sys.executable, "-c", _ORT_RUN, path)
    assert ours < 1.5 * theirs, (ours, theirs)


def _peak_kib(env: dict, *command) -> int:
    return int(subprocess.run([sys.executable, "-c", _PEAK, *map(str, command)], capture_output=True, text=True, check=True, env=env).stdout)


def test_an_onnxruntime_that_does_not_import_is_said_in_one_line(tmp_path):
    """onnxruntime is found without being imported (above): one that is installed but fails to import
    is still the installation's error, exit 2 in one line, not an internal error halfway through."""
    broken = tmp_path / "onnxruntime"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('libonnxruntime.so: cannot open shared object file')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "dml_ep", "run", str(ROOT / "models" / "mlp.onnx")], capture_output=True,
                            text=True, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == ["dml-ep: error: onnxruntime is installed but does not import "
                                          "(libonnxruntime.so: cannot open shared object file): reinstall dml_ep[cpu] "
                                          "(onnxruntime) or dml_ep[directml] (onnxruntime-directml)"]
