"""Float Conv and ConvTranspose -> DML_OPERATOR_CONVOLUTION (``dml_ep/operators/convolution.py``),
the DML EP's activation fusion into them (``passes/dml_fusion.py``: DmlFusedConv,
DmlFusedConvTranspose), the quantizer's int8 QDQ Conv run as DQ -> float CONVOLUTION -> Q, desc
validation, DxDispatch export, and the MAC estimate.

The reference is always onnxruntime's CPU EP (or exact arithmetic), never dml_ep's own output. A
float convolution is a sum of products that dml_ep orders as numpy's BLAS does and onnxruntime as
MLAS does, so the two are not bit-exact; each element is held to the bound

    |dml_ep - onnxruntime| <= 2 (K + 2) 2^-24 M + spacing(|reference|)

where K is the number of products an output sums (C/G * prod(kernel) for Conv, and for
ConvTranspose as an upper bound) plus 1 for the bias, and M the sum of the products' magnitudes,
computed independently by onnxruntime's own Conv / ConvTranspose on |x|, |w|, |b| (same attributes).
Each side's float32 sum lies within (K + 1) 2^-24 M (to first order) of the exact value, so their
difference lies within twice that; the spacing covers the final rounding. A float16 output is the
float32 value rounded once to float16: one float16 ulp more. Nothing here assumes a particular
x86-64 kernel (AVX2 or AVX-512): no float sum is compared for equality.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_builders import Feed, single_node_model

import dml_ep
import dml_ep.conformance.compare
from dml_ep.cli import commands as cli
from dml_ep.core.enums import DML_CONVOLUTION_DIRECTION, DML_CONVOLUTION_MODE
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DescValidationError
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.interop import dxdispatch
from dml_ep.interop.dxdispatch import descs
from dml_ep.operators.activation import DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC, DML_ACTIVATION_RELU_OPERATOR_DESC
from dml_ep.operators.convolution import DML_CONVOLUTION_OPERATOR_DESC
from dml_ep.operators.nodes import DmlNode
from dml_ep.planning.plan import node_macs
from dml_ep.reports.report import CAUSES

ARITHMETICS = ["directml", "onnxruntime"]
OPSET = 19
F32, F16 = np.float32, np.float16


# --- the reference and the bound -----------------------------------------------------------------


def onnxruntime_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's CPU EP, one thread, default graph optimizations (its own Conv + activation fusion)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def conv_model(op_type, x, w, b=None, consumer=None, **attributes):
    """One Conv / ConvTranspose (x fed, w and b initializers), optionally read by one activation."""
    return single_node_model(op_type, [Feed(x), w, b], x.dtype, x.ndim, consumer=consumer, opset=OPSET, **attributes)


def magnitudes(op_type, x, w, b=None, **attributes) -> np.ndarray:
    """M: onnxruntime's own convolution of |x|, |w|, |b| in float32 (a float16 operand converts exactly)."""
    absolute = [None if a is None else np.abs(a).astype(F32) for a in (x, w, b)]
    model, feeds = conv_model(op_type, *absolute, **attributes)
    return onnxruntime_run(model, feeds)[0].astype(np.float64)


def products(op_type, x, w, b, group=1) -> int:
    """K: the products an output sums, plus 1 for the bias."""
    channels = w.shape[1] if op_type == "Conv" else x.shape[1] // group
    return channels * int(np.prod(w.shape[2:])) + (b is not None)


def allowed(ours, reference, k, magnitude, slope=1.0, ulps=1, floor=0.0) -> np.ndarray:
    """``slope`` times the float32 bound of the two sums' difference, plus ``ulps`` steps of the
    output type at the larger of the two values (at least ``floor``, for an activation whose own
    error is absolute, as MLAS's logistic ``p / q + 0.5``)."""
    larger = np.maximum(np.maximum(np.abs(ours.astype(np.float64)), np.abs(reference.astype(np.float64))), floor)
    step = np.spacing(larger.astype(reference.dtype)).astype(np.float64)
    return slope * 2 * (k + 2) * 2.0**-24 * magnitude + ulps * step


def assert_within(ours, reference, bound, what=""):
    assert ours.shape == reference.shape and ours.dtype == reference.dtype, (what, ours.shape, ours.dtype, reference.shape, reference.dtype)
    assert np.isfinite(reference).all(), what
    difference = np.abs(ours.astype(np.float64) - reference.astype(np.float64))
    bad = np.flatnonzero(~(difference <= bound))  # a NaN of ours is out of bounds too
    assert bad.size == 0, (f"{what}: {bad.size}/{ours.size} beyond the bound, first at {bad[:5]}: dml_ep {ours.reshape(-1)[bad[:5]]} "
                           f"onnxruntime {reference.reshape(-1)[bad[:5]]} bound {bound.reshape(-1)[bad[:5]]}")


def case_operands(op_type, x_shape, w_shape, bias, dtype, attributes, seed=0, spread=True, scale=1.0):
    """x, w and (with ``bias``) b of both signs; float32 ones with ``spread`` spanning several
    binades, so that sums cancel and round."""
    rng = np.random.default_rng(seed)

    def draw(shape):
        values = rng.standard_normal(shape) * scale
        if spread and dtype == F32:
            values = values * 2.0 ** rng.integers(-6, 7, shape)
        return values.astype(dtype)

    out_channels = w_shape[0] if op_type == "Conv" else w_shape[1] * attributes.get("group", 1)
    return draw(x_shape), draw(w_shape), draw((out_channels,)) if bias else None


