"""DxDispatch export and replay: exported JSON is DxDispatch's format (its schema, its examples'
spelling), and replaying an export with dml_ep's kernels gives, bit for bit, what dml_ep's run gave.

DxDispatch's ``_schema.json`` and example models are read from ``../shared/dxdispatch/`` beside the
repository (they are not copied into it); the tests that need them skip when it is absent, except
in CI (the CI environment variable set), which lays shared/ beside the clone: there they fail.
"""

from __future__ import annotations

import copy
import json
import os
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from dxdispatch_replays import MISSING_SHARED, SHARED, export_and_replay, schema_validator, shipped_schema, validate
from onnx_builders import Feed, add, qlinear_add, qlinear_conv, qlinear_matmul, single_node_model

import dml_ep
from dml_ep.core.errors import DxDispatchError
from dml_ep.interop import dxdispatch
from dml_ep.interop.dxdispatch import descs
from dml_ep.ort.reference import cpu_session
from dml_ep.runtime.inputs import random_inputs

EXAMPLES = ["dml_convolution_2d.json", "dml_element_wise_add1.json", "dml_owned_tensors.json"]
BUILT = ["mlp", "small_cnn", "transformer_block", "squeezenet", "shufflenet", "resnet50"]

# In CI the tests run regardless, and fail on the missing files.
needs_shared = pytest.mark.skipif(not SHARED.is_dir() and not os.environ.get("CI"), reason=MISSING_SHARED)


def direct_outputs(model, feeds, **options) -> dict:
    session = dml_ep.InferenceSession(model, **options)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


# --- the schema and DxDispatch's examples ------------------------------------------------------


@needs_shared
def test_shipped_schema_fails_only_at_array_items():
    import jsonschema

    with pytest.raises(jsonschema.SchemaError) as raised:
        jsonschema.Draft202012Validator.check_schema(shipped_schema())
    assert list(raised.value.path) == ["$defs", "arrayInitializer", "items"]
    schema_validator(documented_forms=False)  # fixed there, it is a valid schema


@needs_shared
@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_validate_and_load(example):
    data = json.loads((SHARED / example).read_text())
    for documented_forms in (False, True):
        assert not list(schema_validator(documented_forms).iter_errors(data))
    model = dxdispatch.load(str(SHARED / example))
    assert set(model.dispatchables) == set(data["dispatchables"])
    assert len(model.commands) == len(data["commands"])


@needs_shared
def test_add1_example_replays_with_directml_elu():
    """A + B = [6, 10, -2], then ELU(Alpha 0.5): x for x >= 0, Alpha * (exp(x) - 1) below."""
    out = dxdispatch.load(str(SHARED / "dml_element_wise_add1.json")).run()["Out"]
    assert out.dtype == np.float32 and out.tolist()[:2] == [6.0, 10.0]
    elu = 0.5 * (math.exp(-2.0) - 1.0)
    assert abs(float(out[2]) - elu) <= abs(np.spacing(np.float32(elu)))  # within one float32 step


@needs_shared
def test_convolution_example_replays():
    """Input 1..9 as 3x3, a 2x2 filter of 0.5, no padding: each output half the sum of its window."""
    out = dxdispatch.load(str(SHARED / "dml_convolution_2d.json")).run()["output"]
    assert out.dtype == np.float32 and out.reshape(-1).tolist() == [6.0, 8.0, 12.0, 14.0]


@needs_shared
def test_owned_tensors_example_replays():
    """ELEMENT_WISE_ADD with A bound to the dispatchable (OWNED_BY_DML) and B at the dispatch: [6, 10, -2]."""
    out = dxdispatch.load(str(SHARED / "dml_owned_tensors.json")).run()["Out"]
    assert out.dtype == np.float32 and out.tolist() == [6.0, 10.0, -2.0]


