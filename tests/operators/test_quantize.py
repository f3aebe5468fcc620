"""QuantizeLinear-21 as the DML EP builds it (DmlOperatorQuantization21: DML_OPERATOR_QUANTIZE),
against onnxruntime's CPU QuantizeLinear: int8 and uint8 codes, per tensor, along the last axis and
blocked, with and without a zero point, float32 and float16 inputs. In the "onnxruntime"
arithmetic bit for bit (MLAS's float32 division and rounding); in the "directml" one the correctly
rounded quotient, which differs only where the float32 quotient rounds across a half."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.errors import QuantizationParameterError
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
from onnx_builders import parameters

pytestmark = pytest.mark.host_sensitive  # compared with onnxruntime's CPU kernels


def quantize_model(code_type, shape, scale, zero_point=None, axis=1, block_size=0, float_type=np.float32):
    """Add(x, 0.5) then QuantizeLinear-21 to ``code_type``, the codes a graph output."""
    element = helper.np_dtype_to_tensor_dtype(np.dtype(float_type))
    inits = [numpy_helper.from_array(np.asarray(scale, float_type), "s"), numpy_helper.from_array(np.array(0.5, float_type), "half")]
    zero_points, attributes = parameters(code_type, scale, zero_point, axis, block_size)
    inits += zero_points
    if zero_point is None:
        attributes["output_dtype"] = code_type
    nodes = [helper.make_node("Add", ["x", "half"], ["a"]),
             helper.make_node("QuantizeLinear", ["a", "s", *(z.name for z in zero_points)], ["y"], **attributes)]
    graph = helper.make_graph(nodes, "q21", [helper.make_tensor_value_info("x", element, shape)],
                              [helper.make_tensor_value_info("y", code_type, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


CASES = {
    "int8 per tensor, zero point": (TensorProto.INT8, (4, 7), np.float32(0.0371), -3, 1, 0),
    "int8 no zero point": (TensorProto.INT8, (4, 7), np.float32(0.02), None, 1, 0),
    "uint8 no zero point (the real EP's filled zero)": (TensorProto.UINT8, (3, 5), np.float32(0.01), None, 1, 0),
    "uint8 along the last axis, zero point": (TensorProto.UINT8, (2, 5, 3), np.array([0.5, 0.013, 0.1], np.float32), [128, 3, 250], 2, 0),
    "int8 blocked along the first axis": (TensorProto.INT8, (8, 3), np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 64, None, 0, 4),
}


def inputs(shape, float_type=np.float32):
    """Values of mixed sizes, some exactly on a half step of the scales, some saturating."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape) * rng.choice([0.1, 1.0, 10.0], size=shape)
    return {"x": x.astype(float_type)}


@pytest.mark.parametrize("name", CASES)
def test_quantize_21_is_quantize_and_matches_onnxruntime(name):
    code_type, shape, scale, zero_point, axis, block_size = CASES[name]
    model = quantize_model(code_type, shape, scale, zero_point, axis, block_size)
    node = next(entry for entry in plan_model(model).entries if entry.node.op_type == "QuantizeLinear")
    assert isinstance(node, DmlNode) and node.operator == "DML_OPERATOR_QUANTIZE"
    feeds = inputs(shape)
    expected = cpu_session(model).run(None, feeds)[0]
    got = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    ideal = dml_ep.InferenceSession(model, arithmetic="directml").run(None, feeds)[0]
    a = feeds["x"] + np.float32(0.5)  # Add's float32 sums, as both sides compute them
    full_scale = np.broadcast_to(np.repeat(np.asarray(scale), block_size, axis=0) if block_size else scale, shape)
    full_zero = np.broadcast_to(0 if zero_point is None else np.asarray(zero_point), shape)
    low, high = np.iinfo(expected.dtype).min, np.iinfo(expected.dtype).max
    exact = [min(max(round(Fraction(float(v)) / Fraction(float(s))) + int(z), low), high)  # round(): half to even
             for v, s, z in zip(a.reshape(-1), full_scale.reshape(-1), full_zero.reshape(-1))]
    assert np.array_equal(ideal, np.array(exact).reshape(shape))


def test_float16_input():
    model = quantize_model(TensorProto.UINT8, (3, 5), np.float16(0.0123), [7], float_type=np.float16)
    feeds = inputs((3, 5), np.float16)
    expected = cpu_session(model).run(None, feeds)[0]
    assert np.array_equal(dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0], expected)


def test_four_bit_codes_stay_with_onnxruntime_and_say_why():
    model = quantize_model(TensorProto.INT4, (4, 8), np.float32(0.1), None)
    node = next(entry for entry in plan_model(model).entries if entry.node.op_type == "QuantizeLinear")
    assert isinstance(node, FallbackNode) and "4-bit codes" in node.reason and node.kind == "not-modelled"


def test_the_dxdispatch_export_replays_bit_for_bit(tmp_path):
    from dxdispatch_replays import export_and_replay

    code_type, shape, scale, zero_point, axis, block_size = CASES["uint8 no zero point (the real EP's filled zero)"]
    made, _ = export_and_replay(quantize_model(code_type, shape, scale, zero_point, axis, block_size), tmp_path / "out", inputs(shape))
    (dispatchable,) = [d for d in made.model["dispatchables"].values() if d["type"] == "DML_OPERATOR_QUANTIZE"]
    assert dispatchable["desc"]["QuantizationType"] == "DML_QUANTIZATION_TYPE_SCALE_ZERO_POINT"


def test_a_zero_scale_is_refused_when_planned_and_when_it_arrives():
    with pytest.raises(QuantizationParameterError, match="not positive"):
        plan_model(quantize_model(TensorProto.INT8, (4, 7), np.float32(0.0), -3))
    model = quantize_model(TensorProto.INT8, (4, 7), np.float32(0.5), -3)
    model.graph.initializer.remove(next(i for i in model.graph.initializer if i.name == "s"))
    model.graph.input.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, []))
    session = dml_ep.InferenceSession(model)
    with pytest.raises(QuantizationParameterError, match="not positive"):
        session.run(None, {**inputs((4, 7)), "s": np.array(0.0, np.float32)})
