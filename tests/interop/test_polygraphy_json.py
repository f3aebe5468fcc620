"""Polygraphy's JSON files (RunResults, input data) read and written by dml_ep, checked against
Polygraphy itself; and Polygraphy's Comparator running dml_ep beside onnxruntime."""

import base64
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.cli.commands import main
from dml_ep.conformance.cases import split_runner
from dml_ep.core.errors import FeedError
from dml_ep.interop.polygraphy_json import inputs_json, load_inputs, load_run_results, run_results_json

MODELS = Path(__file__).resolve().parents[2] / "models"
BIN = Path(sys.executable).parent
# One array of each kind the models' tensors have, and the odd shapes (0-d, empty).
ARRAYS = {
    "u8": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    "i8": np.array([-128, 0, 127], np.int8),
    "f32": np.array([[1.5, -0.0, np.nan, np.inf]], np.float32),
    "f16": np.array([0.1, 65504], np.float16),
    "i64": np.array(7, np.int64),
    "b": np.array([True, False]),
    "empty": np.zeros((0, 3), np.float32),
}
# Polygraphy's default runner names hold a date and a time, so slashes and colons.
ORT_RUNNER = "onnxrt-runner-N0-01/02/03-04:05:06"


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_same_arrays(actual: dict, expected: dict):
    assert list(actual) == list(expected)
    for name, array in expected.items():
        assert actual[name].dtype == array.dtype and actual[name].shape == array.shape, name
        np.testing.assert_array_equal(actual[name], array)


def iterations():
    second = {name: array[::-1] if array.ndim else np.asarray(array + 1) for name, array in ARRAYS.items()}
    return [ARRAYS, second]


def test_we_write_exactly_what_polygraphy_writes():
    """Byte for byte: the same RunResults and input data through Polygraphy's own encoder."""
    comparator = pytest.importorskip("polygraphy.comparator")
    from polygraphy.json import to_json

    results = comparator.RunResults()
    results.add(iterations(), runner_name="dml_ep")
    results.add(iterations()[:1], runner_name=ORT_RUNNER)
    assert run_results_json({"dml_ep": iterations(), ORT_RUNNER: iterations()[:1]}) == results.to_json()
    assert inputs_json(iterations()) == to_json(iterations())


def test_polygraphy_loads_what_we_write(tmp_path):
    comparator = pytest.importorskip("polygraphy.comparator")
    from polygraphy.json import load_json

    (tmp_path / "out.json").write_text(run_results_json({"dml_ep": iterations(), ORT_RUNNER: iterations()[:1]}))
    results = comparator.RunResults.load(str(tmp_path / "out.json"))
    assert list(results.keys()) == ["dml_ep", ORT_RUNNER]
    assert [len(r) for r in results.values()] == [2, 1]
    for loaded, expected in zip(results["dml_ep"], iterations()):
        assert loaded.runner_name == "dml_ep"
        assert_same_arrays(dict(loaded.items()), expected)
    (tmp_path / "in.json").write_text(inputs_json(iterations()))
    for loaded, expected in zip(load_json(str(tmp_path / "in.json")), iterations(), strict=True):
        assert_same_arrays(loaded, expected)


def test_we_load_what_polygraphy_writes(tmp_path):
    comparator = pytest.importorskip("polygraphy.comparator")
    from polygraphy.json import save_json

    results = comparator.RunResults()
    results.add(iterations(), runtime=0.25, runner_name=ORT_RUNNER)
    results.add(iterations()[:1], runner_name="trt-runner")
    results.save(str(tmp_path / "out.json"))
    loaded = load_run_results(str(tmp_path / "out.json"))
    assert list(loaded) == [ORT_RUNNER, "trt-runner"] and [len(r) for r in loaded.values()] == [2, 1]
    for actual, expected in zip(loaded[ORT_RUNNER], iterations()):
        assert_same_arrays(actual, expected)
    save_json(iterations(), str(tmp_path / "in.json"))
    for actual, expected in zip(load_inputs(str(tmp_path / "in.json")), iterations(), strict=True):
        assert_same_arrays(actual, expected)