def check_against_onnxruntime(op_type, x, w, b, arithmetic, consumer=None, slope=1.0, ulps=1, floor=0.0, **attributes):
    """dml_ep's output against onnxruntime's within the bound; returns dml_ep's session."""
    model, feeds = conv_model(op_type, x, w, b, consumer=consumer, **attributes)
    reference = onnxruntime_run(model, feeds)[0]
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    ours = session.run(None, feeds)[0]
    k = products(op_type, x, w, b, attributes.get("group", 1))
    bound = allowed(ours, reference, k, magnitudes(op_type, x, w, b, **attributes), slope, ulps, floor)
    assert_within(ours, reference, bound, f"{op_type} {attributes} arithmetic={arithmetic}")
    return session


def only_convolution(session, direction, fused=False) -> DmlNode:
    """The plan's one entry: a CONVOLUTION of ``direction`` (with no fused activation unless ``fused``)."""
    [entry] = session.plan.entries
    assert isinstance(entry, DmlNode), getattr(entry, "reason", entry)
    assert entry.desc.OPERATOR_TYPE.name == "CONVOLUTION"
    assert entry.desc.Direction == direction and entry.desc.Mode == DML_CONVOLUTION_MODE.CROSS_CORRELATION
    if not fused:
        assert entry.desc.FusedActivation is None
    return entry


def planned_against_onnxruntime(op_type, x_shape, w_shape, bias, attributes, dtype, arithmetic) -> DmlNode:
    """One case's node checked against onnxruntime within the bound: its plan's one CONVOLUTION,
    in the direction of ``op_type``."""
    x, w, b = case_operands(op_type, x_shape, w_shape, bias, dtype, attributes)
    session = check_against_onnxruntime(op_type, x, w, b, arithmetic, **attributes)
    backward = op_type == "ConvTranspose"
    entry = only_convolution(session, DML_CONVOLUTION_DIRECTION.BACKWARD if backward else DML_CONVOLUTION_DIRECTION.FORWARD)
    assert entry.node.op_type == op_type
    return entry


# --- 1. Conv -----------------------------------------------------------------------------------

CONV_CASES = [
    pytest.param((1, 3, 7, 6), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}, F32, id="2d-pads-bias"),
    pytest.param((1, 4, 11, 10), (6, 2, 3, 2), True, {"group": 2, "strides": [2, 3], "dilations": [2, 1], "pads": [2, 0, 1, 3]}, F32,
                 id="2d-strides-dilations-group2-asymmetric-pads"),
    pytest.param((1, 5, 17), (5, 1, 4), True, {"group": 5, "pads": [2, 1], "strides": [2]}, F32, id="1d-depthwise"),
    pytest.param((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), True, {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}, F32, id="3d"),
    # kernel 4 x 3, strides 2 x 3 on 7 x 8: total pads 3 and 1, split (1, 2) and (0, 1) upper, (2, 1) and (1, 0) lower
    pytest.param((1, 3, 7, 8), (4, 3, 4, 3), True, {"auto_pad": "SAME_UPPER", "strides": [2, 3]}, F32, id="same-upper"),
    pytest.param((1, 3, 7, 8), (4, 3, 4, 3), True, {"auto_pad": "SAME_LOWER", "strides": [2, 3]}, F32, id="same-lower"),
    pytest.param((1, 3, 7, 8), (2, 3, 3, 3), False, {"auto_pad": "VALID", "strides": [2, 1]}, F32, id="valid-no-bias"),
    # a 2 x 2 kernel spans 2: pads of 3 and 4 exceed it (the gathered windows of ``_windows``)
    pytest.param((1, 2, 5, 4), (3, 2, 2, 2), True, {"pads": [3, 1, 0, 4], "strides": [2, 1]}, F32, id="pads-beyond-the-kernel-span"),
    pytest.param((1, 3, 8, 8), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}, F16, id="float16"),
    pytest.param((2, 3, 6, 5), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, F32, id="batch2"),
    pytest.param((2, 3, 7, 6), (6, 1, 3, 2), True, {"group": 3, "pads": [1, 0, 1, 1], "strides": [2, 1]}, F32,
                 id="depthwise-multiplier-2"),
    pytest.param((1, 4, 4, 5, 3), (4, 1, 2, 3, 2), False, {"group": 4, "dilations": [1, 2, 1]}, F32, id="3d-depthwise"),
    pytest.param((2, 4, 6), (6, 2, 3), False, {"group": 2, "dilations": [2], "pads": [3, 0]}, F16, id="1d-float16-batch2"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("x_shape, w_shape, bias, attributes, dtype", CONV_CASES)
def test_conv_matches_onnxruntime(x_shape, w_shape, bias, attributes, dtype, arithmetic):
    entry = planned_against_onnxruntime("Conv", x_shape, w_shape, bias, attributes, dtype, arithmetic)
    assert entry.desc.GroupCount == attributes.get("group", 1)
    assert entry.desc.InputTensor.DataType == (DT.FLOAT16 if dtype == F16 else DT.FLOAT32)


@pytest.mark.host_sensitive
def test_conv_with_pads_beyond_the_kernel_span_reads_zeros_there():
    """Exact arithmetic: a 1 x 1 kernel of weight 1 and pads of 3 copies the input into the middle of
    zeros (a window reading only padding gives the bias)."""
    x = np.arange(1, 13, dtype=F32).reshape(1, 1, 3, 4)
    model, feeds = conv_model("Conv", x, np.ones((1, 1, 1, 1), F32), np.array([0.5], F32), pads=[3, 0, 1, 2])
    expected = np.full((1, 1, 7, 6), 0.5, F32)
    expected[0, 0, 3:6, 0:4] += x[0, 0]
    np.testing.assert_array_equal(onnxruntime_run(model, feeds)[0], expected)  # the reference agrees with the exact value
    for arithmetic in ARITHMETICS:
        np.testing.assert_array_equal(dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, feeds)[0], expected, strict=True)