@needs_shared
def test_examples_of_operators_dml_ep_does_not_model_say_so_when_run(tmp_path):
    """The owned-tensors example with its ADD made an ELEMENT_WISE_ATAN, which dml_ep does not model."""
    data = json.loads((SHARED / "dml_owned_tensors.json").read_text())
    dispatchable = data["dispatchables"]["add"]
    dispatchable.update(type="DML_OPERATOR_ELEMENT_WISE_ATAN", bindings={"InputTensor": "A"})
    dispatchable["desc"] = {"InputTensor": dispatchable["desc"]["ATensor"], "OutputTensor": dispatchable["desc"]["OutputTensor"]}
    data["commands"][0]["bindings"] = {"OutputTensor": "Out"}
    (tmp_path / "atan.json").write_text(json.dumps(data))
    model = dxdispatch.load(str(tmp_path / "atan.json"))
    with pytest.raises(DxDispatchError, match="DML_OPERATOR_ELEMENT_WISE_ATAN is not modelled by dml_ep"):
        model.run()


@needs_shared
def test_exports_leave_the_shipped_schema_only_in_documented_forms(built, tmp_path):
    made = dxdispatch.export(built("small_cnn"), str(tmp_path / "out"))
    model_json = made.model
    for error in schema_validator(documented_forms=False).iter_errors(model_json):
        path = list(error.absolute_path)
        if path[0] == "resources":
            assert path[2:] == ["initialValues"] and "sourcePath" in error.instance, path
        else:
            assert path[0] == "commands" and model_json["commands"][path[1]]["type"] == "writeFile", path


# --- exports of the built models -----------------------------------------------------------


@pytest.mark.parametrize("quant_format", ["qoperator", "qdq"])
@pytest.mark.parametrize("name", BUILT)
def test_built_models_export_validate_and_replay_bit_exactly(built, tmp_path, name, quant_format):
    path = built(name, quant_format)
    feeds = random_inputs(onnx.load(path), seed=1)
    made, replayed = export_and_replay(path, tmp_path / "out", feeds)
    assert made.sequences and all(made.sequences)
    direct = direct_outputs(path, feeds)
    for name_, value in direct.items():  # the graph outputs DirectML makes, and those the fallback makes
        np.testing.assert_array_equal(made.values[name_], value, strict=True)
        if name_ in made.outputs:
            np.testing.assert_array_equal(replayed[name_], value, strict=True)
    for entry in made.plan.dml_nodes:  # the serializer's way back
        assert descs.from_dict(descs.to_dict(entry.desc)) == entry.desc


# --- the four operators, fused activations, broadcasts, per-channel parameters -------------------


def single(made, operator):
    (dispatchable,) = made.model["dispatchables"].values()
    assert dispatchable["type"] == operator
    return dispatchable


def test_quantized_convolution_with_per_channel_filter_parameters(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (2, 4, 9, 7), dtype=np.uint8)
    w = rng.integers(-128, 128, (6, 4, 3, 3), dtype=np.int8)
    w_scale = (rng.random(6) * 0.02 + 0.001).astype(np.float32)
    w_zp = np.array([0, 1, -2, 3, 0, -1], np.int8)
    bias = rng.integers(-5000, 5000, 6, dtype=np.int32)
    model, feeds = qlinear_conv(x, np.float32(0.05), np.uint8(128), w, w_scale, w_zp, np.float32(0.3), np.uint8(120), bias,
                                pads=[1, 0, 1, 2], strides=[2, 1])
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    dispatchable = single(made, "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION")
    desc = dispatchable["desc"]
    assert desc["FilterScaleTensor"]["Sizes"] == [1, 6, 1, 1] and desc["FilterZeroPointTensor"]["Sizes"] == [1, 6, 1, 1]
    assert (desc["StartPadding"], desc["EndPadding"], desc["Strides"], desc["GroupCount"]) == ([1, 0], [1, 2], [2, 1], 1)
    assert dispatchable["bindings"] == {"FilterTensor": "in3", "BiasTensor": "in8"}  # OWNED_BY_DML: bound at initialization
    assert desc["FilterTensor"]["Flags"] == "OWNED_BY_DML"
    np.testing.assert_array_equal(np.load(tmp_path / "out" / made.model["resources"]["in5"]["initialValues"]["sourcePath"]), w_zp)
    np.testing.assert_array_equal(replayed["y"], direct_outputs(model, feeds)["y"], strict=True)


