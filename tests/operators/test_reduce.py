from __future__ import annotations

import math

import numpy as np
import pytest

import dml_ep
from dml_ep.core.enums import DML_REDUCE_FUNCTION
from dml_ep.operators import reduce
from dml_ep.operators.activation_softmax import DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

# Shapes and axes for each of onnxruntime's reduction paths (size-1 dims dropped, runs merged).
PATHS = {
    "KR": ((5, 37), (1,)), "KR unaligned rows": ((7, 3, 50), (2,)), "R": ((3, 45), (0, 1)), "RK": ((9, 37), (0,)),
    "KRK": ((3, 7, 9), (1,)), "KRK long": ((2, 70, 6), (1,)), "RKR": ((4, 5, 6, 7), (0, 2, 3)), "RKRK": ((4, 5, 6, 7), (0, 2)),
    "KRKR": ((2, 3, 4, 5, 6), (1, 3, 4)), "size-1 dims": ((1, 6, 1, 33), (1, 3)), "LLM RMS norm": ((1, 16, 512), (2,)),
    "RK long": ((40, 300), (0,)), "KRK one block": ((1, 128, 24), (1,)), "RKR one slice": ((4, 1, 6), (0, 2)),
    "KRK past a stride": ((2, 300, 3), (1,)), "KRK wide": ((2, 200, 260), (1,)),
}
OPSET = 18


def node(op_type, x, axes=None, opset=OPSET, **attributes):
    """A one-node model of ``op_type`` on ``x`` (a graph input), its axes an input from ReduceSum-13 and the
    others' 18, an attribute before."""
    axes_input = opset >= (13 if op_type == "ReduceSum" else 18)
    operands = [Feed(x)] + ([None if axes is None else np.array(axes, np.int64)] if axes_input else [])
    if axes is not None and not axes_input:
        attributes["axes"] = list(axes)
    return single_node_model(op_type, operands, x.dtype, x.ndim, opset=opset, **attributes)


def run(op_type, x, axes=None, arithmetic="directml", opset=OPSET, **attributes):
    model, feeds = node(op_type, x, axes, opset, **attributes)
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic)
    return session, session.run(None, feeds)[0], model, feeds


def values(shape, dtype=np.float32, seed=0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(0, 1, shape) * np.exp(np.random.default_rng(seed + 1).uniform(0, 9, shape))).astype(dtype)


@pytest.mark.parametrize("op_type, opset, axes, keepdims, out_shape", [
    ("ReduceSum", 13, (-1,), 0, (2, 3)), ("ReduceMean", 18, (0, 2), 1, (1, 3, 1)), ("ReduceMax", 11, (1,), 1, (2, 1, 4)),
    ("ReduceMin", 12, None, 0, ()), ("ReduceSum", 11, (0, -2), 1, (1, 1, 4)), ("ReduceMean", 13, None, 1, (1, 1, 1))])
def test_reduce_is_planned_as_reduce_of_the_onnx_rank(op_type, opset, axes, keepdims, out_shape):
    """DmlOperatorReduce: the input of the node's rank (not padded to 4), axes made non-negative (all of them
    when none is given), the output of that rank with the reduced axes 1; keepdims=0 only drops them in ONNX."""
    x = values((2, 3, 4))
    session, y, _, _ = run(op_type, x, axes, opset=opset, keepdims=keepdims)
    [entry] = session.plan.entries
    assert entry.operator == "DML_OPERATOR_REDUCE"
    dml_axes = tuple(sorted({a % 3 for a in axes})) if axes else (0, 1, 2)
    assert entry.desc.Axes == dml_axes and entry.desc.InputTensor.Sizes == (2, 3, 4)
    assert entry.desc.OutputTensor.Sizes == tuple(1 if a in dml_axes else s for a, s in enumerate((2, 3, 4)))
    assert y.shape == out_shape


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("path", PATHS)
def test_onnxruntime_arithmetic_is_onnxruntimes_float_sum_bit_for_bit(op_type, path):
    shape, axes = PATHS[path]
    x = values(shape)
    _, ours, model, feeds = run(op_type, x, axes, "onnxruntime")
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean"])
def test_onnxruntime_arithmetic_of_float16_is_the_float32_sum_rounded(op_type):
    """onnxruntime has no float16 ReduceSum/ReduceMean on the CPU: it casts to float32 and back."""
    x = values((6, 4, 129), np.float16)
    _, ours, model, feeds = run(op_type, x, (2,), "onnxruntime")
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    assert ours.dtype == np.float16
    np.testing.assert_array_equal(ours.view(np.uint16), expected.view(np.uint16))