# --- 2. ConvTranspose ----------------------------------------------------------------------------

CONV_TRANSPOSE_CASES = [
    pytest.param((1, 3, 4, 5), (3, 2, 3, 3), True, {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}, F32,
                 id="strides-pads-output-padding"),
    pytest.param((1, 4, 3, 4), (4, 3, 2, 2), True, {"group": 2, "strides": [2, 1], "pads": [0, 1, 1, 0]}, F32, id="groups"),
    pytest.param((1, 3, 6), (3, 2, 3), True, {"dilations": [2], "strides": [3], "pads": [1, 2], "output_padding": [1]}, F32,
                 id="1d-dilations"),
    pytest.param((2, 2, 3, 2, 3), (2, 2, 2, 2, 2), False, {"strides": [2, 1, 2]}, F32, id="3d-batch2"),
    pytest.param((1, 3, 4, 4), (3, 2, 3, 3), True, {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, F16, id="float16"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("x_shape, w_shape, bias, attributes, dtype", CONV_TRANSPOSE_CASES)
def test_conv_transpose_matches_onnxruntime(x_shape, w_shape, bias, attributes, dtype, arithmetic):
    entry = planned_against_onnxruntime("ConvTranspose", x_shape, w_shape, bias, attributes, dtype, arithmetic)
    assert entry.desc.OutputPadding == (0,) * entry.desc.DimensionCount  # the real EP zeroes it; the output's sizes carry it


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
def test_conv_transpose_with_output_shape_falls_back_to_onnxruntime(arithmetic):
    x, w, b = case_operands("ConvTranspose", (1, 3, 4, 4), (3, 2, 3, 3), True, F32, {})
    model, feeds = conv_model("ConvTranspose", x, w, b, strides=[2, 2], output_shape=[8, 9])
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    [entry] = session.plan.entries
    assert not isinstance(entry, DmlNode)
    assert "output_shape" in entry.reason
    ours, reference = session.run(None, feeds)[0], onnxruntime_run(model, feeds)[0]
    assert reference.shape == (1, 2, 8, 9)
    np.testing.assert_array_equal(ours, reference, strict=True)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, x_shape, w_shape, attributes", [
    pytest.param("Conv", (2, 4, 7, 6), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}, id="conv-grouped"),
    pytest.param("Conv", (1, 3, 9), (4, 3, 3), {"dilations": [2], "pads": [2, 1]}, id="conv-1d"),
    pytest.param("ConvTranspose", (1, 4, 3, 4), (4, 3, 2, 2), {"group": 2, "strides": [2, 1], "pads": [0, 1, 1, 0]}, id="convtranspose-grouped"),
])
def test_exact_float_is_the_convolution_its_magnitude_and_its_products(op_type, x_shape, w_shape, attributes):
    """What compare holds a reference against (``exact_float``): the value in float64, onnxruntime's
    float32 convolution within one sum's bound of it; the sum of magnitudes, onnxruntime's
    convolution of |x|, |w|, |b|; K, the products an output sums plus the bias."""
    from dml_ep.operators.convolution import exact_float

    x, w, b = case_operands(op_type, x_shape, w_shape, True, F32, attributes, seed=2)
    model, feeds = conv_model(op_type, x, w, b, **attributes)
    [entry] = dml_ep.InferenceSession(model).plan.entries
    value, magnitude, k = exact_float(entry.desc, {"InputTensor": x, "FilterTensor": w, "BiasTensor": b})
    reference = onnxruntime_run(model, feeds)[0]
    reference_magnitude = magnitudes(op_type, x, w, b, **attributes)
    assert k == products(op_type, x, w, b, attributes.get("group", 1))
    value, magnitude = value.reshape(reference.shape), magnitude.reshape(reference.shape)
    assert value.dtype == magnitude.dtype == np.float64
    one_sum = (k + 2) * 2.0**-24 * reference_magnitude
    assert_within(magnitude, reference_magnitude, one_sum, "magnitude")
    assert_within(value.astype(F32), reference, one_sum + np.spacing(np.abs(reference)).astype(np.float64), "value")


# --- 3. the DML EP's activation fusion -----------------------------------------------------------