def test_quantized_convolution_1d_and_grouped(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 6, 20), dtype=np.int8)
    w = rng.integers(-128, 128, (6, 2, 5), dtype=np.int8)
    model, feeds = qlinear_conv(x, np.float32(0.1), np.int8(-3), w, np.float32(0.01), np.int8(0), np.float32(0.2), np.int8(5),
                                group=3, dilations=[2])
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    desc = single(made, "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION")["desc"]
    assert desc["InputTensor"]["Sizes"] == [1, 6, 1, 20] and desc["GroupCount"] == 3 and desc["Dilations"] == [1, 2]
    np.testing.assert_array_equal(replayed["y"], direct_outputs(model, feeds)["y"].reshape(replayed["y"].shape), strict=True)


def test_quantized_matrix_multiply_with_per_column_parameters_and_b_bound_at_execution(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (3, 5, 16), dtype=np.uint8)
    b = rng.integers(-128, 128, (16, 8), dtype=np.int8)
    b_scale = (rng.random(8) * 0.01 + 0.001).astype(np.float32)
    b_zp = np.arange(8, dtype=np.int8) - 4
    model, feeds = qlinear_matmul(a, np.float32(0.02), np.uint8(100), Feed(b), b_scale, b_zp, np.float32(0.5), np.uint8(128))
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    dispatchable = single(made, "DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY")
    assert "BTensor" not in dispatchable["bindings"] and made.model["commands"][0]["bindings"]["BTensor"] == "in3"
    assert dispatchable["bindings"]["BScaleTensor"] == "in4"  # a constant parameter: OWNED_BY_DML, bound at initialization
    assert dispatchable["desc"]["BScaleTensor"]["Sizes"] == [1, 1, 1, 8]
    np.testing.assert_array_equal(replayed["y"], direct_outputs(model, feeds)["y"], strict=True)


def test_a_scalar_output_is_written_as_one_element(tmp_path):
    """DxDispatch's writeFile takes ``dimensions`` of positive sizes: a 0-d output is [1], in
    expected/ too, so that the diff compares like with like."""
    rng = np.random.default_rng(6)
    a, b = rng.integers(0, 256, 16, dtype=np.uint8), rng.integers(-128, 128, 16, dtype=np.int8)
    model, feeds = qlinear_matmul(a, np.float32(0.02), np.uint8(100), b, np.float32(0.01), np.int8(0), np.float32(0.5), np.uint8(128))
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    assert made.model["commands"][-1]["dimensions"] == [1] and replayed["y"].shape == (1,)
    assert replayed["y"][0] == direct_outputs(model, feeds)["y"][()]


def test_quantized_add_broadcasts_with_zero_strides(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (2, 3, 4, 5), dtype=np.uint8)
    b = rng.integers(0, 256, (3, 1, 1), dtype=np.uint8)
    model, feeds = qlinear_add(a, np.float32(0.1), np.uint8(128), b, np.float32(0.07), np.uint8(3), np.float32(0.15), np.uint8(100))
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    desc = single(made, "DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD")["desc"]
    assert desc["BTensor"]["Sizes"] == [2, 3, 4, 5] and desc["BTensor"]["Strides"] == [0, 1, 0, 0]
    assert desc["BTensor"]["TotalTensorSizeInBytes"] == 4 and "Strides" not in desc["ATensor"]
    np.testing.assert_array_equal(replayed["y"], direct_outputs(model, feeds)["y"], strict=True)


