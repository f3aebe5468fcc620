from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.graph import internal_model
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.kernels.mlas_exp import host_exp_lanes, mlas_exp
from dml_ep.operators import activation_softmax
from dml_ep.operators.importing import tensor
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

# Row lengths around MLAS's steps: 16-lane vectors, 48-element (AVX-512F) and 24-element (FMA3) steps, tails.
LENGTHS = [1, 7, 16, 23, 47, 48, 49, 67, 100, 257]


def logits(shape, dtype=np.float32, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(0, 6, shape)
    x.reshape(-1, shape[-1])[0] = np.linspace(-150, 150, shape[-1])  # exps below float32's normal range, and far apart
    return x.astype(dtype)


def run(x, opset=13, arithmetic="directml", **attributes):
    model, feeds = single_node_model("Softmax", [Feed(x)], x.dtype, x.ndim, opset=opset, **attributes)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)
    return session, session.run(None, feeds)[0], model, feeds


@pytest.mark.parametrize("opset, axis, shape, axes", [(13, -1, (2, 3, 5), (3,)), (13, 1, (2, 3, 5), (2,)), (11, 1, (2, 3, 5), (2, 3)),
                                                      (11, None, (4, 6), (3,)), (1, 0, (4, 6), (2, 3)), (13, 0, (2, 1, 1, 1, 3), (0,))])
def test_softmax_is_planned_as_softmax1_over_the_onnx_axes(opset, axis, shape, axes):
    """Softmax 1/11 over the flattened [axis..] dims, 13 over one axis; the axes moved by the padding to 4 dims."""
    attributes = {} if axis is None else {"axis": axis}
    session, _, _, _ = run(logits(shape), opset, **attributes)
    [entry] = session.plan.entries
    assert entry.operator == "DML_OPERATOR_ACTIVATION_SOFTMAX1"
    assert entry.desc.Axes == axes and entry.desc.AxisCount == len(axes)
    assert entry.desc.InputTensor.Sizes == (1,) * (4 - len(shape)) + shape


@pytest.mark.host_sensitive
@pytest.mark.parametrize("length", LENGTHS)
def test_onnxruntime_arithmetic_is_mlas_softmax_bit_for_bit(length):
    x = logits((9, length))
    _, ours, model, feeds = run(x, arithmetic="onnxruntime")
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("opset, axis", [(13, 1), (11, 1), (11, 0)])
def test_onnxruntime_arithmetic_matches_on_other_axes(opset, axis):
    """Softmax-13 on a middle axis (onnxruntime transposes it last), 11 over the flattened dims."""
    x = logits((3, 40, 5))
    _, ours, model, feeds = run(x, opset, arithmetic="onnxruntime", axis=axis)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))


def kernel(x: np.ndarray, axes: tuple[int, ...], arithmetic: str) -> np.ndarray:
    """The kernel alone on one desc (dml_ep's planner does not yet keep a float16 Softmax whole: the CPU
    session that applies onnxruntime's fusions inlines it, as onnxruntime does for the CPU EP)."""
    desc = activation_softmax.DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC(InputTensor=tensor(x.dtype, x.shape), OutputTensor=tensor(x.dtype, x.shape),
                                                                    AxisCount=len(axes), Axes=axes)
    desc.validate()
    return activation_softmax.activation_softmax(desc, {"InputTensor": x}, Arithmetic(arithmetic), None)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("shape", [(4, 3, 5), (2, 3, 37), (16, 8, 1024)])
def test_onnxruntime_arithmetic_of_float16_is_the_cpu_eps_inlined_softmax(shape):
    """onnxruntime has no float16 Softmax kernel on the CPU: it runs ONNX's function body in float32."""
    x = logits(shape, np.float16)
    model, feeds = single_node_model("Softmax", [Feed(x)], np.float16, x.ndim, opset=13)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    ours = kernel(x, (2,), "onnxruntime")
    assert ours.dtype == np.float16
    np.testing.assert_array_equal(ours.view(np.uint16), expected.view(np.uint16))


@pytest.mark.host_sensitive
def test_the_float16_chain_is_onnxruntimes_float32_softmax_function_body():
    """Before its last rounding: ONNX's Softmax-13 body run in float32 by onnxruntime, bit for bit."""
    rows = logits((64, 1000)).astype(np.float16).astype(np.float32)
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["m"]), helper.make_node("Sub", ["x", "m"], ["s"]),
             helper.make_node("Exp", ["s"], ["e"]), helper.make_node("ReduceSum", ["e", "axes"], ["t"]), helper.make_node("Div", ["e", "t"], ["y"])]
    graph = helper.make_graph(nodes, "softmax_body", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(rows.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.array([1]), "axes")])
    expected = cpu_session(internal_model(graph, 18), threads=1).run(None, {"x": rows})[0]
    ours = activation_softmax.onnxruntime_float16_softmax(rows, host_exp_lanes())
    np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))


@pytest.mark.host_sensitive
def test_mlas_exp_is_onnxruntimes_exp():
    x = np.random.default_rng(3).uniform(-110, 89, 4000).astype(np.float32)
    model, feeds = single_node_model("Exp", [Feed(x)], np.float32, 1, opset=13)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    with np.errstate(over="ignore"):
        ours = mlas_exp(x, host_exp_lanes())
    np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))


def test_the_three_kernels_round_apart():
    """The probe has something to tell: MLAS's AVX-512F, FMA3 and SSE2 kernels give three results on a long row."""
    rows = logits((50, 257))
    results = [activation_softmax.mlas_softmax(rows, lanes).tobytes() for lanes in (16, 8, 4)]
    assert len(set(results)) == 3


def exact_softmax(x: np.ndarray) -> np.ndarray:
    """The softmax of the last axis of ``x - max`` as DirectML's float32 subtraction gives it, in float64."""
    x32 = x.astype(np.float32)
    shifted = np.subtract(x32, x32.max(axis=-1, keepdims=True), dtype=np.float32).astype(np.float64)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    bits = {np.dtype(np.float32): np.int32, np.dtype(np.float16): np.int16}[a.dtype]
    return int(np.abs(a.view(bits).astype(np.int64) - b.astype(a.dtype).view(bits)).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_directml_arithmetic_is_the_exact_softmax_within_its_roundings(dtype):
    """DirectML's formula as a float32 point value: the exp, the sum and the division each round once (at
    most 2 ULP together here); float16 rounded once more from float32 (at most 1 float16 ULP)."""
    x = logits((5, 300), dtype)
    ours = kernel(x, (1,), "directml")
    assert ours.dtype == dtype
    assert ulps(ours, exact_softmax(x)) <= (2 if dtype == np.float32 else 1)
    if dtype == np.float32:  # through the session (a float16 Softmax is not yet planned whole: see kernel())
        assert ulps(run(x)[1], exact_softmax(x)) <= 2


def test_device_precision_is_webnns_3n_plus_3():
    session, _, _, _ = run(logits((2, 3, 5)), 11, axis=1)
    [entry] = session.plan.entries
    precision = activation_softmax.OPERATORS[0].device_precision(entry.desc)
    assert (precision.ulp32, precision.ulp16) == (48, 48) and "3N+3" in precision.rule


def test_a_double_softmax_runs_on_the_cpu_as_in_the_real_ep():
    model, _ = single_node_model("Softmax", [Feed(np.ones((2, 3)))], np.float64, 2, opset=13)
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")