# (ONNX activation, its attributes, the fused desc, its fields, slope, the activation's own error in
# ulps and the magnitude below which that error is absolute): MLAS's logistic and tanh are rational
# approximations a few float32 ulps from numpy's exp and tanh, MLAS's hard sigmoid may fuse its
# multiply-add.
FUSIONS = [
    pytest.param("Relu", {}, "ACTIVATION_RELU", {}, 1.0, 1, 0.0, id="relu"),
    pytest.param("LeakyRelu", {"alpha": 0.3}, "ACTIVATION_LEAKY_RELU", {"Alpha": 0.3}, 1.0, 2, 0.0, id="leakyrelu"),
    pytest.param("HardSigmoid", {"alpha": 0.25, "beta": 0.4}, "ACTIVATION_HARD_SIGMOID", {"Alpha": 0.25, "Beta": 0.4}, 0.25, 2, 0.5,
                 id="hardsigmoid"),
    pytest.param("Sigmoid", {}, "ACTIVATION_SIGMOID", {}, 0.25, 8, 0.5, id="sigmoid"),
    pytest.param("Tanh", {}, "ACTIVATION_TANH", {}, 1.0, 8, 0.0, id="tanh"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("activation, attributes, fused, fields, slope, ulps, floor", FUSIONS)
@pytest.mark.parametrize("op_type, x_shape, w_shape, conv_attributes", [
    pytest.param("Conv", (1, 3, 7, 6), (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 2]}, id="conv"),
    pytest.param("ConvTranspose", (1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 1]}, id="convtranspose"),
])
def test_an_activation_is_fused_into_the_convolution(op_type, x_shape, w_shape, conv_attributes, activation, attributes, fused, fields,
                                                     slope, ulps, floor, arithmetic):
    """DmlOperatorFusion: the activation, the Conv's only reader, becomes CONVOLUTION's FusedActivation
    in one com.microsoft.dml node; the values are onnxruntime's Conv then activation, within the bound
    (times the activation's slope, plus its own error)."""
    x, w, b = case_operands(op_type, x_shape, w_shape, True, F32, conv_attributes, seed=3, spread=False, scale=0.4)
    session = check_against_onnxruntime(op_type, x, w, b, arithmetic, consumer=(activation, attributes), slope=slope, ulps=ulps, floor=floor,
                                        **conv_attributes)
    direction = DML_CONVOLUTION_DIRECTION.FORWARD if op_type == "Conv" else DML_CONVOLUTION_DIRECTION.BACKWARD
    entry = only_convolution(session, direction, fused=True)
    assert (entry.node.op_type, entry.node.domain) == ({"Conv": "DmlFusedConv", "ConvTranspose": "DmlFusedConvTranspose"}[op_type],
                                                       "com.microsoft.dml")
    assert [n.op_type for n in entry.origin.nodes] == [op_type, activation]
    assert entry.origin.rule == "DmlOperatorFusion"
    desc = entry.desc.FusedActivation
    assert desc is not None and desc.OPERATOR_TYPE.name == fused and desc.fused
    for field, value in fields.items():
        assert getattr(desc, field) == float(np.float32(value)), field


