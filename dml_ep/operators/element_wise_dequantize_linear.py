"""DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR (DequantizeLinear 10, 13, 19, com.microsoft 1):
desc, import, kernel.

DirectML documents ``Output = (Input - ZeroPoint) * Scale``: the four tensors of identical
DimensionCount and Sizes, the zero point optional from DML_FEATURE_LEVEL_6_2.

Import, as DmlOperatorElementwiseQLinear (the class QuantizeLinear uses, see
``element_wise_quantize_linear``): right-aligned to at least 4 dimensions; a 1-D scale or zero
point of length ``shape[axis]`` placed on ``axis``, length 1 broadcast; constants checked when
planned, parameters bound at run time when they arrive; a missing zero point is a null
ZeroPointTensor (FL 6_2). Inputs int8, uint8 and int32 (a QDQ model's bias), output float32. The
real EP also makes float16 outputs (opset 19, FL 6_0), which dml_ep does not model. DequantizeLinear
21 and later are not registered here: the real EP maps them to DML_OPERATOR_DEQUANTIZE (and no
int32 input), which dml_ep does not model, so they run on the CPU (the registration's version
mismatch says so).

Kernel.
- ``"onnxruntime"``: quantize_linear.cc ``DequantizeLinearApply::op``,
  ``float32(int32(x) - zp) * scale``: the subtraction in int32, one conversion to float32 (rounded
  half to even: it matters for int32 inputs beyond 2^24), one float32 multiply.
- ``"directml"``: the page is silent on integer or float subtraction; dml_ep takes the exact
  integer ``x - zp`` and one correctly rounded product. Both agree for 8-bit inputs (``x - zp`` is
  exact in float32); they differ only for int32 inputs with ``|x - zp| > 2^24``, where onnxruntime
  rounds twice.

No exact value: DEQUANTIZE_LINEAR does not quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.tensor_desc import broadcast_shapes, view
from ..numerics.kernels.float32_fma import dyadic, float32_of_dyadic
from ..realep.placement import ON_CPU, ON_DML
from .base import Operator
from .element_wise_quantize_linear import ElementWiseQuantizationDesc, element_wise_node, parameters
from .importing import Fallback, NodeContext
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

INTEGERS = frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC(ElementWiseQuantizationDesc):
    """ELEMENT_WISE_DEQUANTIZE_LINEAR: ``(Input - ZeroPoint) * Scale``, DML_FEATURE_LEVEL_1_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_DEQUANTIZE_LINEAR
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = ElementWiseQuantizationDesc.tensor_rules({
        "InputTensor": {FL.FL_1_0: frozenset({DT.UINT8}), FL.FL_2_1: INTEGERS},
        "ZeroPointTensor": {FL.FL_1_0: frozenset({DT.UINT8}), FL.FL_2_1: INTEGERS},
        "ScaleTensor": {FL.FL_1_0: frozenset({DT.FLOAT32}), FL.FL_6_0: frozenset({DT.FLOAT16})},
        "OutputTensor": {FL.FL_1_0: frozenset({DT.FLOAT32}), FL.FL_6_0: frozenset({DT.FLOAT16})},
    })
    SAME_TYPE = (("InputTensor", "ZeroPointTensor"), ("OutputTensor", "ScaleTensor"))


# --- import from ONNX ------------------------------------------------------------------------

X, SCALE = 0, 1


def dequantize_linear(ctx: NodeContext) -> DmlNode:
    x_type = ctx.info(X).dtype
    if x_type not in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)):
        raise Fallback(f"input type {x_type} is not supported (INT8, UINT8, INT32)", ON_CPU)
    y_type = ctx.info(SCALE).dtype
    if y_type == np.dtype(np.float16):
        raise Fallback("float16 output is not modelled by dml_ep (ELEMENT_WISE_DEQUANTIZE_LINEAR takes it)", ON_DML)
    return element_wise_node(ctx, DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC, x_type, np.float32)


# --- kernel ----------------------------------------------------------------------------------

_EXACT_IN_FLOAT64 = 2**29  # |x - zp| below it: (x - zp) * scale is exact in float64 (29 + 24 bits)


def dequantize_linear_kernel(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    x = view(tensors["InputTensor"], desc.InputTensor)
    scale, zero_point = parameters(desc, tensors, state)
    scale = scale.astype(np.float32, copy=False)
    if x.dtype.itemsize == 1:  # x - zp exact in float32, so one float32 product: onnxruntime's value and the correctly rounded one
        difference = np.subtract(x, zero_point, dtype=np.float32)
        return np.multiply(difference, scale, out=difference if difference.shape == broadcast_shapes(difference.shape, scale.shape) else None)
    if arithmetic.onnxruntime:  # int32 subtraction (wrapping), float32 conversion, float32 multiply
        difference = np.subtract(x, zero_point, dtype=np.int64).astype(np.int32).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.multiply(difference, scale, dtype=np.float32)
    difference = np.subtract(x, zero_point, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.multiply(difference, scale, dtype=np.float64).astype(np.float32)  # one rounding where exact
    wide = np.flatnonzero(np.abs(difference) >= _EXACT_IN_FLOAT64)  # int32 inputs only
    if wide.size:
        where = np.unravel_index(wide, out.shape)
        pairs = zip(np.broadcast_to(difference, out.shape)[where].tolist(), np.broadcast_to(scale, out.shape)[where].tolist())
        out[where] = [round_float32(d, s) for d, s in pairs]
    return out


def round_float32(integer: int, scale: float) -> np.float32:
    """``integer * scale`` rounded once to float32 (halves to even), from exact Python integers."""
    numerator, exponent = dyadic(scale)
    if integer == 0:
        return np.float32(0.0 if scale >= 0 else -0.0)
    return float32_of_dyadic(integer * numerator, exponent)


def dequantizes_8_bit(desc: DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC) -> bool:
    """8-bit codes dequantize alike in every arithmetic: ``x - zp`` is exact in float32, then one
    correctly rounded product (int32 codes are not exact in float32)."""
    return desc.InputTensor.DataType.element_size == 1


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC, kernel=dequantize_linear_kernel, exact_value=None,
                      exact_for_any_input=dequantizes_8_bit),)
