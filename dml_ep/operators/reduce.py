"""DML_OPERATOR_REDUCE (SUM, AVERAGE, MAX, MIN) for ONNX ReduceSum, ReduceMean, ReduceMax and ReduceMin:
desc, import, kernel.

Import, as DmlOperatorReduce.cpp builds it: input of the node's shape (at least 1 dimension, not
padded to 4), ``Axes`` the ONNX axes made non-negative, the output of the input's rank with the
reduced axes of size 1 (keepdims=0 re-describes the ONNX output so). The axes are an attribute
before ReduceSum-13 and the other ops' 18, a required constant CPU input from then on; no axes
reduce all of them (ReduceHelperBase's HandleEmptyAxes) unless ``noop_with_empty_axes``, which dml_ep
does not model. ReduceMax/Min-20's bool is UINT8 to DirectML (its MAX an OR, its MIN an AND). In an LLM or a transformer these are the ReduceMean of a decomposed RMS or layer norm
(SimplifiedLayerNormFusion does not run for the DML EP) and the int64 ReduceSum of an attention mask.

Support (DML_REDUCE_OPERATOR_DESC's page): 4 dimensions from DML_FEATURE_LEVEL_1_0, 1 to 8 from 3_0;
SUM FLOAT32 and FLOAT16, INT32 and UINT32 from 2_1; AVERAGE floats only; MAX and MIN floats, INT32 and
UINT32 from 2_1, INT16, INT8, UINT16, UINT8 from 3_0. INT64 and UINT64: the page lists them for no
reduce function, yet the real EP registers ReduceSum/Max/Min for them (its Ints32to64 masks), so dml_ep
takes them from 3_0, the level that added 64-bit types to "select operators" (inferred, not documented).

Kernel:
- integers: SUM wraps in the tensor's type as a GPU's integer adds do, MAX and MIN are exact: the same in
  both arithmetics (onnxruntime 1.32's integer sums agree while they stay in range).
- float MAX and MIN: exact in both arithmetics (NaN inputs not modelled).
- float SUM and AVERAGE, ``"directml"``: the sum of the float32 (float16 widened) values in float64, the
  average divided by N there, rounded once to float32 (and once more to float16). A GPU sums in an order
  of its own: WebNN holds sum to N ULP and mean to N + 2 (``device_precision``).
- float SUM and AVERAGE, ``"onnxruntime"``: onnxruntime's CPU ReduceSum/ReduceMean
  (providers/cpu/reduction/reduction_ops.cc): the shape with runs of reduced or kept dims merged picks
  a fast path (:func:`onnxruntime_path`): KR (each row by Eigen's ``sum()``: SSE packets of 4 floats from the
  first 16-byte aligned element, two packets a step, ``(p0+p2)+(p1+p3)``, then the unaligned head and
  the tail one by one), RK (the rows added in order), KRK (a ones row times each block through MLAS's
  M=1 SGEMM kernel, MlasSgemmKernelM1Avx: four rows summed in order, each group then added on; without
  AVX its SGEMM: strides of 128 rows and up, by N, each summed in order; measured on the host), RKR
  (Eigen sums of each kept slice's rows, added in order); all dims reduced, Eigen's sum of the whole;
  any other reduces element by element in order. The paths are a single-threaded session's: with a pool
  of P threads a reduction over leading dims changes path at 16P rows and 256P elements (not modelled). AVERAGE divides the float32 sum by N in float32. Emulated bit for bit
  where the input starts 16-byte aligned (onnxruntime's arena, numpy's allocator). float16: onnxruntime
  has no float16 ReduceSum/ReduceMean on the CPU: it casts to float32, so float16 is that float32 result
  rounded to float16.

No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_REDUCE_FUNCTION
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import InvalidAttributeError
from ..core.graph import internal_model
from ..core.tensor_desc import view
from ..ort.reference import cpu_session
from ..realep.kernel_registry import since_version
from ..realep.placement import ASSIGNED_TO_DML, ON_DML_AS
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .element_wise_identity import dims_of, dml_type
from .importing import Fallback, NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

RF = DML_REDUCE_FUNCTION

# --- desc ------------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
_FIELDS = ("InputTensor", "OutputTensor")
_INT32 = frozenset({DT.INT32, DT.UINT32})
_SMALL_INTS = frozenset({DT.INT16, DT.INT8, DT.UINT16, DT.UINT8})
_INT64 = frozenset({DT.INT64, DT.UINT64})  # inferred: see the module docstring
_TYPES = {FL.FL_1_0: FLOATS, FL.FL_2_1: _INT32, FL.FL_3_0: _SMALL_INTS | _INT64}
# The data types each modelled function takes (the page's tables, plus the inferred 64-bit integers).
FUNCTION_TYPES = {RF.SUM: FLOATS | _INT32 | _INT64, RF.AVERAGE: FLOATS, RF.MAX: FLOATS | _INT32 | _SMALL_INTS | _INT64,
                  RF.MIN: FLOATS | _INT32 | _SMALL_INTS | _INT64}


@dataclasses.dataclass(frozen=True)
class DML_REDUCE_OPERATOR_DESC(OperatorDesc):
    """REDUCE: ``Function`` over the elements that differ only in ``Axes``; the output keeps the input's
    rank, each reduced axis of size 1."""

    Function: DML_REDUCE_FUNCTION
    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    AxisCount: int
    Axes: tuple[int, ...]

    OPERATOR_TYPE = OP.REDUCE
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})
    SAME_TYPE = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        if self.Function not in FUNCTION_TYPES:
            self.fail(f"Function {self.Function} is not modelled by dml_ep (SUM, AVERAGE, MAX, MIN)", "Function")
        if self.InputTensor.DataType not in FUNCTION_TYPES[self.Function]:
            allowed = ", ".join(sorted(t.name for t in FUNCTION_TYPES[self.Function]))
            self.fail(f"DataType {self.InputTensor.DataType.name} is not supported by {self.Function} (allowed: {allowed})", "InputTensor")
        check_axes(self, self.AxisCount, self.Axes)
        if self.OutputTensor.Sizes != reduced_sizes(self.InputTensor.Sizes, self.Axes):
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be the input's {list(self.InputTensor.Sizes)} with each axis "
                      f"of {list(self.Axes)} 1", "OutputTensor")

    @property
    def reduced_count(self) -> int:
        """N, the number of elements one output element reduces."""
        return int(np.prod([self.InputTensor.Sizes[axis] for axis in self.Axes]))


def reduced_sizes(sizes, axes) -> tuple[int, ...]:
    return tuple(1 if axis in axes else size for axis, size in enumerate(sizes))


def check_axes(desc: OperatorDesc, count: int, axes: tuple[int, ...]) -> None:
    """REDUCE's and ACTIVATION_SOFTMAX1's Axes: AxisCount of them, at least one, distinct, in InputTensor's rank."""
    rank = getattr(desc, "InputTensor").DimensionCount
    if count != len(axes) or not axes:
        desc.fail(f"AxisCount {count} must be the number of Axes {list(axes)}, at least 1", "Axes")
    if len(set(axes)) != len(axes) or not all(0 <= axis < rank for axis in axes):
        desc.fail(f"axes {list(axes)} must be distinct and in [0, {rank - 1}]", "Axes")


