"""DequantizeLinear-21 as the DML EP builds it (DmlOperatorQuantization21: DML_OPERATOR_DEQUANTIZE),
against onnxruntime's CPU DequantizeLinear: int4, uint4, int8 and uint8 codes, per tensor and per
axis, with and without a zero point, float32 and float16 scales. ``(q - zp) * scale`` is exact in
float32 for these codes, so both sides round one exact product: bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.errors import RealEpError
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
from onnx_builders import parameters

pytestmark = pytest.mark.host_sensitive  # compared with onnxruntime's CPU kernels

RNG_SEED = 21
CODES = {TensorProto.INT4: (-8, 8), TensorProto.UINT4: (0, 16), TensorProto.INT8: (-128, 128), TensorProto.UINT8: (0, 256)}


def dequantize_model(code_type, shape, scale, zero_point=None, axis=1, constant=True, block_size=0):
    """DequantizeLinear-21 of codes (an initializer where ``constant``) added to a float input, so
    that the output is a computed value."""
    rng = np.random.default_rng(RNG_SEED)
    low, high = CODES[code_type]
    codes = rng.integers(low, high, shape)
    float_type = helper.np_dtype_to_tensor_dtype(scale.dtype)
    inits = [numpy_helper.from_array(scale, "s")]
    inputs = []
    if constant:
        inits.append(helper.make_tensor("q", code_type, shape, codes.reshape(-1).tolist()))
    else:
        inputs.append(helper.make_tensor_value_info("q", code_type, shape))
    zero_points, attributes = parameters(code_type, scale, zero_point, axis, block_size)
    inits += zero_points
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", *(z.name for z in zero_points)], ["w"], **attributes),
             helper.make_node("Add", ["x", "w"], ["y"])]
    inputs.append(helper.make_tensor_value_info("x", float_type, shape))
    graph = helper.make_graph(nodes, "dq21", inputs, [helper.make_tensor_value_info("y", float_type, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), codes


CASES = {  # the real EP reads a 1-D scale on the last axis (right-aligned): per-axis cases quantize that axis
    "int4 per axis, zero point, odd count": (TensorProto.INT4, (2, 5, 3), np.array([0.5, 0.25, 0.1], np.float32), [1, -2, 7], 2),
    "int4 per tensor, no zero point": (TensorProto.INT4, (3, 5), np.array(0.37, np.float32), None, 1),
    "uint4 no zero point (the real EP's filled zero)": (TensorProto.UINT4, (3, 5), np.array(0.3, np.float32), None, 1),
    "uint4 per axis -1, zero point": (TensorProto.UINT4, (4, 3), np.array([0.2, 0.7, 0.013], np.float32), [15, 0, 8], -1),
    "int8 per tensor, zero point": (TensorProto.INT8, (4, 7), np.array(0.0371, np.float32), -3, 1),
    "uint8 per axis, float16 scale": (TensorProto.UINT8, (5, 3), np.array([0.5, 0.013, 0.1], np.float16), None, 1),
    "int4 float16 scale, zero point": (TensorProto.INT4, (2, 8), np.array(0.0123, np.float16), -5, 1),
    "int4 blocked along the last axis": (TensorProto.INT4, (4, 8), np.arange(1, 9, dtype=np.float32).reshape(4, 2) / 16, None, 1),
    "uint4 blocked along the first axis, zero point": (TensorProto.UINT4, (8, 3), np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 8,
                                                       np.array([[1, 2, 3], [4, 5, 15]]), 0),
}
BLOCK = {"int4 blocked along the last axis": 4, "uint4 blocked along the first axis, zero point": 4}


@pytest.mark.parametrize("name", CASES)
def test_dequantize_21_is_dequantize_and_matches_onnxruntime(name):
    code_type, shape, scale, zero_point, axis = CASES[name]
    model, _ = dequantize_model(code_type, shape, scale, zero_point, axis, block_size=BLOCK.get(name, 0))
    plan = plan_model(model)
    node = next(entry for entry in plan.entries if entry.node.op_type == "DequantizeLinear")
    assert isinstance(node, DmlNode) and node.operator == "DML_OPERATOR_DEQUANTIZE"
    unsigned_without_zero_point = code_type in (TensorProto.UINT4, TensorProto.UINT8) and zero_point is None
    assert node.desc.QuantizationType.name == ("SCALE" if zero_point is None and not unsigned_without_zero_point else "SCALE_ZERO_POINT")
    x = np.random.default_rng(1).standard_normal(shape).astype(scale.dtype)
    expected = cpu_session(model).run(None, {"x": x})[0]
    for arithmetic in dml_ep.ARITHMETICS:
        got = dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, {"x": x})[0]
        assert got.dtype == expected.dtype and np.array_equal(got.view(np.uint8), expected.view(np.uint8)), arithmetic


def test_the_weight_itself_is_exact():
    """The dequantized values alone (x = 0 adds nothing): ``(q - zp) * scale`` of the codes."""
    model, codes = dequantize_model(TensorProto.INT4, (2, 5, 3), np.array([0.5, 0.25, 0.1], np.float32), [1, -2, 7], 2)
    got = dml_ep.InferenceSession(model).run(None, {"x": np.zeros((2, 5, 3), np.float32)})[0]
    expected = (codes - np.array([1, -2, 7])) * np.array([0.5, 0.25, 0.1], np.float32)
    assert np.array_equal(got, expected.astype(np.float32))


def test_a_per_axis_scale_on_another_axis_fails_the_real_ep_where_it_cannot_be_blocks():
    """DmlOperatorQuantization21 reads no axis: a [3] scale for axis 0 of a (3, 5) input is
    described as [1, 1, 1, 3] against [1, 1, 3, 5], which DEQUANTIZE cannot take."""
    model, _ = dequantize_model(TensorProto.INT8, (3, 5), np.array([0.5, 0.25, 0.1], np.float32), None, axis=0)
    with pytest.raises(RealEpError, match="right-aligned"):
        plan_model(model)


def test_a_per_axis_scale_on_another_axis_reads_as_blocks_of_the_last_where_it_divides_it():
    """A [2] scale for axis 0 of a (2, 4) input: [1, 1, 1, 2] against [1, 1, 2, 4], blocks of two
    along the last axis (DirectML's reading), not onnxruntime's rows: compare shows the difference."""
    scale = np.array([0.5, 0.25], np.float32)
    model, codes = dequantize_model(TensorProto.INT8, (2, 4), scale, None, axis=0)
    x = np.zeros((2, 4), np.float32)
    got = dml_ep.InferenceSession(model).run(None, {"x": x})[0]
    assert np.array_equal(got, codes * np.repeat(scale, 2)[None, :])
    assert not np.array_equal(got, cpu_session(model).run(None, {"x": x})[0])


def test_int8_codes_computed_at_run_time_are_dequantized_on_directml():
    model, codes = dequantize_model(TensorProto.INT8, (4, 7), np.array(0.0371, np.float32), -3, constant=False)
    node = next(entry for entry in plan_model(model).entries if entry.node.op_type == "DequantizeLinear")
    assert isinstance(node, DmlNode)
    feeds = {"q": codes.astype(np.int8), "x": np.zeros((4, 7), np.float32)}
    assert np.array_equal(dml_ep.InferenceSession(model).run(None, feeds)[0], cpu_session(model).run(None, feeds)[0])


def test_opset_19_keeps_element_wise_dequantize_linear():
    model, _ = dequantize_model(TensorProto.INT8, (4, 7), np.array(0.0371, np.float32), -3)
    model = onnx.version_converter.convert_version(model, 19)
    node = next(entry for entry in plan_model(model).entries if entry.node.op_type == "DequantizeLinear")
    assert node.operator == "DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR"


@pytest.mark.parametrize("name", ["int4 per axis, zero point, odd count", "uint4 no zero point (the real EP's filled zero)"])
def test_the_dxdispatch_export_replays_bit_for_bit(tmp_path, name):
    """4-bit codes and zero points go out as the bytes DirectML reads, the filled zero as a
    resource of its own; the export, read back and run, gives what dml_ep gave."""
    from dxdispatch_replays import export_and_replay

    code_type, shape, scale, zero_point, axis = CASES[name]
    model, _ = dequantize_model(code_type, shape, scale, zero_point, axis)
    made, _ = export_and_replay(model, tmp_path / "out", {"x": np.ones(shape, np.float32)})
    (dispatchable,) = [d for d in made.model["dispatchables"].values() if d["type"] == "DML_OPERATOR_DEQUANTIZE"]
    assert dispatchable["desc"]["InputTensor"]["DataType"] == ("INT4" if code_type == TensorProto.INT4 else "UINT4")
    assert dispatchable["desc"]["QuantizationType"] == "DML_QUANTIZATION_TYPE_SCALE_ZERO_POINT"


def test_below_feature_level_6_3_it_runs_with_onnxruntime_even_where_its_optimizer_fails():
    """At FL 6_2 the node falls back; its 4-D output leaves the CPU channels last, through a
    Transpose onnxruntime's optimizer pushes into the int8 Q/DQ and then refuses (a QuantizeLinear
    of uint8 zero point and int8 output): the session is then made without optimizations."""
    model, codes = dequantize_model(TensorProto.INT8, (1, 2, 3, 4), np.array(0.0371, np.float32), -3, constant=False)
    node = next(entry for entry in plan_model(model, feature_level="6_2").entries if entry.node.op_type == "DequantizeLinear")
    assert not isinstance(node, DmlNode)
    feeds = {"q": codes.astype(np.int8), "x": np.zeros((1, 2, 3, 4), np.float32)}
    got = dml_ep.InferenceSession(model, feature_level="6_2").run(None, feeds)[0]
    assert np.array_equal(got, cpu_session(model).run(None, feeds)[0])