def exact(x: np.ndarray, axes: tuple[int, ...], mean: bool) -> np.ndarray:
    """Each reduction summed exactly (math.fsum), divided by N in exact arithmetic's float64 nearest, then rounded."""
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = np.transpose(x.astype(np.float64), kept + list(axes)).reshape(-1, int(np.prod([x.shape[a] for a in axes])))
    sums = np.array([math.fsum(row) for row in rows])
    return (sums / rows.shape[1] if mean else sums).astype(np.float32).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("path", ["KR", "RK", "RKRK"])
def test_directml_arithmetic_is_the_correctly_rounded_sum_and_mean(op_type, path, dtype):
    shape, axes = PATHS[path]
    x = values(shape, dtype)
    _, ours, _, _ = run(op_type, x, axes, keepdims=0)
    np.testing.assert_array_equal(ours.reshape(-1), exact(x, axes, op_type == "ReduceMean"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("op_type, numpy_op", [("ReduceMax", np.max), ("ReduceMin", np.min)])
def test_max_and_min_are_exact_in_both_arithmetics(op_type, numpy_op, dtype):
    x = np.clip(values((3, 5, 7)) * 10, -100, 100).astype(dtype)
    for arithmetic in ("directml", "onnxruntime"):  # opset 13: the real EP's ReduceMax/Min-18 rows drop the 8- and 16-bit types
        session, ours, model, feeds = run(op_type, x, (0, 2), arithmetic, opset=13, keepdims=0)
        np.testing.assert_array_equal(ours, numpy_op(x, axis=(0, 2)), strict=True)
    assert reduce.OPERATORS[0].exact_for_any_input(session.plan.entries[0].desc)


@pytest.mark.host_sensitive
def test_the_int64_attention_mask_sum_matches_onnxruntime():
    """The builder LLM's ReduceSum of its int64 attention mask (the sequence lengths)."""
    mask = np.tril(np.ones((4, 37), np.int64), 20)
    session, ours, model, feeds = run("ReduceSum", mask, (1,), "onnxruntime", keepdims=0)
    assert session.plan.entries[0].operator == "DML_OPERATOR_REDUCE"
    np.testing.assert_array_equal(ours, cpu_session(model, threads=1).run(None, feeds)[0], strict=True)


def test_an_int32_sum_wraps_as_a_gpus_integer_adds_do():
    x = np.array([[2**31 - 1, 1, 5], [-(2**31), -1, 0]], np.int32)
    _, ours, _, _ = run("ReduceSum", x, (1,), keepdims=0)
    np.testing.assert_array_equal(ours, np.array([-(2**31) + 5, 2**31 - 1], np.int32), strict=True)


def test_device_precision_is_webnns_reduction_tolerances():
    x = values((2, 3, 4))
    precision = {op: reduce.OPERATORS[0].device_precision(run(op, x, (1, 2))[0].plan.entries[0].desc)
                 for op in ("ReduceSum", "ReduceMean", "ReduceMax")}
    assert (precision["ReduceSum"].ulp32, precision["ReduceMean"].ulp32, precision["ReduceMax"].ulp32) == (12, 14, 0)
    assert not reduce.OPERATORS[0].exact_for_any_input(run("ReduceSum", x, (1,))[0].plan.entries[0].desc)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, dtype, axes, attributes, reason", [
    ("ReduceSum", np.float32, None, {"noop_with_empty_axes": 1}, "noop_with_empty_axes with no axes"),
    ("ReduceMean", np.int32, (1,), {}, "element type int32 is not supported by REDUCE AVERAGE"),
])
def test_what_dml_ep_does_not_model_falls_back_with_its_reason(op_type, dtype, axes, attributes, reason):
    x = values((2, 3), dtype)
    session, ours, model, feeds = run(op_type, x, axes, **attributes)
    [entry] = session.plan.entries
    assert entry.kind == "not-modelled" and reason in entry.reason
    np.testing.assert_array_equal(ours, cpu_session(model, threads=1).run(None, feeds)[0])


