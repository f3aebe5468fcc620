"""``compare DIR`` on a directory laid out as the ONNX model zoo: each data set compared, and its
shipped outputs checked against onnxruntime's and dml_ep's."""

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from dml_ep.cli.commands import main
from dml_ep.conformance.compare import compare_shipped
from dml_ep.interop.polygraphy_json import load_run_results
from dml_ep.ort.reference import cpu_session
from dml_ep.reports.report import ModelReport, Tolerance, compare_tensors
from dml_ep.runtime.inputs import random_inputs

MODELS = Path(__file__).resolve().parents[2] / "models"
MODEL = MODELS / "small_cnn.qdq.onnx"


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def write_tensor(path: Path, array: np.ndarray, name: str) -> None:
    path.write_bytes(numpy_helper.from_array(array, name).SerializeToString())


@pytest.fixture
def zoo(tmp_path):
    """A model zoo directory: model.onnx and two data sets whose shipped outputs are onnxruntime's
    (ort-exact) on seeded random inputs."""
    root = tmp_path / "small_cnn"
    root.mkdir()
    shutil.copy(MODEL, root / "model.onnx")
    model = onnx.load(MODEL)
    session = cpu_session(model, "ort-exact")
    for index in range(2):
        data_set = root / f"test_data_set_{index}"
        data_set.mkdir()
        feeds = random_inputs(model, seed=index)
        for position, (name, array) in enumerate(feeds.items()):
            write_tensor(data_set / f"input_{position}.pb", array, name)
        for position, (info, array) in enumerate(zip(session.get_outputs(), session.run(None, feeds))):
            write_tensor(data_set / f"output_{position}.pb", array, info.name)
    return root


def compare_zoo(capsys, zoo, *options):
    status, out, err = run_cli(capsys, "compare", zoo, "--reference", "ort-exact", "--quiet", "--json", zoo.parent / "r.json", *options)
    return status, out, err, json.loads((zoo.parent / "r.json").read_text())


@pytest.mark.host_sensitive
def test_every_data_set_is_compared_and_its_shipped_outputs_match(capsys, zoo):
    status, out, _, report = compare_zoo(capsys, zoo)
    assert status == 0, out
    assert [m["model"] for m in report["models"]] == [str(zoo / "test_data_set_0"), str(zoo / "test_data_set_1")]
    for model in report["models"]:
        assert model["ok"]
        (shipped,) = model["shipped"]
        assert shipped["name"] == "output" and not shipped["faults_candidate"]
        assert shipped["reference"]["equal"] == shipped["candidate"]["equal"] == shipped["reference"]["elements"] == 10
    assert out.count("shipped outputs (output_<i>.pb)") == 2 and "summary:" in out


@pytest.mark.host_sensitive
def test_a_wrong_shipped_output_is_reported_but_not_judged(capsys, zoo):
    """Shipped outputs that onnxruntime misses too (made by another runtime, or wrong) are shown,
    and leave the verdict to onnxruntime against dml_ep."""
    path = zoo / "test_data_set_1" / "output_0.pb"
    shipped = numpy_helper.to_array(onnx.load_tensor(path))
    write_tensor(path, shipped + np.float32(1.0), "output")
    status, out, _, report = compare_zoo(capsys, zoo)
    assert status == 0, out
    first, second = (m["shipped"][0] for m in report["models"])
    assert first["reference"]["within_tolerance"] and first["candidate"]["within_tolerance"]
    assert not second["reference"]["within_tolerance"] and not second["candidate"]["within_tolerance"]
    assert second["reference"]["equal"] == 0 and not second["faults_candidate"]
    assert "not judged: ort-exact differs from it" in out


@pytest.mark.host_sensitive
def test_dml_ep_missing_a_shipped_output_onnxruntime_matches_fails(capsys, zoo, break_dml_node):
    """dml_ep's last DML node off by one step: every element of the output is one step off."""
    break_dml_node("classifier.add")
    status, out, _, report = compare_zoo(capsys, zoo)
    assert status == 1
    for model in report["models"]:
        (shipped,) = model["shipped"]
        assert shipped["faults_candidate"] and shipped["reference"]["equal"] == 10
        assert shipped["candidate"]["equal"] == 0 and shipped["candidate"]["max_diff"] == 1
    assert "MISMATCH: ort-exact matches it, dml_ep does not" in out
    assert "1 shipped output(s) missed where onnxruntime matches" in out


def test_shipped_outputs_fault_dml_ep_only_where_onnxruntime_matches_them():
    """Hand-made: within --steps 1 of onnxruntime, dml_ep passes, yet it is 2 steps from a shipped
    output that onnxruntime is 1 step from; a shipped output 3 steps from onnxruntime judges nothing."""
    reference = {"y": np.array([0, 1], np.uint8)}
    candidate = {"y": np.array([0, 2], np.uint8)}

    def report():
        outputs = [compare_tensors("y", candidate["y"], reference["y"], 1.0, Tolerance(steps=1))]
        return ModelReport("m", "ort", "directml", "6_4", Tolerance(steps=1), outputs, {}, candidate_outputs=candidate, reference_outputs=reference)

    judged = report()
    assert judged.ok
    compare_shipped(judged, {"y": np.array([0, 0], np.uint8)})
    assert judged.shipped[0].faults_candidate and not judged.ok
    not_judged = report()
    compare_shipped(not_judged, {"y": np.array([0, 4], np.uint8)})
    assert not not_judged.shipped[0].reference.within_tolerance and not_judged.ok


