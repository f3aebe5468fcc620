"""The ``polygraphy run`` plugin (dml_ep/interop/polygraphy_plugin.py), through the installed ``polygraphy``
command: ``--dml-ep`` beside ``--onnxrt`` on every shipped model, Polygraphy's options and dml_ep's
reaching the dml_ep runner, and the errors. onnxruntime (``--onnxrt``) is the reference."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from dml_ep.numerics.arithmetic import host_saturates_u8s8

pytest.importorskip("polygraphy")

MODELS = Path(__file__).resolve().parents[2] / "models"
POLYGRAPHY = Path(sys.executable).parent / "polygraphy"
EXACT = ["--atol", "0", "--rtol", "0"]
# On a CPU whose onnxruntime saturates pairs of uint8 x int8 products (AVX2 without VNNI), dml_ep
# matches it bit for bit only in onnxruntime's arithmetic, which then saturates as well.
AS_THIS_ONNXRUNTIME = ["--dml-ep-arithmetic", "onnxruntime"] if host_saturates_u8s8() else []
# Models not bit-exact with onnxruntime (`dml-ep compare MODEL --reference ort`), and the tolerance
# each needs; every other shipped model is compared bit for bit.
TOLERANCES = {
    # DirectML's MatMulIntegerToFloat rounds acc * scales + bias once, onnxruntime's MLAS three
    # times (docs/dml_ep_mapping.md): outputs of magnitude up to 4 differ by up to 2 float32 ulps (4.8e-7)
    # on this AVX-512 host. Those ulps can also move a DynamicQuantizeLinear code by one step where a value
    # sits at a rounding boundary, which depends on the host's float kernels: under an emulated Nehalem
    # (onnxruntime's SSE kernels), Polygraphy's inputs give 1.94e-3 at the output while every node is within
    # 1 ulp fed onnxruntime's inputs (dml-ep compare --load-inputs ... --per-node: float32 rounding, summation order).
    "transformer_block.dynamic.onnx": ["--atol", "4e-3", "--rtol", "0"],
    # Its last LayerNormalization runs on DirectML's MEAN_VARIANCE_NORMALIZATION2, whose math dml_ep takes
    # in float64 rounded once, onnxruntime's CPU kernel in a float32 loop: up to 2 float32 ulps (2.4e-7 at
    # outputs of magnitude up to 3.3); bit for bit in onnxruntime's arithmetic (mean_variance_normalization.py).
    "transformer_block.onnx": ["--atol", "1e-6", "--rtol", "0"],
}


def polygraphy_run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([POLYGRAPHY, "run", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def passed(result: subprocess.CompletedProcess, iterations: int = 1) -> bool:
    """Whether Polygraphy compared onnxruntime's runner with dml_ep's and every iteration passed."""
    summary = rf"Accuracy Summary \| onnxrt-runner-N0-\S+ vs\. dml-ep-runner-N0-\S+ \| Passed: {iterations}/{iterations} iterations"
    return result.returncode == 0 and re.search(summary, result.stdout) is not None


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.onnx")))
def test_every_shipped_model_passes_beside_onnxruntime(name):
    result = polygraphy_run(MODELS / name, "--onnxrt", "--dml-ep", *AS_THIS_ONNXRUNTIME, *TOLERANCES.get(name, EXACT))
    assert passed(result), result.stdout + result.stderr


@pytest.mark.host_sensitive
@pytest.mark.parametrize("model, options, settings, exact", [
    # Its six MatMulIntegerToFloat nodes and two float GEMMs round as DirectML does: not bit-exact (see TOLERANCES)...
    ("transformer_block.dynamic.onnx", [], "DML_FEATURE_LEVEL_6_4, directml arithmetic, onnxruntime 1.24+ rewrites, ORT_ENABLE_ALL",
     False),
    # ...but bit-exact in MLAS's arithmetic,
    ("transformer_block.dynamic.onnx", ["--dml-ep-arithmetic", "onnxruntime"], "DML_FEATURE_LEVEL_6_4, onnxruntime arithmetic", True),
    # and below feature level 6_2, where MatMulIntegerToFloat falls back to onnxruntime's CPU EP.
    ("transformer_block.dynamic.onnx", ["--dml-ep-feature-level", "4.0", "--dml-ep-arithmetic", "onnxruntime"],
     "DML_FEATURE_LEVEL_4_0, onnxruntime arithmetic", True),
    # Polygraphy's --graph-optimization-level reaches dml_ep's session as it reaches onnxruntime's.
    ("small_cnn.qdq.onnx", ["--graph-optimization-level", "ORT_ENABLE_BASIC", "--dml-ep-ort-release", "1.20"],
     "onnxruntime 1.20 rewrites, ORT_ENABLE_BASIC", True),
])
def test_options_reach_the_dml_ep_session(model, options, settings, exact):
    """The session reports what it took, and the verdict against onnxruntime (bit for bit) follows it."""
    result = polygraphy_run(MODELS / model, "--onnxrt", "--dml-ep", *options, *EXACT)
    session = re.search(r"Created a dml_ep session: (.*)", result.stdout)
    assert session and settings in session.group(1), result.stdout
    assert passed(result) == exact, result.stdout + result.stderr
    if not exact:
        assert result.returncode == 1 and "FAILED | Output: 'output' | Difference exceeds tolerance (rel=0, abs=0)" in result.stdout


@pytest.mark.host_sensitive
def test_polygraphy_data_options_feed_the_dml_ep_runner_and_its_outputs_are_saved(tmp_path):
    """--input-shapes (mlp's symbolic batch), --val-range, --seed and --iterations make dml_ep's
    inputs; --save-outputs keeps its outputs under its runner's name, equal to onnxruntime's on them."""
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    model = MODELS / "mlp.onnx"
    result = polygraphy_run(model, "--onnxrt", "--dml-ep", *AS_THIS_ONNXRUNTIME, "--input-shapes", "input:[3,64]",
                            "--val-range", "input:[-4,4]", "--seed", 7, "--iterations", 2,
                            "--save-inputs", tmp_path / "in.json", "--save-outputs", tmp_path / "out.json", *EXACT)
    assert passed(result, iterations=2), result.stdout + result.stderr
    feeds = load_json(str(tmp_path / "in.json"))
    results = RunResults.load(str(tmp_path / "out.json"))
    onnxrt_name, dml_ep_name = results.keys()
    assert onnxrt_name.startswith("onnxrt-runner-N0-") and dml_ep_name.startswith("dml-ep-runner-N0-")
    reference = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert len(feeds) == len(results[dml_ep_name]) == 2
    assert not np.array_equal(feeds[0]["input"], feeds[1]["input"])
    for feed, iteration in zip(feeds, results[dml_ep_name]):
        assert feed["input"].shape == (3, 64) and -4 <= feed["input"].min() and feed["input"].max() <= 4
        assert iteration.runner_name == dml_ep_name
        np.testing.assert_array_equal(iteration["output"], reference.run(None, feed)[0])


@pytest.mark.parametrize("model, options, status, message", [
    ("mlp.onnx", ["--dml-ep-feature-level", "9_9"], 2,
     "polygraphy run: error: argument --dml-ep-feature-level: unknown DirectML feature level '9_9' (known: 1_0, "),
    ("mlp.onnx", ["--dml-ep-arithmetic", "exact"], 2, "argument --dml-ep-arithmetic: invalid choice: 'exact'"),
    # dml_ep's errors on bad input are Polygraphy's: logged in one line, no traceback, exit 1.
    ("not_a_model.onnx", [], 1, "| ModelError: "),
])
def test_errors_are_clear(tmp_path, model, options, status, message):
    (tmp_path / "not_a_model.onnx").write_text("not a model")
    result = polygraphy_run(MODELS / model if model == "mlp.onnx" else model, "--dml-ep", *options, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == status and message in output, output
    assert "Traceback" not in output


def test_without_onnxruntime_polygraphy_names_what_to_install():
    """Polygraphy skips a plugin that cannot load, with a warning: dml_ep's one line saying what to install."""
    code = "import sys; sys.modules['onnxruntime'] = None; from polygraphy.tools import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", code, "run", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--dml-ep" not in result.stdout
    assert "Failed to load plugin: dml-ep" in result.stdout and "no onnxruntime is importable" in result.stdout


def test_importing_dml_ep_does_not_import_polygraphy():
    code = "import sys, dml_ep; dml_ep.InferenceSession; print(sorted(m for m in sys.modules if m.startswith('polygraphy')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "[]\n", result.stderr
