"""DML_OPERATOR_ELEMENT_WISE_CONSTANT_POW and _POW on float tensors (ONNX Pow 7, 12, 13, 15): descs,
import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwisePow``: an exponent that is a constant
initializer of one element (``TryGetConstantCpuInputTensor``) becomes CONSTANT_POW's ``Exponent``
(read as a double, stored as a float; any numeric type), the input right-aligned to at least 4-D;
any other exponent is POW's ExponentTensor, both read with the output's sizes (ONNX broadcasting as
a stride of 0). T5's decomposed RMS norm is Pow(x, 2) of a constant 2: CONSTANT_POW. dml_ep models
float inputs, an exponent tensor of a float or 8- to 32-bit integer type (another type than the
input's from DML_FEATURE_LEVEL_3_0, the page's remark); the DML EP's int32 Pow falls back.

Support per feature level (the DirectML pages): FLOAT32 and FLOAT16 from DML_FEATURE_LEVEL_1_0,
4 dimensions, 1 to 8 from 3_0; POW adds the 8- to 32-bit integers at 3_0. "Negative bases are supported for integral exponents, otherwise this
operator returns NaN."

Kernel, "directml": ``pow(x, e)`` in float64, rounded once to the tensor's type, NaN for any negative
base (-inf included, where C's pow gives +inf) with a non-integral exponent. A device may differ:
D3D builds pow from its 2^-21 ``exp``/``log``; WebNN's conformance tolerance for pow is 32 ULP
(float16 2).

Kernel, "onnxruntime": its CPU Pow (``core/providers/cpu/math/element_wise_ops.cc``). An exponent of
one element equal to 2 is ``Eigen::square`` (x * x, one rounding: the correctly rounded square), 3
``Eigen::cube`` ((x * x) * x, two roundings); any other exponent is ``Eigen::pow``, within a ULP of
the correctly rounded power but not always it (about 6 in 10,000 float32 values differ): dml_ep gives
the correctly rounded power there, a residual difference ``test_element_wise_pow.py`` pins. float16:
onnxruntime has no float16 Pow, so InsertCastTransformer runs it in float32 between two Casts (NaNs as
``element_wise_unary_math.cast_to_float16`` writes them).

No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .element_wise_unary_math import UnaryDesc, cast_to_float16, unary
from .importing import Fallback, NodeContext, broadcast, operand, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
_POW_FIELDS = ("InputTensor", "ExponentTensor", "OutputTensor")
_POW_TYPES = {FL.FL_1_0: FLOATS, FL.FL_3_0: frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8})}


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_CONSTANT_POW_OPERATOR_DESC(UnaryDesc):
    """ELEMENT_WISE_CONSTANT_POW: ``pow(Input * Scale + Bias, Exponent)``; ``ScaleBias`` null in the DML EP."""

    ScaleBias: Optional[tuple[float, float]]
    Exponent: float

    OPERATOR_TYPE = OP.ELEMENT_WISE_CONSTANT_POW


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_POW_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_POW: ``pow(Input * Scale + Bias, Exponent)`` element by element."""

    InputTensor: TensorDesc
    ExponentTensor: TensorDesc
    OutputTensor: TensorDesc
    ScaleBias: Optional[tuple[float, float]] = None

    OPERATOR_TYPE = OP.ELEMENT_WISE_POW
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _POW_FIELDS}, {f: _POW_TYPES for f in _POW_FIELDS})
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        if feature_level < FL.FL_3_0 and self.ExponentTensor.DataType != self.InputTensor.DataType:
            self.fail(f"DataType {self.ExponentTensor.DataType.name} must equal InputTensor's before {FL.FL_3_0}", "ExponentTensor")
        self.check_output_sizes("InputTensor", "ExponentTensor")


# --- import from ONNX ------------------------------------------------------------------------

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))
_EXPONENT_TYPES = frozenset({*_FLOAT_TYPES, *(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32))})