@pytest.mark.host_sensitive
def test_the_one_onnx_file_is_the_model_and_model_onnx_wins(capsys, zoo):
    (zoo / "model.onnx").rename(zoo / "small_cnn.qdq.onnx")
    assert run_cli(capsys, "compare", zoo, "--reference", "ort-exact", "--quiet")[0] == 0
    shutil.copy(MODELS / "mlp.onnx", zoo / "model.onnx")  # the data sets do not fit it
    status, _, err = run_cli(capsys, "compare", zoo, "--reference", "ort-exact", "--quiet")
    assert status == 2 and "input 'input'" in err


@pytest.mark.host_sensitive
def test_the_saved_runs_of_every_data_set(capsys, zoo):
    """--save-outputs on a model zoo directory: one iteration per data set, the reference's equal
    to the shipped outputs (onnxruntime's)."""
    status, _, _ = run_cli(capsys, "compare", zoo, "--reference", "ort-exact", "--quiet", "--save-outputs", zoo.parent / "out.json")
    assert status == 0
    runs = load_run_results(str(zoo.parent / "out.json"))
    assert list(runs) == ["dml_ep", "onnxruntime-ort-exact"]
    for index, outputs in enumerate(runs["onnxruntime-ort-exact"]):
        shipped = numpy_helper.to_array(onnx.load_tensor(zoo / f"test_data_set_{index}" / "output_0.pb"))
        np.testing.assert_array_equal(outputs["output"], shipped)


def no_model(zoo):
    (zoo / "model.onnx").unlink()


def two_models(zoo):
    (zoo / "model.onnx").rename(zoo / "a.onnx")
    shutil.copy(zoo / "a.onnx", zoo / "b.onnx")


def no_inputs(zoo):
    (zoo / "test_data_set_1" / "input_0.pb").unlink()


def extra_output(zoo):
    write_tensor(zoo / "test_data_set_0" / "output_1.pb", np.zeros(1, np.float32), "")


def wrong_shape(zoo):
    write_tensor(zoo / "test_data_set_0" / "output_0.pb", np.zeros((1, 9), np.float32), "output")


@pytest.mark.host_sensitive
@pytest.mark.parametrize(
    "spoil, options, message",
    [
        (no_model, [], "test_data_set_* folders but no *.onnx model"),
        (two_models, [], "test_data_set_* folders but 2 models (a.onnx, b.onnx) and no model.onnx"),
        (no_inputs, [], "test_data_set_1: no <input name>.npy or input_<i>.pb files"),
        (extra_output, [], "test_data_set_0/output_1.pb: the model has only 1 output(s)"),
        (wrong_shape, [], "saved output 'output' is float32 [1, 9], the model gives float32 [1, 10] on these inputs"),
        (None, ["--input-dir", "."], "a model zoo directory brings its inputs and outputs"),
    ],
)
def test_bad_model_zoo_directories_exit_2(capsys, zoo, spoil, options, message):
    if spoil:
        spoil(zoo)
    status, _, err = run_cli(capsys, "compare", zoo, "--quiet", *options)
    assert status == 2
    assert message in err and err.count("dml-ep: error: ") == 1


def test_a_directory_without_models_or_data_sets_is_an_error(capsys, tmp_path):
    status, _, err = run_cli(capsys, "compare", tmp_path)
    assert status == 2 and err == f"dml-ep: error: {tmp_path}: no ONNX models found\n"


@pytest.mark.host_sensitive
def test_a_glob_matching_directories_takes_zoo_layouts_and_other_folders_models(capsys, zoo):
    """``compare 'DIR/*'``: a matched folder not laid out as a zoo gives its *.onnx (it was an
    internal error: its missing layout unpacked), a zoo folder its data sets, a file itself."""
    plain = zoo.parent / "plain"
    plain.mkdir()
    shutil.copy(MODELS / "mlp.onnx", plain / "mlp.onnx")
    shutil.copy(MODELS / "mlp.onnx", zoo.parent / "loose.onnx")
    (zoo.parent / "empty").mkdir()
    status, out, err, report = compare_zoo(capsys, zoo.parent / "*")
    assert status == 0, err
    assert sorted(m["model"] for m in report["models"]) == sorted(
        [str(zoo.parent / "loose.onnx"), str(plain / "mlp.onnx"), str(zoo / "test_data_set_0"), str(zoo / "test_data_set_1")])
    status, _, err = run_cli(capsys, "compare", zoo.parent / "empty" / "*")
    assert status == 2 and "no ONNX models found" in err