def test_older_polygraphy_lazy_array_name_is_read(tmp_path):
    """Polygraphy's decoder reads "LazyNumpyArray", the class's earlier name, as LazyArray; so do we."""
    text = run_results_json({"r": [{"x": ARRAYS["u8"]}]}).replace('"LazyArray"', '"LazyNumpyArray"')
    (tmp_path / "out.json").write_text(text)
    assert_same_arrays(load_run_results(str(tmp_path / "out.json"))["r"][0], {"x": ARRAYS["u8"]})


@pytest.mark.host_sensitive  # its polygraphy children run on the emulated CPU too (tests/conftest.py)
@pytest.mark.parametrize("iterations", [1, 2])
@pytest.mark.parametrize("layout", ["file", "directory"])
def test_compare_with_what_polygraphy_run_saved(capsys, tmp_path, layout, iterations):
    """polygraphy run --onnxrt saves its inputs and outputs (one file, or a directory of
    per-iteration files); dml-ep compares with them, iteration by iteration. They are the host's
    plain onnxruntime's, which saturates u8s8 pairs on AVX2 CPUs without VNNI: dml_ep in onnxruntime's
    arithmetic follows the host."""
    pytest.importorskip("polygraphy")
    outputs, inputs = (tmp_path / "out.json", tmp_path / "in.json") if layout == "file" else (tmp_path / "out", tmp_path / "in")
    model = MODELS / "small_cnn.qdq.onnx"
    subprocess.run([BIN / "polygraphy", "run", model, "--onnxrt", "--iterations", str(iterations),
                    "--save-outputs", outputs, "--save-inputs", inputs], check=True, capture_output=True)
    status, out, err = run_cli(capsys, "compare", model, "--load-outputs", f"{outputs}:onnxrt", "--load-inputs", inputs, "--quiet",
                               "--arithmetic", "onnxruntime")
    assert status == 0, err
    assert "reference Polygraphy runner 'onnxrt-runner-" in out
    assert out.count("result: OK") == iterations
    if iterations > 1:
        assert f"{model} [iteration 1]" in out


def saved_round_trip(capsys, tmp_path, *options, reference="ort-exact"):
    """A plain compare that saves Polygraphy's files, then a compare with the saved reference;
    both exit statuses and JSON reports."""
    model = MODELS / "small_cnn.onnx"
    plain = run_cli(capsys, "compare", model, "--reference", reference, "--seed", 5, "--json", tmp_path / "plain.json",
                    "--save-outputs", tmp_path / "out.json", "--save-inputs", tmp_path / "in.json", *options)[0]
    loaded = run_cli(capsys, "compare", model, "--load-outputs", tmp_path / "out.json", "--load-inputs", tmp_path / "in.json",
                     "--json", tmp_path / "loaded.json", *options)[0]
    return (plain, json.loads((tmp_path / "plain.json").read_text())["models"][0],
            loaded, json.loads((tmp_path / "loaded.json").read_text())["models"][0])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("broken", [False, True])
def test_round_trip_gives_the_plain_verdict(capsys, tmp_path, break_dml_node, broken):
    """The saved reference (onnxruntime-ort-exact, picked by default over dml_ep) judges dml_ep as
    the live one did, also when dml_ep is off by one in a node."""
    if broken:
        break_dml_node("block2.pw_quant")
    plain_status, plain, loaded_status, loaded = saved_round_trip(capsys, tmp_path)
    assert (plain_status, loaded_status) == ((1, 1) if broken else (0, 0))
    assert loaded["reference"] == "Polygraphy runner 'onnxruntime-ort-exact'"
    assert loaded["outputs"] == plain["outputs"]
    assert broken == (plain["outputs"][0]["equal"] < plain["outputs"][0]["elements"])