def fusion_candidate(shared: str):
    """Conv -> c -> Relu -> y, where c is also read by a Sigmoid (``"reader"``) or is a graph output
    (``"output"``): no longer the Relu's alone, so not fused."""
    x, w, b = case_operands("Conv", (1, 3, 6, 5), (4, 3, 3, 3), True, F32, {}, seed=4, spread=False, scale=0.4)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)]
    if shared == "reader":
        nodes.append(helper.make_node("Sigmoid", ["c"], ["z"], name="sigmoid"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [None] * 4))
    else:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [None] * 4))
    graph = helper.make_graph(nodes, "shared_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)], outputs,
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model, {"x": x}, (x, w, b)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("shared", ["reader", "output"])
def test_a_conv_whose_output_is_not_the_activations_alone_is_not_fused(shared, arithmetic):
    model, feeds, (x, w, b) = fusion_candidate(shared)
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    entries = session.plan.entries
    assert not any(e.node.op_type.startswith("DmlFused") for e in entries)
    [conv] = [e for e in entries if e.node.op_type == "Conv"]
    assert isinstance(conv, DmlNode) and conv.desc.OPERATOR_TYPE.name == "CONVOLUTION" and conv.desc.FusedActivation is None
    assert [n.op_type for n in conv.origin.nodes] == ["Conv"]
    assert any(e.node.op_type == "Relu" for e in entries)
    ours = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    names = [o.name for o in model.graph.output]
    reference = dict(zip(names, onnxruntime_run(model, feeds)))
    k, magnitude = products("Conv", x, w, b), magnitudes("Conv", x, w, b, pads=[1, 1, 1, 1])
    for name, (slope, ulps, floor) in {"y": (1.0, 1, 0.0), "z": (0.25, 8, 0.5), "c": (1.0, 1, 0.0)}.items():
        if name in reference:
            assert_within(ours[name], reference[name], allowed(ours[name], reference[name], k, magnitude, slope, ulps, floor), name)


# --- 4. the quantizer's int8 QDQ Conv, on DirectML as DQ -> float CONVOLUTION -> Q --------------------


def qdq_int8_conv(seed=0, x_shape=(1, 8, 12, 10), w_shape=(16, 8, 3, 3), cancelling=False, **attributes):
    """What quantize_static makes of a float Conv with its defaults (QDQ, int8 activations and
    weights, per tensor): Q -> DQ on x, DQ of the symmetric int8 weight, DQ of the int32 bias (scale
    x_scale * w_scale), Conv, Q -> DQ on the output. The weight codes have 7 bits (quantize_static's
    reduce_range), so that onnxruntime's u8 x s8 products cannot saturate their int16 pair sums on
    AVX2 CPUs without VNNI. The scales are not powers of two, so that exact ties are rare; the
    output's are calibrated on onnxruntime's float Conv of the input.

    ``cancelling``: x >= 0, the second half of the channels nearly x's first half again, read by
    nearly the negated weights: the float sums run large and cancel, so that their rounding puts
    a few outputs on the other side of a code boundary than the exact integer sum."""
    rng = np.random.default_rng(seed)
    half = x_shape[1] // 2
    if cancelling:
        x = rng.uniform(0, 2, x_shape).astype(F32)
        x[:, half:] = x[:, :half] + rng.uniform(-0.05, 0.05, x[:, :half].shape).astype(F32)
        w = rng.integers(20, 64, w_shape).astype(np.int8)
        w[:, half:] = -w[:, :half] + rng.integers(-1, 2, w[:, :half].shape).astype(np.int8)
        x_scale, x_zero, w_scale = F32(2.05 / 255), np.int8(-128), F32(0.5 / 63)
    else:
        x = rng.uniform(-2, 2, x_shape).astype(F32)
        w_float = rng.uniform(-0.5, 0.5, w_shape).astype(F32)
        x_scale, x_zero, w_scale = F32(4.1 / 255), np.int8(-3), F32(np.abs(w_float).max() / 63)
        w = np.clip(np.rint(w_float / w_scale), -64, 63).astype(np.int8)
    bias_scale = F32(x_scale * w_scale)
    bias = rng.integers(-200, 200, w_shape[0]).astype(np.int32)
    float_model, float_feeds = conv_model("Conv", x, w.astype(F32) * w_scale, bias.astype(F32) * bias_scale, **attributes)
    calibration = onnxruntime_run(float_model, float_feeds)[0]
    low, high = min(float(calibration.min()), 0.0), max(float(calibration.max()), 0.0)
    y_scale = F32((high - low) / 255 * 1.013)
    y_zero = np.int8(np.clip(np.rint(-128 - low / y_scale), -128, 127))
    inits = {"x_scale": x_scale, "x_zero_point": x_zero, "w_quantized": w, "w_scale": w_scale, "w_zero_point": np.int8(0),
             "b_quantized": bias, "b_scale": np.array([bias_scale], F32), "b_zero_point": np.zeros(1, np.int32)[0],
             "y_scale": y_scale, "y_zero_point": y_zero}
    nodes = [
        helper.make_node("DequantizeLinear", ["b_quantized", "b_scale", "b_zero_point"], ["b"], name="b_dq"),
        helper.make_node("DequantizeLinear", ["w_quantized", "w_scale", "w_zero_point"], ["w"], name="w_dq"),
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero_point"], ["x_q"], name="x_q"),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero_point"], ["x_dq"], name="x_dq"),
        helper.make_node("Conv", ["x_dq", "w", "b"], ["conv"], name="conv", **attributes),
        helper.make_node("QuantizeLinear", ["conv", "y_scale", "y_zero_point"], ["y_q"], name="y_q"),
        helper.make_node("DequantizeLinear", ["y_q", "y_scale", "y_zero_point"], ["y"], name="y_dq"),
    ]
    graph = helper.make_graph(nodes, "qdq_int8_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, calibration.shape)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model, {"x": x}, float(y_scale)


def codes_of(y, y_scale) -> np.ndarray:
    """The codes (less the zero point) a DequantizeLinear output holds: y = code * y_scale in float32."""
    return np.rint(y.astype(np.float64) / y_scale).astype(np.int64)


def assert_codes_within_one(ours, reference, what=""):
    """Integer codes at most 1 apart, and few apart: only values within float rounding of a
    quantization boundary may land on the other side (a wrong rounding rule would move many)."""
    assert ours.shape == reference.shape, what
    difference = np.abs(ours.astype(np.int64) - reference.astype(np.int64))
    assert difference.max() <= 1, (what, np.flatnonzero(difference > 1)[:5], ours.reshape(-1)[difference.reshape(-1) > 1][:5])
    assert np.count_nonzero(difference) <= max(1, ours.size // 100), (what, np.count_nonzero(difference), ours.size)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("cancelling", [False, True], ids=["plain", "cancelling"])
def test_a_qdq_int8_conv_runs_on_directml_within_one_step_of_onnxruntime(cancelling, arithmetic):
    """With int8 activations the DML EP makes no QLinearConv: every node runs on DirectML, the Conv
    as a float CONVOLUTION; onnxruntime's CPU EP runs an exact integer QLinearConv (after
    QDQS8ToU8Transformer). The output codes are at most 1 apart."""
    model, feeds, y_scale = qdq_int8_conv(seed=0, x_shape=(1, 32, 32, 32), w_shape=(16, 32, 3, 3), cancelling=cancelling, pads=[1, 1, 1, 1])
    x_zero_point = next(i for i in model.graph.initializer if i.name == "x_zero_point")
    assert x_zero_point.data_type == TensorProto.INT8  # int8 activations
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    entries = session.plan.entries
    assert all(isinstance(e, DmlNode) for e in entries), [getattr(e, "reason", None) for e in entries]
    assert [e.desc.OPERATOR_TYPE.name for e in entries].count("CONVOLUTION") == 1
    assert sorted(n.op_type for e in entries for n in e.origin.nodes) == sorted(n.op_type for n in model.graph.node)
    ours, reference = session.run(None, feeds)[0], onnxruntime_run(model, feeds)[0]
    codes, reference_codes = codes_of(ours, y_scale), codes_of(reference, y_scale)
    np.testing.assert_array_equal(reference_codes.astype(F32) * F32(y_scale), reference)  # y is a code times the scale, in float32
    assert len(np.unique(reference_codes)) > 100
    assert_codes_within_one(codes, reference_codes, arithmetic)


@pytest.mark.host_sensitive
def test_compare_of_a_qdq_int8_conv_names_the_cause_of_its_differences(tmp_path, capsys):
    """compare and ``dml-ep compare``: OK where the codes agree with onnxruntime's, else a mismatch
    of 1 step put down to a named cause (the reference's integer conv: "graph")."""
    model, feeds, y_scale = qdq_int8_conv(seed=0, x_shape=(1, 32, 32, 32), w_shape=(16, 32, 3, 3), cancelling=True, pads=[1, 1, 1, 1])
    differing = int(np.count_nonzero(codes_of(dml_ep.InferenceSession(model).run(None, feeds)[0], y_scale)
                                     != codes_of(onnxruntime_run(model, feeds)[0], y_scale)))
    report = dml_ep.conformance.compare.compare_model(model, feeds)
    assert report.on_dml and report.plan["dml"]["nodes"] == len(model.graph.node) and report.plan["fallback"]["nodes"] == 0
    assert report.ok == (differing == 0) and report.outputs[0].differing == differing
    if differing:
        assert report.outputs[0].max_diff == 1  # in steps of y's scale
        assert report.cause_counts and "other" not in report.cause_counts, report.cause_counts
        first = report.first_divergent
        assert first is not None and first.cause in CAUSES and first.cause != "other", first and first.causes
        if first.cause == "graph":
            assert "conv" in first.graph, first.graph
    path = tmp_path / "qdq_int8_conv.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", feeds["x"])
    status = cli.main(["compare", str(path), "--input", f"x={tmp_path / 'x.npy'}"])
    out = capsys.readouterr().out
    assert status == (1 if differing else 0), out
    if differing:
        assert "MISMATCH" in out and f"cause: {report.first_divergent.cause}" in out, out


# --- 5. desc validation ----------------------------------------------------------------------------


def t(sizes, data_type=DT.FLOAT32):
    return DML_BUFFER_TENSOR_DESC.create(data_type, sizes)


def forward(**changes):
    """Valid: a 1x4x5x5 input, 6 filters of 2x3x3 (GroupCount 2), pads 1 -> 1x6x5x5, bias {1,6,1,1}."""
    desc = DML_CONVOLUTION_OPERATOR_DESC(
        InputTensor=t((1, 4, 5, 5)), FilterTensor=t((6, 2, 3, 3)), BiasTensor=t((1, 6, 1, 1)), OutputTensor=t((1, 6, 5, 5)),
        Mode=DML_CONVOLUTION_MODE.CROSS_CORRELATION, Direction=DML_CONVOLUTION_DIRECTION.FORWARD, DimensionCount=2,
        Strides=(1, 1), Dilations=(1, 1), StartPadding=(1, 1), EndPadding=(1, 1), OutputPadding=(0, 0), GroupCount=2,
    )
    return dataclasses.replace(desc, **changes)


def backward(**changes):
    """Valid: a 1x4x3x3 input, filter {C 4, OC/G 3, 3, 3} (GroupCount 2), strides 2, pads 1 ->
    (3 - 1) * 2 + 3 - 2 = 5: 1x6x5x5."""
    desc = forward(InputTensor=t((1, 4, 3, 3)), FilterTensor=t((4, 3, 3, 3)), Direction=DML_CONVOLUTION_DIRECTION.BACKWARD, Strides=(2, 2))
    return dataclasses.replace(desc, **changes)


def rejects(desc, field, *words):
    with pytest.raises(DescValidationError) as raised:
        desc.validate()
    message = str(raised.value)
    for word in ("DML_OPERATOR_CONVOLUTION", field, *words):
        assert word in message, message


def test_valid_descs_validate():
    forward().validate()
    forward(BiasTensor=None).validate()
    forward(FusedActivation=DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC(Alpha=0.3)).validate()
    backward().validate()
    backward(OutputTensor=t((1, 6, 6, 6))).validate()  # ONNX's output_padding, which the real EP leaves out of OutputPadding
    forward(InputTensor=t((1, 4, 5, 5), DT.FLOAT16), FilterTensor=t((6, 2, 3, 3), DT.FLOAT16), BiasTensor=t((1, 6, 1, 1), DT.FLOAT16),
            OutputTensor=t((1, 6, 5, 5), DT.FLOAT16)).validate()
    forward(InputTensor=t((1, 4, 3, 5, 5)), FilterTensor=t((6, 2, 1, 3, 3)), BiasTensor=t((1, 6, 1, 1, 1)), OutputTensor=t((1, 6, 3, 5, 5)),
            DimensionCount=3, Strides=(1, 1, 1), Dilations=(1, 1, 1), StartPadding=(0, 1, 1), EndPadding=(0, 1, 1), OutputPadding=(0, 0, 0)).validate()


@pytest.mark.parametrize("desc, field, words", [
    pytest.param(forward(FilterTensor=t((6, 4, 3, 3))), "FilterTensor", ["FilterChannelCount * GroupCount 8", "4 channels"],
                 id="filter-channels-times-groups-not-the-input-channels"),
    pytest.param(forward(GroupCount=1), "FilterTensor", ["FilterChannelCount * GroupCount 2"], id="group-count-1-for-a-grouped-filter"),
    pytest.param(forward(GroupCount=3, FilterTensor=t((6, 1, 3, 3))), "GroupCount", ["must divide"], id="groups-not-dividing-channels"),
    pytest.param(forward(GroupCount=4, FilterTensor=t((6, 1, 3, 3))), "GroupCount", ["6 output"], id="groups-not-dividing-filters"),
    pytest.param(forward(Strides=(1, 1, 1)), "Strides", ["3 values"], id="strides-length"),
    pytest.param(forward(Dilations=(0, 1)), "Dilations", ["at least 1"], id="zero-dilation"),
    pytest.param(forward(StartPadding=(1,)), "StartPadding", ["1 values"], id="start-padding-length"),
    pytest.param(forward(OutputPadding=(0, 0, 0)), "OutputPadding", [], id="output-padding-length"),
    pytest.param(forward(OutputTensor=t((1, 6, 4, 5))), "OutputTensor", ["[1, 6, 5, 5]"], id="output-height"),
    pytest.param(forward(OutputTensor=t((1, 5, 5, 5))), "OutputTensor", ["[1, 6, 5, 5]"], id="output-channels"),
    pytest.param(forward(OutputTensor=t((2, 6, 5, 5))), "OutputTensor", ["[1, 6, 5, 5]"], id="output-batch"),
    pytest.param(forward(BiasTensor=t((1, 5, 1, 1))), "BiasTensor", ["[1, 6, 1, 1]"], id="bias-channels"),
    pytest.param(forward(FilterTensor=t((6, 2, 9, 9))), "FilterTensor", ["larger than the padded input"], id="kernel-beyond-the-input"),
    pytest.param(forward(FilterTensor=t((6, 2, 1, 3, 3))), "FilterTensor", ["DimensionCount"], id="filter-rank"),
    pytest.param(forward(InputTensor=t((4, 5, 5))), "InputTensor", [], id="3-dimensional-input"),
    pytest.param(forward(FilterTensor=t((6, 2, 3, 3), DT.FLOAT16)), "FilterTensor", [], id="filter-type-not-the-inputs"),
    pytest.param(forward(InputTensor=t((1, 4, 5, 5), DT.INT8)), "InputTensor", [], id="integer-input"),
    pytest.param(forward(FusedActivation=DML_ACTIVATION_RELU_OPERATOR_DESC(InputTensor=t((1, 6, 5, 5)), OutputTensor=t((1, 6, 5, 5)))),
                 "FusedActivation", ["null"], id="activation-with-tensors"),
    pytest.param(backward(FilterTensor=t((3, 3, 3, 3))), "FilterTensor", ["FilterBatchCount 3"], id="backward-filter-batch-not-the-input-channels"),
    pytest.param(backward(OutputTensor=t((1, 6, 7, 7))), "OutputTensor", ["[1, 6, 5, 5]"], id="backward-output-beyond-a-stride"),
    pytest.param(backward(OutputTensor=t((1, 6, 4, 5))), "OutputTensor", ["[1, 6, 5, 5]"], id="backward-output-too-small"),
    pytest.param(backward(StartPadding=(5, 5), EndPadding=(5, 5)), "EndPadding", ["leaves an output"], id="backward-pads-leave-nothing"),
])
def test_inconsistent_descs_are_rejected(desc, field, words):
    rejects(desc, field, *words)


# --- 6. DxDispatch -----------------------------------------------------------------------------------


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, x_shape, w_shape, attributes, consumer", [
    pytest.param("Conv", (2, 4, 7, 6), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}, ("LeakyRelu", {"alpha": 0.3}),
                 id="conv-grouped-fused-leakyrelu"),
    pytest.param("Conv", (1, 3, 9), (4, 3, 3), {"dilations": [2], "pads": [2, 2]}, None, id="conv-1d"),
    pytest.param("ConvTranspose", (1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}, None,
                 id="convtranspose"),
])
def test_the_desc_exports_to_dxdispatch_and_loads_back_equal(tmp_path, op_type, x_shape, w_shape, attributes, consumer):
    x, w, b = case_operands(op_type, x_shape, w_shape, True, F32, attributes, seed=5, spread=False, scale=0.4)
    model, feeds = conv_model(op_type, x, w, b, consumer=consumer, **attributes)
    made = dxdispatch.export(model, str(tmp_path / "out"), feeds)
    [entry] = made.plan.dml_nodes
    assert json.loads((tmp_path / "out" / "model.json").read_text()) == made.model
    (dispatchable,) = made.model["dispatchables"].values()
    assert dispatchable["type"] == "DML_OPERATOR_CONVOLUTION"
    assert descs.from_dict(dispatchable) == entry.desc
    assert descs.from_dict(json.loads(json.dumps(descs.to_dict(entry.desc)))) == entry.desc
    fused = dispatchable["desc"].get("FusedActivation")
    if consumer is None:
        assert fused is None
    else:
        assert fused["Type"].endswith("ACTIVATION_LEAKY_RELU") and fused["Alpha"] == pytest.approx(0.3)
    assert ("BACKWARD" if op_type == "ConvTranspose" else "FORWARD") in str(dispatchable["desc"]["Direction"])
    # the replay, with dml_ep's kernels, against onnxruntime
    replayed = dxdispatch.load(str(tmp_path / "out")).run()
    reference = onnxruntime_run(model, feeds)[0]
    ours = np.asarray(replayed[entry.output]).reshape(reference.shape)
    k = products(op_type, x, w, b, attributes.get("group", 1))
    assert_within(ours, reference, allowed(ours, reference, k, magnitudes(op_type, x, w, b, **attributes)), "replay")


