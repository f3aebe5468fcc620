"""DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2 (ONNX LayerNormalization 17, onnxruntime's ai.onnx
LayerNormalization 1 and SimplifiedLayerNormalization 1, and the normalization of SkipLayerNormalization's
DirectML graph, com.microsoft.dml ``DmlMeanVarianceNormalization``): desc, import, kernel.

Import, as DmlOperatorLayerNormalization.cpp builds it (one class, ``simplified`` for RMS norm):
input, scale and bias at the input's rank, padded with trailing 1s to at least 4 dimensions (scale
and bias right-aligned to the input first: ONNX broadcasting); ``Axes`` = ``[axis, rank')`` of the
padded rank; ``UseMean`` = not simplified, ``UseVariance`` = 1, ``Epsilon`` the attribute;
``stash_type`` is never read. The query takes a node with one output only (a LayerNormalization that
also makes Mean or InvStdDev runs on the CPU). Types: scale, bias and output share a type; a float16
input with float32 scale is CAST up first (exact: dml_ep folds that CAST into the node, whose
tensors are then all FLOAT32); a float32 input with float16 scale CASTs scale and bias up and the
output down, a DirectML graph dml_ep does not model (:class:`Fallback`). Releases before 1.18 built
MVN1 (``NormalizeVariance``, no RMS form): for a layer norm the same math.

Support: DirectML.h declares MVN2 under DML_TARGET_VERSION 0x6300 (DML_FEATURE_LEVEL_6_3); its page
is "TBD", so the tensor table is MVN1's at 5_2 and later: 1 to 8 dimensions, FLOAT32 and FLOAT16,
Scale and Bias optional and broadcast (size 1 or the input's in each dimension).

Kernel, per normalization (the elements that differ only in ``Axes``):
- ``"directml"``: the page's ``Scale * (x - mean) / sqrt(variance + Epsilon) + Bias`` (``mean`` 0
  without UseMean, so the variance is the mean square; no division without UseVariance), evaluated in
  float64 from the float32 (or widened float16) values and rounded once to the output type: the mean
  and variance of float32 values are near-exact in float64 whatever the order, so this is the point
  every device's order of summation scatters around. WebNN holds layerNormalization to an absolute
  1/1024 (float32), 1/512 (float16), which ``device_precision`` gives.
- ``"onnxruntime"``: onnxruntime 1.32's CPU kernels bit for bit, float32 and float16 (float16 widened
  exactly, the result rounded once), as measured against 1.32 (its Y, Mean and InvStdDev outputs over
  thousands of rows; the source in the index, a plain scalar loop, is older). layer_norm_impl.cc
  (LayerNormalization, SimplifiedLayerNormalization) has a scalar loop for rows shorter than 8 (float32
  layer norm) or 16 (float16, and RMS norm), else an AVX2 loop; without AVX2/FMA (QEMU Nehalem) the
  scalar loop at every length, which :func:`host_vector_loop` measures once on the host's onnxruntime.
  Scalar layer norm: Welford in float32 (``delta = x - mean; mean += delta / k; m2 += delta * (x - mean)``),
  ``root = sqrt(m2 / n + epsilon)``,
  ``y = (x - mean) / root * scale + bias``, each op rounded. Scalar RMS norm: a sequential float32 sum of
  ``x * x``, ``y = x / root * scale``. AVX2 layer norm: the mean correctly rounded (a float64 sum), the sum
  of ``(x - mean)^2`` in 8 fma lanes added by halves (8 -> 4 -> 2 -> 1), then the tail (float32: 4 rounded
  squares added in turn when 4 or more are left, the rest fused; float16: all fused);
  ``y = fma((x - mean) * (1 / root), scale, bias)``. AVX2 RMS norm: that sum of ``x * x``, then
  ``x * (1 / root) * scale``. skip_layer_norm.cc (SkipLayerNormalization, SkipSimplifiedLayerNormalization,
  marked by :data:`SKIP_LAYER_NORM`) runs the scalar loop at every size.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import InvalidAttributeError
from ..core.graph import internal_model
from ..core.tensor_desc import view
from ..numerics.kernels.float32_fma import fma32
from ..numerics.kernels.mlas_sqnbit_m1 import lane_sums
from ..ort.reference import cpu_session
from ..realep.placement import ON_DML_AS
from .activation import ActivationDesc, apply_activation
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, bound, tensor
from .kernel_state import KernelState
from .nodes import DmlNode, Imported

# --- desc ------------------------------------------------------------------------------------

_DIMS = {FL.FL_6_3: (1, 8)}
_FIELDS = ("InputTensor", "ScaleTensor", "BiasTensor", "OutputTensor")
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
SKIP_LAYER_NORM = "skip_layer_norm.cc"  # Imported.onnxruntime of SkipLayerNormalization's MVN2: that kernel's scalar loop at every size
SCALAR = 2**62  # a vector_from no row reaches
# A float16 SkipLayerNormalization's MVN2 also binds its ADD's operands (node inputs 3, 4, 5): in the "onnxruntime"
# arithmetic it normalizes their float32 sum ((input + skip) [+ bias]), as skip_layer_norm.cc does, not the ADD's float16 one.
SKIP_SUM_FIELDS = ("SkipSumInput", "SkipSumSkip", "SkipSumBias")


@dataclasses.dataclass(frozen=True)
class DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC(OperatorDesc):
    """MEAN_VARIANCE_NORMALIZATION2: ``FusedActivation(Scale * (Input - Mean) / sqrt(Variance + Epsilon) + Bias)``
    over ``Axes``; ``UseMean`` and ``UseVariance`` are DirectML BOOLs (0 or 1)."""

    InputTensor: TensorDesc
    ScaleTensor: TensorDesc | None
    BiasTensor: TensorDesc | None
    OutputTensor: TensorDesc
    AxisCount: int
    Axes: tuple[int, ...]
    UseMean: int
    UseVariance: int
    Epsilon: float
    FusedActivation: Optional[ActivationDesc] = None

    OPERATOR_TYPE = OP.MEAN_VARIANCE_NORMALIZATION2
    INTRODUCED = FL.FL_6_3
    TENSOR_RULES = rules({f: (f in ("ScaleTensor", "BiasTensor"), _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})
    SAME_TYPE = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        sizes = self.InputTensor.Sizes
        if self.OutputTensor.Sizes != sizes:
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must equal InputTensor's {list(sizes)}", "OutputTensor")
        for field in ("ScaleTensor", "BiasTensor"):
            other = getattr(self, field)
            if other is not None and (len(other.Sizes) != len(sizes) or any(s not in (1, n) for s, n in zip(other.Sizes, sizes))):
                self.fail(f"sizes {list(other.Sizes)} must broadcast to InputTensor's {list(sizes)} (each 1 or equal)", field)
        if self.AxisCount != len(self.Axes) or not self.Axes:
            self.fail(f"AxisCount {self.AxisCount} must be the number of Axes {list(self.Axes)}, at least 1", "Axes")
        if len(set(self.Axes)) != len(self.Axes) or not all(0 <= axis < len(sizes) for axis in self.Axes):
            self.fail(f"axes {list(self.Axes)} must be distinct and in [0, {len(sizes) - 1}]", "Axes")
        if self.UseMean not in (0, 1) or self.UseVariance not in (0, 1):
            self.fail("UseMean and UseVariance are BOOLs (0 or 1)", "UseMean")


# --- import from ONNX ------------------------------------------------------------------------


def one_output(ctx: NodeContext) -> None:
    """QueryLayerNormalization: one output only (Mean and InvStdDev are not supported)."""
    if len([name for name in ctx.node.output if name]) > 1 or len(ctx.node.output) > 1 and not ctx.node.output[0]:
        raise Fallback(f"QueryLayerNormalization declines {len(ctx.node.output)} outputs (it takes Y alone)", "on the CPU in the real EP too")


def layer_normalization(ctx: NodeContext) -> DmlNode:
    """LayerNormalization (17, or onnxruntime's 1) and SimplifiedLayerNormalization (1)."""
    return _normalization(ctx, ctx.node.op_type == "SimplifiedLayerNormalization")


def graph_normalization(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlMeanVarianceNormalization: SkipLayerNormalization's MVN2 over the last
    axis (inputs: the sum, gamma, the post-normalization bias, [the sum's operands: SKIP_SUM_FIELDS])."""
    made = _normalization(ctx, bool(ctx.attr("simplified", 0)), SKIP_SUM_FIELDS)
    made.imported = Imported(SKIP_LAYER_NORM)
    return made


def _normalization(ctx: NodeContext, simplified: bool, extra: tuple[str, ...] = ()) -> DmlNode:
    dtype, scale_dtype = ctx.info(0).dtype, ctx.info(1).dtype
    for what in (dtype, scale_dtype):
        if what not in (F32, F16):
            raise Fallback(f"element type {what} is not supported by MEAN_VARIANCE_NORMALIZATION2 (FLOAT32, FLOAT16)",
                           ON_DML_AS.format("MEAN_VARIANCE_NORMALIZATION2"))
    if dtype == F32 and scale_dtype == F16:
        raise Fallback("a float32 input with float16 scale is a DirectML graph of CASTs (scale, bias up, the output down) around "
                       "MEAN_VARIANCE_NORMALIZATION2, not modelled", ON_DML_AS.format("CAST and MEAN_VARIANCE_NORMALIZATION2"))
    shape = ctx.shape(0)
    rank = len(shape)
    axis = int(ctx.attr("axis", -1))
    if not -rank <= axis < rank:
        raise InvalidAttributeError(f"axis {axis} is outside [-{rank}, {rank - 1}]", node=ctx.node)
    axis %= rank
    sizes = tuple(shape) + (1,) * (4 - rank)
    parameters = {}
    for index, field in ((1, "ScaleTensor"), (2, "BiasTensor")):
        if not ctx.input_name(index):
            continue
        own = ctx.shape(index)
        if len(own) > rank:
            raise InvalidAttributeError(f"input {index} has rank {len(own)}, above the input's {rank}", node=ctx.node)
        parameters[field] = tensor(scale_dtype, (1,) * (rank - len(own)) + tuple(own) + (1,) * (4 - rank))
    desc = DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC(
        InputTensor=tensor(scale_dtype, sizes), ScaleTensor=parameters.get("ScaleTensor"), BiasTensor=parameters.get("BiasTensor"),
        OutputTensor=tensor(scale_dtype, sizes), AxisCount=len(sizes) - axis, Axes=tuple(range(axis, len(sizes))),
        UseMean=int(not simplified), UseVariance=1, Epsilon=float(np.float32(ctx.attr("epsilon", 1e-5))))
    made = ctx.dml_node(desc, ("InputTensor", "ScaleTensor", "BiasTensor"), shape)
    operands = {field: 3 + index for index, field in enumerate(extra) if ctx.input_name(3 + index)}
    return bound(ctx.node, desc, {**made.input_index, **operands}, (tuple(shape),), ctx.constants, ctx.origin) if operands else made


# --- kernel ----------------------------------------------------------------------------------


def mean_variance_normalization2(desc: DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC, tensors: dict, options,
                                 state: KernelState, compiled: bool = False) -> np.ndarray:
    """Rows of the normalized elements, then the session's arithmetic (module docstring); ``compiled``:
    the vector loop's fma lanes summed by ``kernels.compiled.sgemm``, the same bits."""
    sizes = desc.InputTensor.Sizes
    x = view(tensors["InputTensor"], desc.InputTensor)
    out_dtype = F16 if desc.OutputTensor.DataType.name == "FLOAT16" else F32
    others = tuple(axis for axis in range(len(sizes)) if axis not in desc.Axes)
    order = others + tuple(desc.Axes)
    n = int(np.prod([sizes[axis] for axis in desc.Axes]))

    def rows(array):
        return np.ascontiguousarray(np.transpose(np.broadcast_to(array, sizes), order).astype(np.float32)).reshape(-1, n)

    scale = None if desc.ScaleTensor is None else rows(view(tensors["ScaleTensor"], desc.ScaleTensor))
    bias = None if desc.BiasTensor is None else rows(view(tensors["BiasTensor"], desc.BiasTensor))
    values = rows(x)
    if options.onnxruntime and state.imported.onnxruntime == SKIP_LAYER_NORM and _bound(tensors, SKIP_SUM_FIELDS[0]):
        values = rows(_float32_sum(tensors, sizes))
    if options.onnxruntime and desc.UseVariance:
        half = desc.InputTensor.DataType.name == "FLOAT16"
        scalar = state.imported.onnxruntime == SKIP_LAYER_NORM or not host_vector_loop()
        vector_from = SCALAR if scalar else 16 if half or not desc.UseMean else 8
        y = _onnxruntime(values, scale, bias, desc, vector_from, half, compiled)
    else:
        y = _directml(values, scale, bias, desc)
    if desc.FusedActivation is not None:
        y = apply_activation(desc.FusedActivation, np.asarray(y, np.float32))
    shaped = np.asarray(y).reshape([sizes[axis] for axis in order]).transpose(np.argsort(order))
    return np.ascontiguousarray(shaped.astype(out_dtype))


def _bound(tensors: dict, field: str) -> bool:
    return isinstance(tensors.get(field), np.ndarray)


def _float32_sum(tensors: dict, sizes) -> np.ndarray:
    """skip_layer_norm.cc's sum of a float16 node: input + skip [+ bias], each widened, float32 adds in that order."""
    total = tensors["SkipSumInput"].astype(np.float32) + tensors["SkipSumSkip"].astype(np.float32)
    if _bound(tensors, "SkipSumBias"):
        total = total + tensors["SkipSumBias"].astype(np.float32)
    return total.reshape(sizes)


def _directml(x: np.ndarray, scale, bias, desc) -> np.ndarray:
    """The page's formula in float64, rounded once (to float32 for an activation, else to the output)."""
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=1, keepdims=True) if desc.UseMean else x64
    if desc.UseVariance:
        centred = centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + float(np.float32(desc.Epsilon)))
    y = centred if scale is None else centred * scale
    return y if bias is None else y + bias


def compiled_mean_variance_normalization2(desc: DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC, tensors: dict, options,
                                          state: KernelState) -> np.ndarray:
    """:func:`mean_variance_normalization2` with the vector loop's lanes compiled."""
    return mean_variance_normalization2(desc, tensors, options, state, compiled=True)


def _onnxruntime(x: np.ndarray, scale, bias, desc, vector_from: int, half: bool, compiled: bool = False) -> np.ndarray:
    """onnxruntime 1.32's CPU layer norm and RMS norm in float32 (module docstring): its scalar loop for
    rows shorter than ``vector_from``, else its AVX2 loop (whose tail ``half``, float16 tensors, fuses)."""
    n, epsilon = x.shape[1], np.float32(desc.Epsilon)
    one = np.ones_like(x[:1])
    scale = one if scale is None else scale
    if not desc.UseMean:
        if n < vector_from:  # the scalar loop: a float32 sum of squares in turn, then x / root * scale
            root = np.sqrt(np.cumsum(x * x, axis=1, dtype=np.float32)[:, -1:] / np.float32(n) + epsilon, dtype=np.float32)
            y = x / root * scale
        else:  # the vector loop: 8 fma lanes, then x * (1 / root) * scale
            y = x * (np.float32(1) / np.sqrt(_sum_of_squares(x, half, compiled) / np.float32(n) + epsilon, dtype=np.float32))[:, None] * scale
        return y if bias is None else y + bias  # the DML graph's post-normalization bias (SkipSimplifiedLayerNormalization's input 3)
    mean, root = _onnxruntime_statistics(x, epsilon, n < vector_from, half, compiled)
    if n < vector_from:  # the scalar loop: (x - mean) / root * scale + bias, each op rounded
        y = (x - mean) / root * scale
        return y if bias is None else y + bias
    centred = (x - mean) * (np.float32(1) / root)
    return fma32(centred, np.broadcast_to(scale, x.shape), np.zeros_like(x) if bias is None else np.broadcast_to(bias, x.shape))


def _onnxruntime_statistics(x: np.ndarray, epsilon: np.float32, scalar: bool, half: bool,
                            compiled: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime 1.32's float32 mean and ``sqrt(variance + epsilon)`` per row (module docstring)."""
    n = x.shape[1]
    if scalar:  # Welford in float32: mean += delta / k; m2 += delta * (x - mean), each op rounded
        mean, m2 = np.zeros_like(x[:, 0]), np.zeros_like(x[:, 0])
        for k in range(n):
            delta = x[:, k] - mean
            mean = mean + delta / np.float32(k + 1)
            m2 = m2 + delta * (x[:, k] - mean)
    else:  # two passes: the mean correctly rounded, then the sum of (x - mean)^2
        mean = (x.astype(np.float64).sum(axis=1) / n).astype(np.float32)
        m2 = _sum_of_squares(x - mean[:, None], half, compiled)
    return mean[:, None], np.sqrt(m2 / np.float32(n) + epsilon, dtype=np.float32)[:, None]


def _sum_of_squares(x: np.ndarray, half: bool, compiled: bool = False) -> np.ndarray:
    """Each row's float32 sum of squares as onnxruntime 1.32's AVX2 loop adds it: 8 fma lanes, the
    horizontal sum (halves added: 8 -> 4 -> 2 -> 1), then the tail: for float32, 4 rounded squares
    added in turn (when 4 or more are left), the rest fused; for float16 all fused. ``compiled``: the
    lanes of each row by ``lane_sums``, else by the numpy fma."""
    n = x.shape[1]
    full = n // 8 * 8
    if compiled and full:
        lanes = np.concatenate([lane_sums(row[:full], row[:full, None], 8, compiled=True) for row in x])
    else:
        lanes = np.zeros_like(x[:, :8])
        for start in range(0, full, 8):
            lanes = fma32(x[:, start:start + 8], x[:, start:start + 8], lanes)
    while lanes.shape[1] > 1:
        lanes = lanes[:, :lanes.shape[1] // 2] + lanes[:, lanes.shape[1] // 2:]
    total = lanes[:, 0]
    for k in range(full, n):
        total = total + x[:, k] * x[:, k] if not half and k < full + 4 <= n else fma32(x[:, k], x[:, k], total)
    return total


@functools.lru_cache(maxsize=1)
def host_vector_loop() -> bool:
    """Whether the host's onnxruntime runs layer_norm_impl.cc's AVX2 loop for long rows (an AVX2 + FMA
    x86-64), else its scalar loop at every length (measured under QEMU Nehalem: Welford's mean and M2 and
    the scalar Y, bit for bit, rows of 8 to 768), measured once on its LayerNormalization: CPU flags
    would only guess onnxruntime's choice."""
    x = (np.random.default_rng(3).standard_normal((32, 20)) * 4 + 1).astype(np.float32)
    graph = helper.make_graph([helper.make_node("LayerNormalization", ["x", "s"], ["y"], epsilon=1e-5)], "layer_norm_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones(20, np.float32), "s")])
    y = cpu_session(internal_model(graph, 17), threads=1).run(None, {"x": x})[0]
    mean, root = _onnxruntime_statistics(x, np.float32(1e-5), False, False)
    return bool(np.array_equal(y, (x - mean) * (np.float32(1) / root)))


def _precision(desc) -> DevicePrecision:
    return DevicePrecision(rule="WebNN layerNormalization: absolute 1/1024 (float32), 1/512 (float16) (wpt webnn/resources/utils.js)",
                           atol32=1 / 1024, atol16=1 / 512)


OPERATORS = (Operator(desc=DML_MEAN_VARIANCE_NORMALIZATION2_OPERATOR_DESC, kernel=mean_variance_normalization2,
                      compiled_kernel=compiled_mean_variance_normalization2, exact_value=None,
                      device_precision=_precision(None)),)
"""LayerNormalization, SimplifiedLayerNormalization and SkipLayerNormalization's normalization on
DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2 (``dml_ep/operators/mean_variance_normalization.py``)."""