@pytest.mark.parametrize("activation, attributes, fused", [
    (None, {}, None),
    ("Relu", {}, {"Type": "ACTIVATION_RELU"}),
    ("LeakyRelu", {"alpha": 0.25}, {"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.25}),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_add1_with_fused_activation_and_broadcast(tmp_path, activation, attributes, fused, dtype):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 4)).astype(dtype), rng.standard_normal((3, 1)).astype(dtype)
    model, feeds = add(a, b, activation=activation, **attributes)
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    desc = single(made, "DML_OPERATOR_ELEMENT_WISE_ADD1")["desc"]
    assert desc.get("FusedActivation") == fused
    assert desc["BTensor"]["Sizes"] == [1, 2, 3, 4] and desc["BTensor"]["Strides"] == [0, 0, 1, 0]  # 4-D, as the DML EP pads
    output = made.plan.dml_nodes[0].output
    np.testing.assert_array_equal(replayed[output], direct_outputs(model, feeds)["y"], strict=True)


# --- fallback islands ------------------------------------------------------------------------


def test_fallback_islands_become_dispatch_sequences_with_captured_inputs(built, tmp_path):
    """small_cnn at FL 6_1: convolutions and adds, the global average pool on the CPU fallback
    (QUANTIZED_LINEAR_AVERAGE_POOLING is FL 6_2), the classifier; the values the fallback makes are
    stored, and the directory stands alone."""
    model = built("small_cnn")
    feeds = random_inputs(onnx.load(model), seed=3)
    made, _ = export_and_replay(model, tmp_path / "out", feeds, feature_level="6_1")
    assert len(made.sequences) == 2 and made.captured
    fallback_outputs = {name for entry in made.plan.fallback_nodes for name in entry.outputs}
    assert set(made.captured) <= fallback_outputs
    session = dml_ep.InferenceSession(model)
    values = session.executor.run(feeds, keep_all=True)
    for name in made.captured:
        resource = made.model["resources"][name]["initialValues"]
        np.testing.assert_array_equal(np.load(tmp_path / "out" / resource["sourcePath"]), values[name], strict=True)
    read_by_fallback = {name for entry in made.plan.fallback_nodes for name in entry.value_inputs}
    assert set(made.outputs) == {entry.output for entry in made.plan.dml_nodes} & (read_by_fallback | {o.name for o in made.plan.outputs})
    moved = shutil.move(str(tmp_path / "out"), str(tmp_path / "elsewhere"))
    replayed = dxdispatch.load(moved).run()
    for name, value in replayed.items():
        np.testing.assert_array_equal(value, made.values[name], strict=True)
    readme = (Path(moved) / "README.txt").read_text()
    assert dxdispatch.COMMAND_LINE in readme and all(name in readme for name in made.captured)


@pytest.mark.host_sensitive
def test_a_model_with_nothing_on_the_fallback_is_one_sequence(built, tmp_path):
    """small_cnn (QOperator, uint8): every node runs on DirectML, its global average pool and
    Flatten too, so the export is one sequence of every operator, replayed to onnxruntime's output."""
    model = built("small_cnn")
    feeds = random_inputs(onnx.load(model), seed=3)
    made, replayed = export_and_replay(model, tmp_path / "out", feeds, arithmetic="onnxruntime")
    assert not made.plan.fallback_nodes and len(made.sequences) == 1 and not made.captured
    assert len(made.sequences[0]) == len(made.plan.dml_nodes)
    np.testing.assert_array_equal(replayed["output"], cpu_session(onnx.load(model), "ort").run(None, feeds)[0])


def test_a_difference_in_one_sequence_does_not_spread(built, tmp_path):
    """The second sequence reads the captured fallback value, not the first sequence's result:
    breaking one resource of the first sequence changes only the first sequence's outputs."""
    made = dxdispatch.export(built("small_cnn"), str(tmp_path / "out"), feature_level="6_1")
    model = dxdispatch.load(str(tmp_path / "out"))
    first_input = made.model["commands"][0]["bindings"]["InputTensor"]
    model.resources[first_input].buffer[:] = bytes(len(model.resources[first_input].buffer))
    replayed = model.run()
    second = set(made.sequences[1])
    later_outputs = {c["bindings"]["OutputTensor"] for c in made.model["commands"] if c["type"] == "dispatch" and c["dispatchable"] in second}
    for name, value in replayed.items():
        same = np.array_equal(value, made.values[name])
        assert same == (name in later_outputs), name


# --- descs both ways -----------------------------------------------------------------------


def test_from_dict_reads_dxdispatch_spellings():
    long_form = {
        "Type": "DML_OPERATOR_ELEMENT_WISE_ADD1",
        "Desc": {
            "ATensor": {"Type": "DML_TENSOR_TYPE_BUFFER", "Desc": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 3],
                                                                   "Flags": ["DML_TENSOR_FLAG_NONE"], "DimensionCount": 2}},
            "BTensor": {"DataType": "FLOAT32", "Sizes": [1, 3], "Strides": [0, 0], "Flags": "OWNED_BY_DML"},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 3], "Strides": [3, 1]},
            "FusedActivation": {"Type": "DML_OPERATOR_ACTIVATION_LEAKY_RELU", "Desc": {"Alpha": 0.5}},
        },
    }
    desc = descs.from_dict(long_form)
    assert desc.OutputTensor.Strides is None and desc.OutputTensor.TotalTensorSizeInBytes == 12  # packed strides read as packed
    assert desc.BTensor.Strides == (0, 0) and desc.BTensor.TotalTensorSizeInBytes == 4 and desc.BTensor.Flags == dml_ep.DML_TENSOR_FLAGS.OWNED_BY_DML
    assert desc.FusedActivation.Alpha == 0.5 and desc.FusedActivation.fused
    assert descs.from_dict(descs.to_dict(desc)) == desc


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["desc"].pop("Strides"), r"Strides: missing"),
    (lambda d: d["desc"].pop("FilterTensor"), r"FilterTensor: missing"),
    (lambda d: d["desc"].update(Padding=[0, 0]), r"has no field 'Padding'"),
    (lambda d: d["desc"]["InputTensor"].update(DataType="UINT9"), r"unknown data type 'UINT9'"),
    (lambda d: d["desc"]["InputTensor"].update(TotalTensorSizeInBytes=8), r"less than the 3072 bytes"),
    (lambda d: d["desc"]["InputTensor"].update(Flags="OWNED"), r"unknown tensor flag 'OWNED'"),
    (lambda d: d["desc"]["InputTensor"].update(Strides=[1, 1]), r"do not agree"),
    (lambda d: d.update(type="DML_OPERATOR_ELEMENT_WISE_ATAN"), r"DML_OPERATOR_ELEMENT_WISE_ATAN is not modelled by dml_ep"),
])
def test_from_dict_refuses_malformed_descs(built, edit, message):
    plan = dml_ep.InferenceSession(built("small_cnn")).plan
    conv = next(e for e in plan.dml_nodes if e.operator == "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION")
    dispatchable = copy.deepcopy(descs.to_dict(conv.desc))
    edit(dispatchable)
    with pytest.raises(DxDispatchError, match=message):
        descs.from_dict(dispatchable)