# --- 7. MACs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("consumer", [None, ("Relu", {})], ids=["convtranspose", "fused-relu"])
def test_conv_transpose_macs_are_its_input_times_the_filter(consumer, tmp_path, capsys):
    """Each input element meets the filter's {OC/G, k...}: N*C*H*W * (OC/G)*KH*KW, the fused node's too."""
    x_shape, w_shape = (2, 4, 3, 5), (4, 3, 2, 3)
    x, w, b = case_operands("ConvTranspose", x_shape, w_shape, True, F32, {"group": 2})
    model, _ = conv_model("ConvTranspose", x, w, b, consumer=consumer, group=2, strides=[2, 1])
    expected = int(np.prod(x_shape)) * int(np.prod(w_shape[1:]))
    assert expected == 2 * 4 * 3 * 5 * 3 * 2 * 3
    plan = dml_ep.InferenceSession(model).plan
    [entry] = plan.entries
    assert entry.node.op_type == ("ConvTranspose" if consumer is None else "DmlFusedConvTranspose")
    assert node_macs(entry.node, plan.values) == expected
    assert plan.summary()["dml"]["macs"] == expected and plan.summary()["fallback"]["macs"] == 0
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert cli.main(["inspect", str(path), "--json", str(tmp_path / "plan.json")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "plan.json").read_text())["summary"]["dml"]["macs"] == expected