def pow_(ctx: NodeContext) -> DmlNode:
    """ONNX Pow on float32 or float16: CONSTANT_POW for a one-element constant exponent, else POW."""
    dtype = ctx.info(0).dtype
    exponent = ctx.parameter(1)
    real = "ELEMENT_WISE_CONSTANT_POW" if exponent is not None and exponent.size == 1 else "ELEMENT_WISE_POW"
    if dtype not in _FLOAT_TYPES:
        raise Fallback(f"element type {dtype} is not modelled by dml_ep's {real} (FLOAT32, FLOAT16)", ON_DML_AS.format(real))
    if exponent is not None and exponent.size == 1:
        value = float(np.float32(exponent.reshape(()).astype(np.float64)))  # ReadScalarTensorCastToFloat64, then static_cast<float>
        return unary(ctx, DML_ELEMENT_WISE_CONSTANT_POW_OPERATOR_DESC, ScaleBias=None, Exponent=value)
    exponent_type = ctx.info(1).dtype
    if exponent_type not in _EXPONENT_TYPES:
        raise Fallback(f"an exponent tensor of type {exponent_type} (dml_ep models float16/32 and 8- to 32-bit integers)", ON_DML_AS.format(real))
    a_shape, b_shape = ctx.info(0).shape, ctx.info(1).shape
    out_shape, sizes = broadcast(ctx, a_shape, b_shape)
    desc_pow = DML_ELEMENT_WISE_POW_OPERATOR_DESC(InputTensor=operand(dtype, a_shape, sizes, ctx.input_name(0) in ctx.constants),
                                                  ExponentTensor=operand(exponent_type, b_shape, sizes, ctx.input_name(1) in ctx.constants),
                                                  OutputTensor=tensor(dtype, sizes))
    return ctx.dml_node(desc_pow, ("InputTensor", "ExponentTensor"), out_shape)


# --- kernel ----------------------------------------------------------------------------------


def onnxruntime_pow(x: np.ndarray, exponent: np.ndarray, one_exponent: bool) -> np.ndarray:
    """onnxruntime's float32 Pow: a single exponent 2 squares, 3 cubes in two roundings; else the
    correctly rounded power (Eigen's pow differs from it in a few values in 10,000)."""
    if one_exponent and exponent.flat[0] == 2:
        return np.multiply(x, x, dtype=np.float32)
    if one_exponent and exponent.flat[0] == 3:
        return np.multiply(np.multiply(x, x, dtype=np.float32), x, dtype=np.float32)
    return np.power(x.astype(np.float64), exponent.astype(np.float64)).astype(np.float32)


def element_wise_pow(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE, silently (its callers run kernels under one np.errstate)."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    x = source.astype(np.float32)
    if desc.ScaleBias is not None:
        x = x * np.float32(desc.ScaleBias[0]) + np.float32(desc.ScaleBias[1])
    if isinstance(desc, DML_ELEMENT_WISE_CONSTANT_POW_OPERATOR_DESC):
        exponent, one_exponent = np.full(x.shape, np.float32(desc.Exponent)), True
    else:
        exponent = view(tensors["ExponentTensor"], desc.ExponentTensor).astype(np.float64)
        one_exponent = all(stride == 0 or size == 1 for stride, size in zip(desc.ExponentTensor.element_strides, desc.ExponentTensor.Sizes))
    if options.onnxruntime:
        y = onnxruntime_pow(x, exponent, one_exponent)
        return y if source.dtype == np.float32 else cast_to_float16(y)
    else:
        y = directml_pow(x.astype(np.float64), exponent.astype(np.float64))
    return y.astype(source.dtype, copy=False)


def directml_pow(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """The pages' pow: C's ``pow``, but NaN for a negative base (-inf too) and a non-integral exponent."""
    return np.where((x < 0) & (exponent != np.floor(exponent)), np.nan, np.power(x, exponent))


POW = DevicePrecision("D3D11.3 §22.10.6, §22.10.8: pow built from exp and log (2^-21 each); WebNN's conformance tolerance for pow: "
                      "32 ULP (float16 2)", ulp32=32, ulp16=2)

OPERATORS = (
    Operator(desc=DML_ELEMENT_WISE_CONSTANT_POW_OPERATOR_DESC, kernel=element_wise_pow, exact_value=None, device_precision=POW),
    Operator(desc=DML_ELEMENT_WISE_POW_OPERATOR_DESC, kernel=element_wise_pow, exact_value=None, device_precision=POW),
)
"""ONNX Pow on DML_OPERATOR_ELEMENT_WISE_CONSTANT_POW or _POW (``dml_ep/operators/element_wise_pow.py``):
bit-exact with onnxruntime's CPU Pow for exponents 2 and 3, within a ULP for others."""