def test_fused_activation_parameters_are_required_as_in_dxdispatch():
    tensor = {"DataType": "FLOAT32", "Sizes": [3]}
    dispatchable = {"type": "ELEMENT_WISE_ADD1", "desc": {"ATensor": tensor, "BTensor": tensor, "OutputTensor": tensor,
                                                         "FusedActivation": {"Type": "ACTIVATION_ELU"}}}
    with pytest.raises(DxDispatchError, match=r"FusedActivation.Alpha: missing"):
        descs.from_dict(dispatchable)


# --- replay errors -------------------------------------------------------------------------


def _exported(tmp_path) -> Path:
    model, feeds = add(np.ones((2, 3), np.float32), np.ones(3, np.float32), activation="Relu")
    dxdispatch.export(model, str(tmp_path / "out"), feeds)
    return tmp_path / "out"


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["resources"]["in0"].update(sizeInBytes=4, initialValues={"valueCount": 1, "value": 1.0}),
     r"ATensor is bound to 'in0', 4 bytes, less than its TotalTensorSizeInBytes 24"),
    (lambda m: m["commands"].append({"type": "copy", "resource": "in0"}), r"unknown command type 'copy'"),
    (lambda m: m["commands"][0]["bindings"].pop("BTensor"), r"nothing bound for BTensor"),
    (lambda m: m["commands"][0]["bindings"].update(BTensor="nowhere"), r"'nowhere', which is not a resource"),
    (lambda m: m["resources"]["in0"]["initialValues"].update(sourcePath="missing.npy"), r"no file 'missing.npy'"),
    (lambda m: m["resources"]["in0"].update(initialValuesDataType="INT32"), r"holds FLOAT32, initialValuesDataType says INT32"),
])
def test_replay_refuses_what_dxdispatch_or_directml_would(tmp_path, edit, message):
    directory = _exported(tmp_path)
    data = json.loads((directory / "model.json").read_text())
    edit(data)
    (directory / "model.json").write_text(json.dumps(data))
    with pytest.raises(DxDispatchError, match=message):
        dxdispatch.load(str(directory)).run()