# --- import from ONNX ------------------------------------------------------------------------


def _axes(ctx: NodeContext, axes_input_since: int) -> list[int]:
    """The node's axes: its attribute before ``axes_input_since``, its constant input 1 from then on."""
    if since_version("", ctx.node.op_type, ctx.opset) < axes_input_since:
        return list(ctx.attr("axes", []))
    value = ctx.constants.get(ctx.input_name(1)) if ctx.input_name(1) else None
    return [] if value is None else [int(axis) for axis in np.asarray(value).reshape(-1)]


def _reduce(ctx: NodeContext, function: RF, axes_input_since: int) -> DmlNode:
    """An ONNX Reduce* node as REDUCE with ``function``."""
    dtype = ctx.info(0).dtype
    if dtype is None or DT.from_numpy(dml_type(dtype)) not in FUNCTION_TYPES[function]:
        allowed = ", ".join(sorted(t.name for t in FUNCTION_TYPES[function]))
        raise Fallback(f"element type {dtype} is not supported by REDUCE {function.name} ({allowed})", ASSIGNED_TO_DML)
    shape = ctx.shape(0)
    rank = len(shape)
    if 0 in shape:
        raise Fallback(f"an empty input {list(shape)}", ON_DML_AS.format("REDUCE"))
    axes = _axes(ctx, axes_input_since)
    if not axes and int(ctx.attr("noop_with_empty_axes", 0)):
        raise Fallback("noop_with_empty_axes with no axes (the real EP builds a REDUCE of no axes)", ON_DML_AS.format("REDUCE"))
    if any(not -max(rank, 1) <= axis < max(rank, 1) for axis in axes):
        raise InvalidAttributeError(f"axes {axes} are outside [-{rank}, {rank - 1}]", node=ctx.node)
    sizes = dims_of(ctx, shape)
    dml_axes = tuple(sorted({axis % len(sizes) for axis in axes})) if axes else tuple(range(len(sizes)))
    keepdims = int(ctx.attr("keepdims", 1))
    out_shape = tuple(1 if axis in dml_axes else size for axis, size in enumerate(shape) if keepdims or axis not in dml_axes)
    dtype = dml_type(dtype)
    desc = DML_REDUCE_OPERATOR_DESC(Function=function, InputTensor=tensor(dtype, sizes),
                                    OutputTensor=tensor(dtype, reduced_sizes(sizes, dml_axes)), AxisCount=len(dml_axes), Axes=dml_axes)
    return ctx.dml_node(desc, ("InputTensor",), out_shape)


