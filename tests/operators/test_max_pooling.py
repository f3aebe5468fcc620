"""ONNX MaxPool 8-12 on int8/uint8 (DML_OPERATOR_MAX_POOLING, MAX_POOLING2) and Relu-14 on int8
(ACTIVATION_RELU): dml_ep against onnxruntime's CPU EP, bit for bit, Indices included; and the
nodes the DML EP leaves to the CPU (or dml_ep does not model), each with its reason."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import dml_ep
from dml_ep.core import graph
from dml_ep.core.enums import DML_OPERATOR_TYPE as OP
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.passes import Origin
from dml_ep.planning.importer import DEFAULT_FEATURE_LEVEL, NodeImporter
from dml_ep.realep.placement import ASSIGNED_TO_DML, ON_CPU, ON_DML


def one_node(op_type, x_dtype, x_shape, opset=12, indices=False, **attributes):
    """A one-node model reading a fed ``x``; MaxPool's Indices output where ``indices``."""
    element = helper.np_dtype_to_tensor_dtype(np.dtype(x_dtype))
    outputs = [helper.make_tensor_value_info("y", element, [None] * len(x_shape))]
    if indices:
        outputs.append(helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [None] * len(x_shape)))
    node = helper.make_node(op_type, ["x"], [o.name for o in outputs], **attributes)
    graph = helper.make_graph([node], op_type, [helper.make_tensor_value_info("x", element, x_shape)], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def only_entry(model, **options):
    (entry,) = dml_ep.InferenceSession(model, **options).plan.entries
    return entry


def assert_matches_onnxruntime(model, x):
    """dml_ep's outputs are onnxruntime's, dtype, shape and bits."""
    ours = dml_ep.InferenceSession(model).run(None, {"x": x})
    theirs = cpu_session(model, "ort", threads=1).run(None, {"x": x})
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def codes(dtype, shape, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


CASES = {  # input shape, attributes
    "2x2": ((2, 3, 6, 6), dict(kernel_shape=[2, 2])),
    "2x2-stride-2": ((1, 4, 8, 7), dict(kernel_shape=[2, 2], strides=[2, 2])),
    "3x3-pads": ((2, 2, 7, 7), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "3x3-stride-2-asymmetric-pads": ((1, 3, 9, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 2, 1])),
    "same-upper": ((1, 2, 7, 6), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    "same-lower": ((1, 2, 7, 6), dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    "valid": ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="VALID")),
    "ceil": ((1, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 3], ceil_mode=1)),
    "ceil-pads": ((1, 2, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    "dilations": ((1, 2, 9, 9), dict(kernel_shape=[3, 3], dilations=[2, 3])),
    "dilations-pads-strides": ((2, 2, 9, 10), dict(kernel_shape=[2, 3], dilations=[2, 2], strides=[2, 1], pads=[1, 1, 1, 2])),
    "1d": ((2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    "1d-dilations-ceil": ((1, 2, 12), dict(kernel_shape=[2], dilations=[3], strides=[2], ceil_mode=1)),
    "3d": ((1, 2, 5, 6, 7), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 0])),
    "3d-dilations": ((1, 2, 6, 6, 6), dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 2])),
}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("indices", [False, True], ids=["values", "indices"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape, attributes", CASES.values(), ids=CASES.keys())
def test_max_pool_matches_onnxruntime(shape, attributes, dtype, indices):
    model = one_node("MaxPool", dtype, shape, indices=indices, **attributes)
    entry = only_entry(model)
    assert isinstance(entry, DmlNode), entry.summary()
    dilated = any(d != 1 for d in attributes.get("dilations", ()))
    assert entry.desc.OPERATOR_TYPE == (OP.MAX_POOLING2 if indices or dilated else OP.MAX_POOLING)
    for seed in range(3):
        assert_matches_onnxruntime(model, codes(dtype, shape, seed))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_ties_and_the_lowest_value_take_the_first_real_element(dtype):
    """Windows of equal values, the type's lowest among them, next to padding: the first element
    of the input in row-major window order, never a padded position."""
    lowest = np.iinfo(dtype).min
    x = np.full((1, 2, 5, 5), lowest, dtype)
    x[0, 1, 1:4, 1:4] = 7
    model = one_node("MaxPool", dtype, x.shape, indices=True, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    assert_matches_onnxruntime(model, x)


def test_one_d_pooling_is_two_d_with_a_height_of_one():
    desc = only_entry(one_node("MaxPool", np.uint8, (1, 2, 9), kernel_shape=[3], strides=[2], pads=[1, 0])).desc
    assert desc.InputTensor.Sizes == (1, 2, 1, 9) and desc.OutputTensor.Sizes == (1, 2, 1, 4)
    assert (desc.DimensionCount, desc.WindowSize, desc.Strides) == (2, (1, 3), (1, 2))
    assert (desc.StartPadding, desc.EndPadding) == ((0, 1), (0, 0))



@pytest.mark.host_sensitive
def test_strides_beyond_int32_reach_directml_as_the_dml_ep_clamps_them():
    """The DML EP reads strides clamped to int32 (GetOptionalAttributeVectorInt32): DirectML's UINT
    Strides get 2^31-1, whose one output per axis is onnxruntime's for strides of 2^62."""
    model = one_node("MaxPool", np.uint8, (1, 2, 5, 5), kernel_shape=[3, 3], strides=[2**62, 2**62], pads=[1, 1, 1, 1])
    desc = only_entry(model).desc
    assert desc.Strides == (2**31 - 1, 2**31 - 1) and desc.OutputTensor.Sizes == (1, 2, 1, 1)
    assert_matches_onnxruntime(model, codes(np.uint8, (1, 2, 5, 5)))

def test_indices_are_uint64_for_directml():
    desc = only_entry(one_node("MaxPool", np.int8, (1, 1, 4, 4), indices=True, kernel_shape=[2, 2])).desc
    assert desc.OutputIndicesTensor.DataType.name == "UINT64" and desc.Dilations == (1, 1)


def test_ceil_mode_size_onnxruntime_reduces_falls_back():
    """A last window starting past the input and its start padding: onnxruntime drops it, the DML
    EP's size keeps it (InitializeKernelOutputDimensions)."""
    model = one_node("MaxPool", np.uint8, (1, 1, 4, 4), kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1)
    entry = only_entry(model)
    assert isinstance(entry, FallbackNode)
    assert "the DML EP keeps a last window starting past the input" in entry.reason and entry.reason.endswith(ON_DML)


def test_max_pool_22_falls_back_naming_its_since_version():
    entry = only_entry(one_node("MaxPool", np.uint8, (1, 1, 4, 4), opset=22, kernel_shape=[2, 2]))
    assert isinstance(entry, FallbackNode)
    assert entry.reason == ("MaxPool-22: the DML EP of onnxruntime 1.24 registers MaxPool 1, 8, 10, 11, 12, not 22 "
                            "(a kernel matches only its own since-version); " + ON_CPU)


def test_storage_order_falls_back():
    entry = only_entry(one_node("MaxPool", np.uint8, (1, 1, 4, 4), indices=True, kernel_shape=[2, 2], storage_order=1))
    assert isinstance(entry, FallbackNode)
    assert entry.reason == "ai.onnx::MaxPool: QueryMaxPool declines storage_order != 0; " + ON_CPU


def test_float_max_pool_is_not_modelled():
    entry = only_entry(one_node("MaxPool", np.float32, (1, 1, 4, 4), kernel_shape=[2, 2]))
    assert isinstance(entry, FallbackNode)
    assert entry.reason == "float MaxPool (input float32) is a float operator; " + ON_DML


@pytest.mark.parametrize("level, falls_back", [("2_1", True), ("3_0", False)])
def test_int8_pooling_needs_feature_level_3_0(level, falls_back):
    entry = only_entry(one_node("MaxPool", np.int8, (1, 1, 4, 4), kernel_shape=[2, 2]), feature_level=level)
    assert isinstance(entry, FallbackNode) == falls_back
    if falls_back:
        assert "InputTensor: DataType INT8 is not supported at DML_FEATURE_LEVEL_2_1" in entry.reason and ASSIGNED_TO_DML in entry.reason


@pytest.mark.parametrize("level, falls_back", [("4_1", True), ("5_0", False)])
def test_uint64_indices_need_feature_level_5_0(level, falls_back):
    entry = only_entry(one_node("MaxPool", np.uint8, (1, 1, 4, 4), indices=True, kernel_shape=[2, 2]), feature_level=level)
    assert isinstance(entry, FallbackNode) == falls_back
    if falls_back:
        assert "OutputIndicesTensor: DataType UINT64 is not supported at DML_FEATURE_LEVEL_4_1 (allowed: UINT32)" in entry.reason


# --- Relu-14 ---------------------------------------------------------------------------------


@pytest.mark.host_sensitive
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4), (1, 2, 3, 4, 5)])
def test_int8_relu_matches_onnxruntime(shape):
    model = one_node("Relu", np.int8, shape, opset=14)
    entry = only_entry(model)
    assert isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE == OP.ACTIVATION_RELU
    x = codes(np.int8, shape)
    x.reshape(-1)[:2] = [-128, 0] if x.size >= 2 else x.reshape(-1)[:2]
    assert_matches_onnxruntime(model, x)


def test_int8_relu_needs_feature_level_5_1():
    entry = only_entry(one_node("Relu", np.int8, (2, 3), opset=14), feature_level="5_0")
    assert isinstance(entry, FallbackNode) and "DataType INT8 is not supported at DML_FEATURE_LEVEL_5_0" in entry.reason


def test_uint8_relu_stays_on_the_cpu():
    """Not valid ONNX (Relu-14 has no uint8), but a rewrite could make one: the DML EP has no kernel for it."""
    node = helper.make_node("Relu", ["x"], ["y"])
    values = {name: graph.ValueInfo(name, np.dtype(np.uint8), (2, 3)) for name in ("x", "y")}
    importer = NodeImporter({}, DEFAULT_FEATURE_LEVEL, {"": 14})
    entry = importer.plan_node(node, Origin((), (node,)), values)
    assert entry.reason == "uint8 Relu: the DML EP registers Relu-14 for float16, float32, int8, int16, int32; " + ON_CPU


@pytest.mark.parametrize("dtype, reason", [
    (np.int32, "int32 Relu is an integer operator dml_ep does not model (int8 only); " + ON_DML),
])
def test_other_relus_fall_back(dtype, reason):
    entry = only_entry(one_node("Relu", dtype, (2, 3), opset=14))
    assert isinstance(entry, FallbackNode) and entry.reason == reason


@pytest.mark.host_sensitive
def test_qdq_max_pool_runs_on_int8_after_the_drop_rule():
    """DQ -> MaxPool -> Q of one scale and zero point: onnxruntime's DropQDQ rule leaves MaxPool on
    the 8-bit codes, which DirectML pools directly."""
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zero = numpy_helper.from_array(np.array(3, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("MaxPool", ["d"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["q2"]), helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 7, 7])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 4, 4])], [scale, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    (pool,) = [e for e in session.plan.entries if e.node.op_type == "MaxPool"]
    assert isinstance(pool, DmlNode) and pool.desc.InputTensor.DataType.name == "INT8"
    x = np.random.default_rng(0).normal(0, 3, (1, 2, 7, 7)).astype(np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], cpu_session(model, "ort", threads=1).run(None, {"x": x})[0])