def _source(m) -> dict:
    return m["resources"]["in0"]["initialValues"]


@pytest.mark.parametrize("edit, message", [
    # a resource file outside the model's folder, however named (onnxruntime refuses such external data)
    (lambda m: _source(m).update(sourcePath="../outside.npy"), r"'\.\./outside\.npy' is not in the model's folder"),
    (lambda m: _source(m).update(sourcePath="resources/../../outside.npy"), r"is not in the model's folder"),
    (lambda m: _source(m).update(sourcePath=str(Path(m["_folder"]).parent / "outside.npy")), r"is not in the model's folder"),
    (lambda m: _source(m).update(sourcePath="/etc/passwd"), r"'/etc/passwd' is not in the model's folder"),
    (lambda m: _source(m).update(sourcePath="link.npy"), r"'link\.npy' is not in the model's folder"),  # a symbolic link out
    (lambda m: _source(m).update(sourcePath="outside.npy"), r"no file 'outside\.npy' in the model's folder"),  # only in the cwd
    (lambda m: _source(m).update(sourcePath="in\u0000.npy"), r"sourcePath must be a file name"),
    (lambda m: _source(m).update(sourcePath=123), r"sourcePath must be a file name, not 123"),
    # sizes and offsets that are not byte counts a device holds, or that would place data wrongly
    (lambda m: m["resources"]["in0"].update(initialValuesOffsetInBytes=-4, sizeInBytes=24), r"initialValuesOffsetInBytes: -4 is not a byte count"),
    (lambda m: m["resources"]["in0"].update(sizeInBytes=2**62), r"sizeInBytes: 4611686018427387904 is not a byte count"),
    (lambda m: m["resources"]["in0"].update(sizeInBytes="100"), r"sizeInBytes: '100' is not a byte count"),
    (lambda m: m["resources"]["in0"].update(sizeInBytes=1e3), r"sizeInBytes: 1000.0 is not a byte count"),
    (lambda m: m["resources"]["in1"].update(initialValuesDataType="FLOAT32", initialValues={"valueCount": 2**40, "value": 1.0}),
     r"valueCount 1099511627776 is not a count of elements a buffer holds"),
    (lambda m: m["resources"]["in1"].update(initialValuesDataType="FLOAT32", initialValues={"valueCount": -1, "value": 1.0}),
     r"valueCount -1 is not a count"),
    # the structure itself
    (lambda m: m.update(resources=[]), r"resources and dispatchables \(objects\) and commands \(a list\)"),
    (lambda m: m.update(commands=5), r"commands \(a list\)"),
    (lambda m: m["commands"][0].pop("bindings"), r"nothing bound for ATensor"),
    (lambda m: m["commands"][0]["bindings"].update(BTensor=[["in1"]]), r"\['in1'\] is not a resource name"),
    (lambda m: m["commands"][0].update(dispatchable=["x"]), r"no dispatchable \['x'\]"),
    (lambda m: [c.update(dimensions=[4, 7]) for c in m["commands"] if c["type"] == "writeFile"],
     r"dimensions \[4, 7\] are not sizes of at most the 6 elements"),
    (lambda m: [c.update(dimensions="abc") for c in m["commands"] if c["type"] == "writeFile"], r"dimensions 'abc' are not sizes"),
])
def test_replay_refuses_tampered_folders_before_reading(tmp_path, edit, message):
    """Hostile edits of an export: each a DxDispatchError, never another exception, data from outside
    the folder, or a run on misplaced data (a negative offset resized the buffer and ran)."""
    directory = _exported(tmp_path)
    np.save(tmp_path / "outside.npy", np.full((2, 3), 5, np.float32))
    (directory / "link.npy").symlink_to(tmp_path / "outside.npy")
    data = json.loads((directory / "model.json").read_text())
    data["_folder"] = str(directory)
    edit(data)
    data.pop("_folder", None)
    (directory / "model.json").write_text(json.dumps(data))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # DxDispatch's own fallback, the current directory, holds outside.npy
    try:
        with pytest.raises(DxDispatchError, match=message):
            dxdispatch.load(str(directory)).run()
    finally:
        os.chdir(cwd)