def reduce_sum(ctx: NodeContext) -> DmlNode:
    """ONNX ReduceSum (axes an input from 13)."""
    return _reduce(ctx, RF.SUM, 13)


def reduce_mean(ctx: NodeContext) -> DmlNode:
    """ONNX ReduceMean (axes an input from 18)."""
    return _reduce(ctx, RF.AVERAGE, 18)


def reduce_max(ctx: NodeContext) -> DmlNode:
    """ONNX ReduceMax (axes an input from 18)."""
    return _reduce(ctx, RF.MAX, 18)


def reduce_min(ctx: NodeContext) -> DmlNode:
    """ONNX ReduceMin (axes an input from 18)."""
    return _reduce(ctx, RF.MIN, 18)


# --- onnxruntime's float sums ----------------------------------------------------------------

_PACKET = 4  # Eigen's SSE Packet4f: onnxruntime's x86-64 build compiles Eigen for SSE2


def eigen_sums(rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Eigen's ``sum()`` of each row (rows x n, float32) that starts ``offsets`` elements after a 16-byte
    aligned address (redux_impl, LinearVectorizedTraversal)."""
    count = rows.shape[1]
    sums = np.empty(rows.shape[0], np.float32)
    for start in range(_PACKET):
        group = np.nonzero((-offsets) % _PACKET == start)[0]
        if group.size:
            sums[group] = _eigen_sum(rows[group], min(start, count), count)
    return sums


def _eigen_sum(rows: np.ndarray, head: int, count: int) -> np.ndarray:
    aligned = (count - head) // _PACKET * _PACKET
    if not aligned:
        return _in_order(rows)
    end2, end = head + (count - head) // (2 * _PACKET) * 2 * _PACKET, head + aligned
    packet0 = rows[:, head:head + _PACKET].copy()
    if aligned > _PACKET:
        packet1 = rows[:, head + _PACKET:head + 2 * _PACKET].copy()
        for index in range(head + 2 * _PACKET, end2, 2 * _PACKET):
            packet0 += rows[:, index:index + _PACKET]
            packet1 += rows[:, index + _PACKET:index + 2 * _PACKET]
        packet0 += packet1
        if end > end2:
            packet0 += rows[:, end2:end2 + _PACKET]
    total = (packet0[:, 0] + packet0[:, 2]) + (packet0[:, 1] + packet0[:, 3])  # predux<Packet4f>
    for index in itertools.chain(range(head), range(end, count)):
        total += rows[:, index]
    return total


def _in_order(rows: np.ndarray) -> np.ndarray:
    """The columns of ``rows`` added one after another."""
    total = rows[:, 0].copy()
    for index in range(1, rows.shape[1]):
        total += rows[:, index]
    return total


def _sgemm_blocks(columns: np.ndarray, n: int) -> np.ndarray:
    """MLAS's SGEMM of a ones row with B (K x ``n``), where it has no M=1 kernel (x86-64 without AVX): K in
    strides (MlasSgemmOperation's, from 128 x 128 by N), each summed in order from zero, then added to C."""
    stride_n, stride_k = 128, 128  # MLAS_SGEMM_STRIDEN, MLAS_SGEMM_STRIDEK
    count = columns.shape[1]
    if n >= count:
        while stride_k // 2 >= count:
            stride_n, stride_k = stride_n * 2, stride_k // 2
    else:
        while stride_n > 16 and stride_n // 2 >= n:
            stride_n, stride_k = stride_n // 2, stride_k * 2
    total = _in_order(columns[:, :stride_k])
    for start in range(stride_k, count, stride_k):
        total = _in_order(columns[:, start:start + stride_k]) + total
    return total


@functools.lru_cache(maxsize=1)
def host_sgemm_m1() -> bool:
    """Whether the host's onnxruntime runs MLAS's AVX M=1 SGEMM kernel for a KRK ReduceSum (the ones-row
    product), measured once: four rows a group tell it from summing in order."""
    x = np.zeros((2, 8, 2), np.float32)
    x[:, 0], x[:, 4:] = 1e8, 3
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], "krk_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.array([1]), "axes")])
    y = cpu_session(internal_model(graph, 13), threads=1).run(None, {"x": x})[0]
    return bool(np.array_equal(y.reshape(-1), _gemv_m1(x.transpose(0, 2, 1).reshape(4, 8))))


def _gemv_m1(columns: np.ndarray) -> np.ndarray:
    """MlasSgemmKernelM1Avx's product of a ones row with B, each column's sum: four rows of B at a time
    added in order (``((b0 + b1) + b2) + b3``), each group then added to C; two, then one row last."""
    count = columns.shape[1]
    total = np.zeros(columns.shape[0], np.float32)
    start = 0
    for width in (4,) * (count // 4) + ((2,) if count % 4 >= 2 else ()) + ((1,) if count % 2 else ()):
        total = _in_order(columns[:, start:start + width]) + total
        start += width
    return total


def fast_shape(shape, axes) -> tuple[tuple[int, ...], str]:
    """onnxruntime's shape for its fast reductions (OptimizeShapeForFastReduce): runs of reduced ("R")
    or kept ("K") dims merged."""
    sizes: list[int] = []
    kinds = ""
    for axis, size in enumerate(shape):
        kind = "R" if axis in axes else "K"
        if kinds.endswith(kind):
            sizes[-1] *= size
        else:
            sizes.append(size)
            kinds += kind
    return tuple(sizes), kinds


def onnxruntime_path(sizes: tuple[int, ...], kinds: str) -> str:
    """The path onnxruntime's CommonFastReduceSwitch takes, on one thread (a pool of P threads moves RK's
    bounds to 16P and 256P): KR always, RK past 16 rows and 256 elements a side, KRK and RKR past one
    outer block or middle slice; else NoTransposeReduce1Loop, "all" where every dim is reduced."""
    if kinds == "R":
        return "all"
    if kinds == "RK" and sizes[0] > 16 and max(sizes) > 256:
        return "RK"
    if kinds == "KR" or (kinds == "KRK" and sizes[0] >= 2) or (kinds == "RKR" and sizes[1] >= 2):
        return kinds
    return "in order"


def onnxruntime_sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """onnxruntime's CPU ReduceSum of float32 ``x`` over ``axes``, the reduced axes kept as 1s."""
    out_shape = reduced_sizes(x.shape, axes)
    sizes, kinds = fast_shape(x.shape, axes)
    flat = np.ascontiguousarray(x).reshape(-1)
    path = onnxruntime_path(sizes, kinds)
    if path in ("all", "KR"):  # the whole tensor (aggall), or each row, by Eigen
        rows = flat.reshape(-1, sizes[-1])
        sums = eigen_sums(rows, np.arange(rows.shape[0]) * rows.shape[1])
    elif path in ("RK", "KRK"):
        columns = flat.reshape(-1, sizes[-2], sizes[-1]).transpose(0, 2, 1).reshape(-1, sizes[-2])  # (outer x kept, reduced)
        sums = _in_order(columns) if path == "RK" else _gemv_m1(columns) if host_sgemm_m1() else _sgemm_blocks(columns, sizes[-1])
    elif path == "RKR":
        d0, d1, d2 = sizes
        rows = flat.reshape(d0, d1, d2).transpose(1, 0, 2).reshape(-1, d2)
        offsets = (np.arange(d0)[None, :] * d1 * d2 + np.arange(d1)[:, None] * d2).reshape(-1)
        sums = _in_order(eigen_sums(rows, offsets).reshape(d1, d0))
    else:  # NoTransposeReduce1Loop: each output's elements one by one, in order
        kept = [axis for axis in range(x.ndim) if axis not in axes]
        moved = np.transpose(x, kept + list(axes))
        sums = _in_order(np.ascontiguousarray(moved).reshape(-1, int(np.prod([x.shape[axis] for axis in axes]))))
    return sums.reshape(out_shape)


# --- kernel ----------------------------------------------------------------------------------


def _float_sum(desc: DML_REDUCE_OPERATOR_DESC, x: np.ndarray, onnxruntime: bool) -> np.ndarray:
    count = desc.reduced_count
    if onnxruntime:
        total = onnxruntime_sum(x.astype(np.float32), desc.Axes)
        return total / np.float32(count) if desc.Function == RF.AVERAGE else total
    total64 = x.astype(np.float64).sum(axis=desc.Axes, keepdims=True)
    return (total64 / count if desc.Function == RF.AVERAGE else total64).astype(np.float32)


def reduce(desc: DML_REDUCE_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """REDUCE's Function over ``Axes`` (the module docstring gives each arithmetic's)."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    if desc.Function == RF.MAX:
        return np.max(x, axis=desc.Axes, keepdims=True)
    if desc.Function == RF.MIN:
        return np.min(x, axis=desc.Axes, keepdims=True)
    if x.dtype.kind in "iu":
        return np.sum(x, axis=desc.Axes, keepdims=True, dtype=x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _float_sum(desc, x, arithmetic.onnxruntime).astype(x.dtype)


def exact_for_any_input(desc: DML_REDUCE_OPERATOR_DESC) -> bool:
    """MAX, MIN and integer sums give every arithmetic's output."""
    return desc.Function in (RF.MAX, RF.MIN) or desc.InputTensor.DataType not in FLOATS


def device_precision(desc: DML_REDUCE_OPERATOR_DESC) -> DevicePrecision:
    """WebNN's reduction tolerances: sum N ULP, mean N + 2 (N reduced elements); MAX, MIN exact."""
    if desc.Function not in (RF.SUM, RF.AVERAGE) or desc.InputTensor.DataType not in FLOATS:
        return DevicePrecision(rule="WebNN reduceMax/reduceMin/integer reductions: exact (0 ULP)")
    count = desc.reduced_count
    ulp = count + 2 if desc.Function == RF.AVERAGE else count
    what = "reduceMean N+2" if desc.Function == RF.AVERAGE else "reduceSum N"
    return DevicePrecision(rule=f"WebNN {what} ULP, N = {count} (wpt webnn/resources/utils.js)", ulp32=ulp, ulp16=ulp)


OPERATORS = (Operator(desc=DML_REDUCE_OPERATOR_DESC, kernel=reduce, exact_value=None, exact_for_any_input=exact_for_any_input,
                      device_precision=device_precision),)
"""ONNX ReduceSum, ReduceMean, ReduceMax and ReduceMin on DML_OPERATOR_REDUCE (``dml_ep/operators/reduce.py``)."""
