"""DML_OPERATOR_DYNAMIC_QUANTIZE_LINEAR (DynamicQuantizeLinear 11): desc, import, kernel, exact value.

DirectML documents (DML_FEATURE_LEVEL_4_0)::

    OutputScale     = (max(Input) - min(Input)) / (Max - Min)    // Min, Max of the output type
    OutputZeroPoint = Min - min(Input) / OutputScale
    Output          = clamp(round(Input / OutputScale) + OutputZeroPoint, Min, Max)

Three outputs: OutputTensor, OutputScaleTensor and OutputZeroPointTensor (one element each), all of
the input's DimensionCount. The DML EP (DmlOperatorDynamicQuantizeLinear.cpp) pads every tensor to
4 dimensions, the scale and zero point {1,1,1,1}; an input of more than 4 dimensions would break
the same-DimensionCount rule, so dml_ep leaves it to the CPU saying the real EP fails creating the
operator (*inferred* from the code, not run).

Kernel.
- ``"onnxruntime"``: dynamicquantizelinear.cc, i.e. qmath.h ``GetQuantizationParameter`` then
  ``ParQuantizeLinearStd``: min and max (MLAS's min/max kernel; with NaN in the input its lanes are
  modelled as one thread runs them, min_max_elements.cpp), widened to include 0; ``scale =
  float32(max - min) / 255`` in float32, 1 when ``max == min``; ``zp = RoundHalfToEven(clamp(qmin -
  min / scale))`` in float32 (a NaN zero point clamps to qmax through ``std::min``); the elements
  through MLAS's QuantizeLinear kernel (see ``element_wise_quantize_linear``).
- ``"directml"``: the scale and zero point as onnxruntime computes them: they are scalars the next
  node reads, DirectML's page gives the same float formula, and it is silent on widening the range
  to include 0, on rounding and clamping the zero point and on a constant input. The widening is
  what DirectML does: ORT's tests ``DynamicQuantizeLinear_Min_Adjusted`` / ``_Max_Adjusted`` (all
  positive / all negative input) are not skipped on DML, while the plain test is ("26 and 25" at
  x / scale = -127.49999 in float32, dynamic_quantize_linear_test.cc L11-55), an element-rounding
  difference that ``x * float32(1 / scale)`` = -127.5 explains (see element_wise_quantize_linear). The elements as ELEMENT_WISE_QUANTIZE_LINEAR's "directml": the float32 quotient
  ``x / scale`` (an IEEE division), rounded half to even, ``+ zp``, clamped, NaN -> qmin; so 0.5 at
  scale float32(5 / 255) is 25.5 -> 26 -> code 179, ONNX's expected value (the exact quotient
  25.49999... would round to 178). The two arithmetics give the same codes.

Exact value (compare): ``x / OutputScale`` in exact fractions, the scale as computed: an ideal,
not a device's value.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import left_pad, view
from ..numerics.kernels import quantize
from ..realep.placement import ASSIGNED_TO_DML, ON_CPU
from .base import FLOAT32, FLOATS, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .element_wise_quantize_linear import quantize_values
from .importing import Fallback, NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_DYNAMIC_QUANTIZE_LINEAR_OPERATOR_DESC(OperatorDesc):
    """DYNAMIC_QUANTIZE_LINEAR: the input quantized with a scale and zero point made from its
    range, all three outputs; DML_FEATURE_LEVEL_4_0 and up."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc

    OPERATOR_TYPE = OP.DYNAMIC_QUANTIZE_LINEAR
    INTRODUCED = FL.FL_4_0
    OUTPUT_FIELDS = ("OutputTensor", "OutputScaleTensor", "OutputZeroPointTensor")  # the node's outputs, in order
    TENSOR_RULES = rules(
        {field: (False, {FL.FL_4_0: (1, 8)}) for field in ("InputTensor", "OutputTensor", "OutputScaleTensor", "OutputZeroPointTensor")},
        {"InputTensor": FLOATS, "OutputTensor": QUANTIZED, "OutputScaleTensor": FLOAT32, "OutputZeroPointTensor": QUANTIZED},
    )
    SAME_TYPE = (("OutputTensor", "OutputZeroPointTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        for field, each in self.tensors().items():
            if each.DimensionCount != self.InputTensor.DimensionCount:
                self.fail(f"DimensionCount {each.DimensionCount} must equal InputTensor's {self.InputTensor.DimensionCount}", field)
        if self.OutputTensor.Sizes != self.InputTensor.Sizes:
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must equal InputTensor's {list(self.InputTensor.Sizes)}", "OutputTensor")
        for field in ("OutputScaleTensor", "OutputZeroPointTensor"):
            if getattr(self, field).element_count != 1:
                self.fail(f"must hold exactly 1 element (sizes {list(getattr(self, field).Sizes)})", field)


# --- import from ONNX ------------------------------------------------------------------------


def dynamic_quantize_linear(ctx: NodeContext) -> DmlNode:
    x_type = ctx.info(0).dtype
    if x_type != np.dtype(np.float32):
        raise Fallback(f"input type {x_type} is not supported (the DML EP registers FLOAT32)", ON_CPU)
    y_type = ctx.values[ctx.node.output[0]].dtype
    if y_type not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise Fallback(f"output type {y_type} is not supported (INT8, UINT8)", ON_CPU)
    shape = ctx.shape(0)
    if len(shape) > 4:
        raise Fallback(f"a {len(shape)}-D input: the DML EP pads the scale and zero point to 4 dimensions, "
                       "which must equal the input's DimensionCount (inferred)", ASSIGNED_TO_DML)
    sizes, one = left_pad(shape, 4), (1, 1, 1, 1)
    desc = DML_DYNAMIC_QUANTIZE_LINEAR_OPERATOR_DESC(
        InputTensor=tensor(x_type, sizes, owned=ctx.input_name(0) in ctx.constants),
        OutputTensor=tensor(y_type, sizes),
        OutputScaleTensor=tensor(np.float32, one),
        OutputZeroPointTensor=tensor(y_type, one),
    )
    return ctx.dml_node(desc, ("InputTensor",), shape, more_output_shapes=((), ()))


# --- kernel ----------------------------------------------------------------------------------


def quantization_parameters(x: np.ndarray, dtype, extremes=None) -> tuple[np.float32, int]:
    """qmath.h ``GetQuantizationParameter``: the float32 scale and the integer zero point
    (``extremes``: :func:`min_max` of ``x``, where the caller has it)."""
    qmin, qmax = quantize.quant_range(dtype)
    low, high, _ = extremes or min_max(x)
    low, high = min(low, np.float32(0.0)), max(high, np.float32(0.0))  # std::min(min, 0.f), std::max: a NaN stays, as there
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = np.float32(1.0) if high == low else np.float32(np.float32(high - low) / np.float32(qmax - qmin))
        initial = np.float32(np.float32(qmin) - np.float32(low / scale))
    clamped = np.float32(qmax) if np.isnan(initial) else min(np.float32(qmax), initial)  # std::min(qmax, v) keeps qmax for NaN
    clamped = max(np.float32(qmin), clamped)
    return scale, int(np.rint(clamped))


def min_max(x: np.ndarray) -> tuple[np.float32, np.float32, bool]:
    """MLAS's min/max of the elements, as one thread runs it (``MlasFindMinMaxElement``), and
    whether ``x`` is free of NaN: plain min and max for NaN-free input; otherwise its lanes, where
    a NaN enters an accumulator and the next value replaces it (``maxps(acc, x)`` returns ``x``
    when either is NaN)."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if flat.size == 0:
        return np.float32(np.finfo(np.float32).max), np.float32(-np.finfo(np.float32).max), True
    low, high = flat.min(), flat.max()
    if not (np.isnan(low) or np.isnan(high)):  # NaN-free: a NaN would have made both NaN
        return low, high, True
    return (*_lanes_min_max(flat), False)


def _lanes_min_max(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """min_max_elements.cpp ``MlasReduceMinimumMaximumF32KernelAvx``, lane by lane: four 8-lane
    accumulators over 32-element chunks, merged, then 8-element chunks, folded 8 -> 4 -> 1, then
    the scalar tail with ``std::min`` / ``std::max``."""

    def maxps(a, b):
        return np.where(a > b, a, b)

    def minps(a, b):
        return np.where(a < b, a, b)

    big = np.float32(np.finfo(np.float32).max)
    low, high, n, i = big, -big, x.size, 0
    if n >= 8:
        mx, mn = np.full(32, -big, np.float32), np.full(32, big, np.float32)
        for row in x[: n // 32 * 32].reshape(-1, 32):
            mx, mn = maxps(mx, row), minps(mn, row)
        i = n // 32 * 32
        mx4, mn4 = mx.reshape(4, 8), mn.reshape(4, 8)
        mx8 = maxps(maxps(mx4[0], mx4[1]), maxps(mx4[2], mx4[3])) if n >= 32 else mx4[0]
        mn8 = minps(minps(mn4[0], mn4[1]), minps(mn4[2], mn4[3])) if n >= 32 else mn4[0]
        while n - i >= 8:
            mx8, mn8 = maxps(mx8, x[i:i + 8]), minps(mn8, x[i:i + 8])
            i += 8

        def reduce(v, op):
            v = op(v[:4], v[4:])
            v = op(v, v[[2, 3, 2, 3]])
            return np.float32(op(v, v[[1, 1, 1, 1]])[0])

        high, low = reduce(mx8, maxps), reduce(mn8, minps)
    for value in x[i:]:
        high = value if high < value else high  # std::max(high, value)
        low = value if value < low else low  # std::min(low, value)
    return np.float32(low), np.float32(high)


def dynamic_quantize_linear_kernel(desc, tensors: dict, arithmetic, state: KernelState,
                                   compiled: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float32, copy=False)
    dtype = desc.OutputTensor.DataType.numpy()
    extremes = min_max(x)
    scale, zero_point = quantization_parameters(x, dtype, extremes)
    # plain min and max are NaN only if x holds one (min_max's lanes may then drop it)
    y = quantize_values(x, scale, np.asarray(zero_point), dtype, arithmetic, compiled, nan_free=extremes[2])
    return y, np.array(scale, np.float32).reshape(1, 1, 1, 1), np.array(zero_point, dtype).reshape(1, 1, 1, 1)  # np.full's cost is Python's


def dynamic_quantize_linear_compiled(desc, tensors: dict, arithmetic, state: KernelState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`dynamic_quantize_linear_kernel` with its quantize step compiled (``kernels.compiled.quantize``)."""
    return dynamic_quantize_linear_kernel(desc, tensors, arithmetic, state, compiled=True)


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``x / OutputScale`` (the zero point, an integer, left out), the scale as the kernel makes it."""
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float32, copy=False)
    scale, _ = quantization_parameters(x, desc.OutputTensor.DataType.numpy())
    return [(x.astype(np.float64), 1.0)], np.float64(scale)


OPERATORS = (Operator(desc=DML_DYNAMIC_QUANTIZE_LINEAR_OPERATOR_DESC, kernel=dynamic_quantize_linear_kernel,
                      compiled_kernel=dynamic_quantize_linear_compiled, exact_value=exact_value),)