def test_conv_macs_are_its_output_times_the_filter():
    x, w, b = case_operands("Conv", (2, 4, 7, 6), (6, 2, 3, 3), True, F32, {"group": 2})
    model, _ = conv_model("Conv", x, w, b, group=2, strides=[2, 1], pads=[1, 1, 1, 1])
    plan = dml_ep.InferenceSession(model).plan
    # output [2, 6, 4, 6], each of (C/G) * KH * KW = 2 * 3 * 3 products
    assert plan.summary()["dml"]["macs"] == 2 * 6 * 4 * 6 * 2 * 3 * 3


# --- 8. QuantizeLinear reading a convolution's channels-last output -------------------------------------


def dq_conv_q(x_shape, w_shape, seed, float_input=False, **attributes):
    """[x int8 -> DQ ->] Conv (DQ of a per-channel int8 weight, DQ of an int32 bias) -> Q int8 -> y:
    the Q reads the CONVOLUTION's output (an NCHW view of channels-last memory in dml_ep), and y is
    the codes themselves."""
    rng = np.random.default_rng(seed)
    out_channels = w_shape[0]
    x_scale, x_zero = F32(0.0213), np.int8(5)
    w_scales = (rng.uniform(0.5, 1.5, out_channels) * 0.0071).astype(F32)
    inits = {
        "x_scale": x_scale, "x_zero_point": x_zero,
        "w_q": rng.integers(-64, 64, w_shape).astype(np.int8), "w_scale": w_scales, "w_zero_point": np.zeros(out_channels, np.int8),
        "b_q": rng.integers(-3000, 3000, out_channels).astype(np.int32), "b_scale": (x_scale * w_scales).astype(F32),
        "y_scale": F32(0.0517 * np.sqrt(w_shape[1] * np.prod(w_shape[2:]) / 27)), "y_zero_point": np.int8(-7),
    }
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero_point"], ["w"], axis=0),
             helper.make_node("DequantizeLinear", ["b_q", "b_scale"], ["b"], axis=0),
             helper.make_node("Conv", ["x_dq", "w", "b"], ["c"], name="conv", **attributes),
             helper.make_node("QuantizeLinear", ["c", "y_scale", "y_zero_point"], ["y"], name="q")]
    if float_input:
        x = rng.uniform(-2.5, 2.5, x_shape).astype(F32)
        inputs = [helper.make_tensor_value_info("x_dq", TensorProto.FLOAT, x_shape)]
        feeds = {"x_dq": x}
    else:
        x = rng.integers(-128, 128, x_shape).astype(np.int8)
        nodes.insert(0, helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero_point"], ["x_dq"]))
        inputs = [helper.make_tensor_value_info("x", TensorProto.INT8, x_shape)]
        feeds = {"x": x}
    graph = helper.make_graph(nodes, "dq_conv_q", inputs, [helper.make_tensor_value_info("y", TensorProto.INT8, [None] * len(x_shape))],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model, feeds


CHANNELS_LAST = [
    pytest.param((2, 3, 7, 5), (5, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 1]}, id="2d-batch2"),
    pytest.param((1, 6, 5, 9), (4, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, id="2d-grouped"),
    pytest.param((2, 4, 13), (6, 4, 3), {"dilations": [2]}, id="1d"),
    pytest.param((1, 2, 4, 5, 3), (3, 2, 2, 2, 2), {"pads": [1, 0, 0, 0, 1, 1]}, id="3d"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ARITHMETICS)
@pytest.mark.parametrize("float_input", [False, True], ids=["dq-input", "float-input"])
@pytest.mark.parametrize("x_shape, w_shape, attributes", CHANNELS_LAST)
def test_quantize_linear_of_a_convolution_output_matches_onnxruntime(x_shape, w_shape, attributes, float_input, arithmetic):
    """The QuantizeLinear after a CONVOLUTION reads its output as the kernel leaves it (an NCHW view
    of channels-last memory, read and written in that layout by the compiled Q): its codes are
    onnxruntime's (an integer QLinearConv, or a float Conv then QuantizeLinear) within 1 step."""
    model, feeds = dq_conv_q(x_shape, w_shape, seed=7, float_input=float_input, **attributes)
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    entries = session.plan.entries
    [conv] = [e for e in entries if isinstance(e, DmlNode) and e.desc.OPERATOR_TYPE.name == "CONVOLUTION"]
    [q] = [e for e in entries if e.node.op_type == "QuantizeLinear"]
    assert isinstance(q, DmlNode) and q.desc.OPERATOR_TYPE.name == "ELEMENT_WISE_QUANTIZE_LINEAR"
    assert conv.output in q.value_inputs  # the Q reads the convolution's output itself
    ours, reference = session.run(None, feeds)[0], onnxruntime_run(model, feeds)[0]
    assert ours.dtype == reference.dtype == np.int8 and ours.shape == reference.shape
    assert len(np.unique(reference)) > 20  # the codes span the range: a layout error would move them
    assert_codes_within_one(ours, reference, f"{x_shape} {attributes} arithmetic={arithmetic}")