def test_replay_maps_a_npy_file_whose_header_claims_more_than_it_holds(tmp_path):
    """A .npy header of 2^40 elements on a file of 24 bytes: refused before 4 TiB are allocated."""
    directory = _exported(tmp_path)
    data = json.loads((directory / "model.json").read_text())
    path = directory / _source(data)["sourcePath"]
    header = np.lib.format.header_data_from_array_1_0(np.ones((2, 3), np.float32))
    header["shape"] = (2**20, 2**20)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(np.ones(6, np.float32).tobytes())
    with pytest.raises(DxDispatchError, match="cannot read .*mmap length is greater than file size"):
        dxdispatch.load(str(directory))


def test_load_refuses_json_nested_too_deep(tmp_path):
    """Python's json module recurses once per level: 100,000 levels were a RecursionError."""
    (tmp_path / "model.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DxDispatchError, match="model.json: JSON nested too deep to read"):
        dxdispatch.load(str(tmp_path))

# --- the CLI -------------------------------------------------------------------------------


def dml_ep_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dml_ep", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_cli_export_with_inputs_and_feature_level(built, tmp_path):
    model = built("small_cnn")
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = dml_ep_cli("export", model, "--dxdispatch", tmp_path / "fl4", "--input", f"input={tmp_path / 'x.npy'}")
    assert result.returncode == 0, result.stderr
    assert "dxdispatch.exe model.json" in result.stdout
    fl4 = dxdispatch.load(str(tmp_path / "fl4"))
    types = {d.type for d in fl4.dispatchables.values()}
    assert "DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD" in types
    direct = direct_outputs(model, {"input": x})
    np.testing.assert_array_equal(np.load(tmp_path / "fl4" / "expected" / "output.npy"), direct["output"], strict=True)

    result = dml_ep_cli("export", model, "--dxdispatch", tmp_path / "fl21", "--feature-level", "2_1", "--input", f"input={tmp_path / 'x.npy'}")
    assert result.returncode == 0, result.stderr
    fl21 = json.loads((tmp_path / "fl21" / "model.json").read_text())
    # QLinearAdd needs FL 4_0, QLinearGlobalAveragePool 6_2; the Flatten's 2-D IDENTITY 3_0 (4-D and 5-D before)
    below_2_1 = {"DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD", "DML_OPERATOR_QUANTIZED_LINEAR_AVERAGE_POOLING", "DML_OPERATOR_ELEMENT_WISE_IDENTITY"}
    assert {d["type"] for d in fl21["dispatchables"].values()} == types - below_2_1
    replayed = dxdispatch.load(str(tmp_path / "fl21")).run()
    expected = {p.stem: np.load(p) for p in (tmp_path / "fl21" / "expected").glob("*.npy")}
    assert replayed and all(np.array_equal(value, expected[name]) for name, value in replayed.items())
    validate(fl21)


def test_cli_export_of_a_model_with_nothing_on_directml_says_so(tmp_path):
    model, _ = single_node_model("Softplus", [Feed(np.ones(3, np.float32))], np.float32, 1)  # not modelled by dml_ep
    onnx.save(model, tmp_path / "softplus.onnx")
    result = dml_ep_cli("export", tmp_path / "softplus.onnx", "--dxdispatch", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no node of this model runs on DirectML" in result.stderr and not (tmp_path / "out").exists()


def test_cli_export_never_replaces_what_is_there(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    result = dml_ep_cli("export", Path(__file__).parents[2] / "models" / "mlp.onnx", "--dxdispatch", target)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "not empty" in result.stderr and "dml-ep: error:" in result.stderr
    assert [p.name for p in target.iterdir()] == ["notes.txt"] and (target / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".taken-")]  # no staging folder left