def test_a_double_reduce_sum_runs_on_the_cpu_as_in_the_real_ep():
    model, _ = node("ReduceSum", np.ones((2, 3)), (1,))
    [entry] = dml_ep.InferenceSession(model.SerializeToString()).plan.entries
    assert entry.kind == "types" and entry.reason.endswith("on the CPU in the real EP too")


def test_onnxruntime_paths_merge_runs_of_dims_and_keep_size_1_dims():
    assert reduce.fast_shape((1, 6, 1, 33, 2), (1, 3)) == ((1, 6, 1, 33, 2), "KRKRK")
    assert reduce.fast_shape((4, 5, 6, 7), (0, 1)) == ((20, 42), "RK")
    assert [reduce.onnxruntime_path(*reduce.fast_shape(shape, axes)) for shape, axes in PATHS.values()] == [
        "KR", "KR", "all", "in order", "KRK", "KRK", "RKR", "in order", "in order", "in order", "KR", "RK", "in order", "in order", "KRK", "KRK"]


def test_desc_rejects_a_function_dml_ep_does_not_model_and_types_its_function_does_not_take():
    session, _, _, _ = run("ReduceSum", values((2, 3)), (1,))
    desc = session.plan.entries[0].desc
    for function, match in [(DML_REDUCE_FUNCTION.L2, "not modelled"), (DML_REDUCE_FUNCTION.ARGMAX, "not modelled")]:
        with pytest.raises(dml_ep.core.errors.DescValidationError, match=match):
            type(desc)(Function=function, InputTensor=desc.InputTensor, OutputTensor=desc.OutputTensor, AxisCount=1, Axes=(1,)).validate()
    with pytest.raises(dml_ep.core.errors.DescValidationError, match="must be the input's"):
        type(desc)(Function=desc.Function, InputTensor=desc.InputTensor, OutputTensor=desc.InputTensor, AxisCount=1, Axes=(1,)).validate()


@pytest.mark.parametrize("count, axes, match", [(2, (1,), "must be the number of Axes"), (0, (), "at least 1"),
                                                (2, (1, 1), "distinct"), (1, ("rank",), r"distinct and in \[0, ")])
def test_reduce_and_softmax1_descs_check_their_axes_alike(count, axes, match):
    session, _, _, _ = run("ReduceSum", values((2, 3)), (1,))
    desc = session.plan.entries[0].desc
    axes = tuple(desc.InputTensor.DimensionCount if axis == "rank" else axis for axis in axes)  # one past the last axis
    for made in (lambda: type(desc)(Function=desc.Function, InputTensor=desc.InputTensor, OutputTensor=desc.OutputTensor, AxisCount=count, Axes=axes),
                 lambda: DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC(InputTensor=desc.InputTensor, OutputTensor=desc.InputTensor, AxisCount=count, Axes=axes)):
        with pytest.raises(dml_ep.core.errors.DescValidationError, match=match):
            made().validate()


def test_the_krk_probe_tells_mlas_m1_kernel_from_its_packed_sgemm():
    """Four rows a group against strides summed in order: 1e8 + 12 against 1e8 + 3 + 3 + 3 + 3."""
    columns = np.array([[1e8, 0, 0, 0, 3, 3, 3, 3]], np.float32)
    assert reduce._gemv_m1(columns)[0] == np.float32(1e8 + 16) and reduce._sgemm_blocks(columns, 2)[0] == np.float32(1e8)


def test_mlas_sgemm_strides_follow_n():
    """N >= K keeps 128-row strides (their sums added on); a narrow N widens them (N = 3: 1024 rows)."""
    columns = np.zeros((1, 300), np.float32)
    columns[0, 0], columns[0, 128:] = 1e8, 3
    assert reduce._sgemm_blocks(columns, 3)[0] == np.float32(1e8)  # one stride: each 3 lost in turn
    assert reduce._sgemm_blocks(columns, 300)[0] == np.float32(1e8) + np.float32(3 * 128) + np.float32(3 * 44)


@pytest.mark.parametrize("op_type, expected", [("ReduceMax", [True, False]), ("ReduceMin", [False, False])])
def test_a_bool_reduce_max_or_min_20_reads_bool_as_uint8(op_type, expected):
    x = np.array([[True, False, True], [False, False, False]])
    session, ours, _, _ = run(op_type, x, (1,), opset=20, keepdims=0)
    assert session.plan.entries[0].desc.InputTensor.DataType.name == "UINT8"
    np.testing.assert_array_equal(ours, expected)