@pytest.mark.host_sensitive  # its polygraphy children run on the emulated CPU too (tests/conftest.py)
def test_polygraphy_run_compares_with_what_we_saved(tmp_path, capsys):
    """polygraphy run --onnxrt --load-outputs reads our file and compares its own run with both of
    our runners. Its run is the host's plain onnxruntime, which saturates u8s8 pairs on AVX2 CPUs
    without VNNI: so are the saved runs (reference ort, dml_ep in onnxruntime's arithmetic)."""
    pytest.importorskip("polygraphy")
    saved_round_trip(capsys, tmp_path, "--arithmetic", "onnxruntime", reference="ort")
    result = subprocess.run([BIN / "polygraphy", "run", MODELS / "small_cnn.onnx", "--onnxrt", "--load-inputs", tmp_path / "in.json",
                             "--load-outputs", tmp_path / "out.json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vs. dml_ep" in result.stdout and "dml_ep vs. onnxruntime-ort\n" in result.stdout
    assert "Pass Rate: 100.00%" in result.stdout


def write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "make, options, message",
    [
        (lambda d: write(d / "in.json", inputs_json([{"input": np.zeros((1, 64), np.float32)}])), ["--input-dir", "."],
         "holds a JSON list, not Polygraphy's RunResults"),
        (lambda d: write(d / "out.json", "{nope"), ["--input-dir", "."], "out.json: not JSON"),
        (lambda d: write(d / "out.json", '{"lst": [], "polygraphy_class": "AccuracyResult"}'), ["--input-dir", "."],
         "holds a Polygraphy AccuracyResult, not Polygraphy's RunResults"),
        (lambda d: write(d / "out.json", run_results_json({"r": [{"other": np.zeros((1, 10), np.float32)}]})),
         ["--load-inputs", "in.json"], "the saved outputs have no 'output' (they have 'other')"),
        (lambda d: write(d / "out.json", run_results_json({"r": [{"output": np.zeros((1, 9), np.float32)}]})),
         ["--load-inputs", "in.json"], "saved output 'output' is float32 [1, 9], the model gives float32 [1, 10] on these inputs"),
        (lambda d: write(d / "out.json", run_results_json({"a": [{}], "b": [{}]})), ["--load-inputs", "in.json"],
         "out.json: holds runners 'a', 'b': name one as"),
        (lambda d: write(d / "out.json", run_results_json({"r": [{}, {}]})), ["--load-inputs", "in.json"],
         "runner 'r' has 2 iteration(s), in.json holds 1 feed dict(s)"),
        (lambda d: write(d / "out.json", run_results_json({"r": [{}]})), [],
         "--load-outputs: give the inputs its outputs were made from"),
        (lambda d: write(d / "out.json", run_results_json({"r": [{"output": np.zeros(1)}]}).replace('"array": "k05V', '"array": "@@@@')),
         ["--input-dir", "."], "an ndarray that cannot be decoded"),
    ],
)
def test_bad_saved_outputs_exit_2_with_one_line(tmp_path, monkeypatch, make, options, message):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "input.npy", np.zeros((1, 64), np.float32))
    write(tmp_path / "in.json", inputs_json([{"input": np.zeros((1, 64), np.float32)}]))
    path = make(tmp_path)
    result = subprocess.run([sys.executable, "-m", "dml_ep", "compare", MODELS / "mlp.onnx", "--load-outputs", path.name, *options],
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith("dml-ep: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr



def one_line_error(status: int, out: str, err: str) -> bool:
    return status == 2 and out == "" and err.startswith("dml-ep: error: ") and err.count("\n") == 1


def inputs_for(option: str, folder: Path) -> list[str]:
    """What compare needs beside ``option``: --load-outputs, the inputs its outputs were made from."""
    if option == "--load-inputs":
        return []
    np.save(folder / "input.npy", np.zeros((1, 64), np.float32))
    return ["--input", f"input={folder / 'input.npy'}"]


@pytest.mark.parametrize("option", ["--load-inputs", "--load-outputs"])
def test_json_nested_too_deep_is_a_feed_error(capsys, tmp_path, option):
    """Python's json module recurses once per level: 100,000 levels were a RecursionError."""
    path = write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(FeedError, match="deep.json: JSON nested too deep to read"):
        (load_inputs if option == "--load-inputs" else load_run_results)(str(path))
    status, out, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", option, path, *inputs_for(option, tmp_path))
    assert one_line_error(status, out, err) and "deep.json: JSON nested too deep to read" in err, err


def huge_npy() -> bytes:
    """An .npy whose header claims 10^12 float32 elements (4 TB) and whose data is 16 bytes."""
    data = io.BytesIO()
    np.lib.format.write_array_header_1_0(data, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
    return data.getvalue() + bytes(16)


HUGE = "its header claims float32 [1000000000000], 4,000,000,000,000 bytes, and it holds 16"


@pytest.mark.parametrize("option", ["--load-inputs", "--load-outputs"])
def test_an_ndarray_claiming_more_than_its_data_is_a_feed_error(capsys, tmp_path, option):
    """numpy would allocate what the header claims before reading the data (a MemoryError); the
    same .npy as a file (--input) is refused by the same check."""
    array = {"array": base64.b64encode(huge_npy()).decode(), "polygraphy_class": "ndarray"}
    if option == "--load-inputs":
        path, load = write(tmp_path / "in.json", json.dumps([{"input": array}])), load_inputs
    else:
        results = {"lst": [["r", [{"outputs": {"output": {"values": array, "polygraphy_class": "LazyArray"}}, "runtime": None,
                                   "runner_name": "r", "polygraphy_class": "IterationResult"}]]], "polygraphy_class": "RunResults"}
        path, load = write(tmp_path / "out.json", json.dumps(results)), load_run_results
    with pytest.raises(FeedError, match=re.escape(f"an ndarray that cannot be decoded ({HUGE})")):
        load(str(path))
    status, out, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", option, path, *inputs_for(option, tmp_path))
    assert one_line_error(status, out, err) and f"{path.name}: an ndarray that cannot be decoded ({HUGE})" in err, err
    (tmp_path / "huge.npy").write_bytes(huge_npy())
    status, out, err = run_cli(capsys, "run", MODELS / "mlp.onnx", "--input", f"input={tmp_path / 'huge.npy'}")
    assert one_line_error(status, out, err) and f"huge.npy: cannot read an array ({HUGE})" in err, err

def test_polygraphy_files_take_one_model(capsys, tmp_path):
    status, out, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", MODELS / "small_cnn.onnx", "--save-outputs", tmp_path / "o.json")
    assert status == 2 and out == "" and "hold the runs of one model: give one, not 2" in err
    assert not (tmp_path / "o.json").exists()


def quantization_tolerances(model: onnx.ModelProto, outputs: dict) -> dict:
    """Per-output atol (rtol 0) for Polygraphy: one quantization step where a value is quantized,
    and what such steps make of the float values computed from it.

    dml_ep in onnxruntime's arithmetic gives onnxruntime's values but for float convolutions
    (DirectML's CONVOLUTION, summed in another order than MLAS): a float within a float32 sum's
    bound of onnxruntime's may quantize to the neighbouring code where it lies near a rounding
    boundary, and the float values computed from that code differ by what one step of it makes.
    So: 1 for integer tensors; 1.5 scales for a DequantizeLinear output (half a step more for
    float32 rounding); for a float Conv or MatMul, its input's tolerance times the largest sum of
    an output's weight magnitudes, plus a float32 sum's bound, 2 (K + 2) 2^-24 of the largest
    magnitude; an Add the sum of its inputs'; Relu, pooling and Flatten their input's. Other float
    tensors keep Polygraphy's default (1e-5). Each float product's output is also held to one step
    by the QuantizeLinear that reads it."""
    constants = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    atol, rtol = {"": 1e-5}, {"": 1e-5}
    for name, array in outputs.items():
        if array.dtype.kind in "iub":
            atol[name], rtol[name] = 1, 0
    dequantized = {}  # constant weights, dequantized
    for node in model.graph.node:
        out = node.output[0]
        if node.op_type == "DequantizeLinear":
            scale = constants.get(node.input[1])
            if scale is not None and scale.size == 1:
                atol[out], rtol[out] = 1.5 * float(scale), 0
            if node.input[0] in constants and scale is not None:
                zero = constants.get(node.input[2], np.zeros(1)) if len(node.input) > 2 else np.zeros(1)
                codes = constants[node.input[0]]
                axis = next((a.i for a in node.attribute if a.name == "axis"), 1) % max(codes.ndim, 1)
                shape = [-1 if i == axis else 1 for i in range(codes.ndim)] if scale.size > 1 else [1] * codes.ndim
                dequantized[out] = (codes - zero.reshape(shape)) * scale.reshape(shape)
        elif node.op_type in ("Conv", "MatMul") and node.input[0] in atol and node.input[1] in dequantized:
            w = np.abs(dequantized[node.input[1]])
            per_output = w.reshape(w.shape[0], -1).sum(axis=1) if node.op_type == "Conv" else w.sum(axis=0)
            k = w[0].size if node.op_type == "Conv" else w.shape[0]
            largest = float(np.abs(outputs[node.input[0]]).max()) if node.input[0] in outputs else 0.0
            atol[out], rtol[out] = (atol[node.input[0]] + 2 * (k + 2) * 2.0**-24 * largest) * float(per_output.max()) + 1e-5, 0
        elif node.op_type == "Add" and all(name in atol for name in node.input):
            atol[out], rtol[out] = sum(atol[name] for name in node.input), 0
        elif node.op_type in ("Relu", "GlobalAveragePool", "Flatten") and node.input[0] in atol:
            atol[out], rtol[out] = atol[node.input[0]], 0
    return {"atol": atol, "rtol": rtol}


# Polygraphy's relative difference divides 0 by 0 where both sides hold an integer 0.
@pytest.mark.host_sensitive
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.onnx")))
def test_polygraphy_comparator_with_every_tensor_an_output(name):
    """Polygraphy's own Comparator: onnxruntime against a dml_ep session (an OnnxrtRunner takes a
    callable making a session with onnxruntime's API), every tensor marked as an output. dml_ep in
    onnxruntime's arithmetic, which follows this host's u8s8 saturation (AVX2 CPUs without VNNI)."""
    pytest.importorskip("polygraphy")
    from polygraphy import constants
    from polygraphy.backend.onnx import BytesFromOnnx, ModifyOutputs, OnnxFromPath
    from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
    from polygraphy.comparator import Comparator, SimpleCompareFunc

    model = ModifyOutputs(OnnxFromPath(str(MODELS / name)), outputs=constants.MARK_ALL)
    data = BytesFromOnnx(model)
    runners = [OnnxrtRunner(lambda: dml_ep.InferenceSession(data(), arithmetic="onnxruntime"), name="dml_ep"),
               OnnxrtRunner(SessionFromOnnx(data), name="onnxruntime")]
    results = Comparator.run(runners)
    reference = results["onnxruntime"][0]
    assert list(results["dml_ep"][0].keys()) == list(reference.keys())
    tolerances = quantization_tolerances(model(), dict(reference.items()))
    assert Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(**tolerances))


@pytest.mark.parametrize("text, split", [
    (r"C:\out.json:onnxrt", (r"C:\out.json", "onnxrt")),
    ("C:/out.json", ("C:/out.json", None)),
    (r"D:\runs\out.json:onnxrt-runner-N0-05/06/24-10:11:12", (r"D:\runs\out.json", "onnxrt-runner-N0-05/06/24-10:11:12")),
    ("out.json:onnxrt", ("out.json", "onnxrt")),
    ("out.json", ("out.json", None)),
])
def test_load_outputs_file_runner_keeps_a_drive_letter(text, split):
    """``FILE[:RUNNER]``: a Windows drive's colon is part of FILE, not the start of RUNNER."""
    assert split_runner(text) == split
