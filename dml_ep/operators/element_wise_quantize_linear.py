"""DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR (QuantizeLinear 10, 13, 19, com.microsoft 1): desc,
import, kernel, exact value.

DirectML documents ``Output = clamp(round(Input / Scale) + ZeroPoint, Min, Max)``: Input, Scale,
ZeroPoint and Output of identical DimensionCount and Sizes (a per-tensor or per-axis scale is a
full-size desc with zero strides); the zero point optional from DML_FEATURE_LEVEL_6_2.

Import, as DmlOperatorElementwiseQLinear (DmlOperatorElementWise.cpp L527-614): every tensor is
right-aligned to at least 4 dimensions (at most 8) with the output's sizes; a 1-D scale or zero
point of length ``shape[axis]`` (other than the output's shape) is placed on ``axis``, a length-1
one broadcast; scalars broadcast. The scale and zero point are constants (checked when planned)
or bound at run time (their values checked by the kernel as they arrive). A missing zero point is
a null ZeroPointTensor, which needs FL 6_2: below it the real EP fails creating the operator
(the ORT tests ``QuantizeLinear_Without_Zero_Point_Opset10/13`` skip DML: "The parameter is
incorrect"). Float16 input (QuantizeLinear-19, FL 6_0) has a float16 scale. The real EP also takes
int32 input (FL 2_1), which dml_ep does not model.

Kernel (both arithmetics compute the same codes).
- ``"onnxruntime"``: MLAS's QuantizeLinear kernel (mlas/lib/quantize_avx512f.cpp, reached from
  quantize_linear.cc ``ParQuantizeLinearStd`` per (scale, zero point) run; float16 input and scale
  widened to float32 first, which onnxruntime 1.32 matches bit for bit): ``v = x / scale`` in
  float32 (a true division), NaN -> ``qmin - zp`` (``max_ps`` returns its second operand), clamped
  to ``[qmin - zp, qmax - zp]``, rounded half to even (``cvtps2dq``), plus ``zp``; the zero point
  defaults to 0 (int8 and uint8).
- ``"directml"``: the documented formula as float32 arithmetic: the quotient ``x / scale`` an IEEE
  float32 division (round to nearest even), then round half to even, ``+ zp``, clamp; the same
  steps, so the same codes. NaN -> qmin (as onnxruntime; DirectML's page is silent), the zero point
  defaults to 0 (silent too; ONNX's default). A Direct3D device may divide as ``x * rcp(scale)``
  (D3D11.3 functional spec 3.1.3.2), within a code of this value
  at near-ties, and the known DirectML results fit that form: the ORT tests
  ``QuantizeLinearOpTest.Int8*`` skip DML citing -127 vs -128 at x = +-5, scale 0.039215686
  (``x / scale`` = 127.49999 in float32, ``x * float32(1 / scale)`` = 127.5; quantize_linear_test.cc
  L477-481, L905-909, L942-946), and DynamicQuantizeLinear's "26 and 25" the same way. dml_ep keeps
  the division, which ONNX's expected outputs are (tests/operators/test_element_wise_quantize_ops.py
  pins both forms). Float16 input and scale are widened to float32; run on its own (not fused) such
  a node gets ALLOW_HALF_PRECISION_COMPUTATION in the real EP (DmlOperator.cpp), so DirectML may
  divide in float16 there, which dml_ep does not model.

Exact value (compare): ``x / scale`` in exact fractions, an ideal rather than a device's value: compare
uses it to tell exact ties from float32 rounding.
"""

from __future__ import annotations

import dataclasses
import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.enums import DML_TENSOR_FLAGS
from ..core.errors import QuantizationParameterError
from ..core.tensor_desc import broadcast_strides, view
from ..numerics.kernels import compiled as native
from ..numerics.kernels import quantize
from ..numerics.kernels.parameters import checked_scale
from ..realep.placement import ON_CPU, ON_DML
from .base import INT32, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, broadcast, check_scale, check_zero_point, owned, parameter_shape, parameter_tensor, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

ELEMENT_WISE_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
FIELDS = ("InputTensor", "ScaleTensor", "ZeroPointTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class ElementWiseQuantizationDesc(OperatorDesc):
    """What QUANTIZE_LINEAR and DEQUANTIZE_LINEAR share: four tensors (DirectML's fields, in its
    order) of identical DimensionCount and Sizes, the zero point optional from FL 6_2, and types
    that widen with the feature level."""

    InputTensor: TensorDesc
    ScaleTensor: TensorDesc
    ZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc

    @staticmethod
    def tensor_rules(types: dict) -> tuple:
        """The four fields' rules: 4-D at FL 1_0, 1 to 8 dimensions from FL 3_0; the zero point
        optional (null from FL 6_2); ``types``: field -> {feature level: types added there}."""
        return rules({field: (field == "ZeroPointTensor", ELEMENT_WISE_DIMS) for field in FIELDS}, types)

    def validate_shapes(self, feature_level: FL) -> None:
        for field, tensor_desc in self.tensors().items():
            if tensor_desc.Sizes != self.OutputTensor.Sizes:
                self.fail(f"sizes {list(tensor_desc.Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", field)
        if self.ZeroPointTensor is None and feature_level < FL.FL_6_2:
            self.fail(f"a null ZeroPointTensor requires {FL.FL_6_2} (target is {feature_level})", "ZeroPointTensor")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_QUANTIZE_LINEAR_OPERATOR_DESC(ElementWiseQuantizationDesc):
    """ELEMENT_WISE_QUANTIZE_LINEAR: ``clamp(round(Input / Scale) + ZeroPoint)``, DML_FEATURE_LEVEL_1_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_QUANTIZE_LINEAR
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = ElementWiseQuantizationDesc.tensor_rules({
        "InputTensor": {FL.FL_1_0: frozenset({DT.FLOAT32}), FL.FL_2_1: INT32, FL.FL_6_0: frozenset({DT.FLOAT16})},
        "ScaleTensor": {FL.FL_1_0: frozenset({DT.FLOAT32}), FL.FL_6_0: frozenset({DT.FLOAT16})},
        "ZeroPointTensor": {FL.FL_1_0: frozenset({DT.UINT8}), FL.FL_2_1: frozenset({DT.INT8})},
        "OutputTensor": {FL.FL_1_0: frozenset({DT.UINT8}), FL.FL_2_1: frozenset({DT.INT8})},
    })
    SAME_TYPE = (("OutputTensor", "ZeroPointTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        super().validate_shapes(feature_level)
        want = DT.FLOAT32 if self.InputTensor.DataType == DT.INT32 else self.InputTensor.DataType
        if self.ScaleTensor.DataType != want:
            self.fail(f"DataType {self.ScaleTensor.DataType.name} must be {want.name} for a {self.InputTensor.DataType.name} input", "ScaleTensor")


# --- import from ONNX ------------------------------------------------------------------------

X, SCALE, ZERO_POINT = range(3)


def placed_parameters(ctx: NodeContext, x_shape, sizes, zero_point_type, scale_type=np.float32) -> tuple[TensorDesc, TensorDesc | None]:
    """The scale's and zero point's descs as DmlOperatorElementwiseQLinear places them, each with
    the output's ``sizes``: per tensor, or a 1-D one of length ``shape[axis]`` on ``axis``. A
    constant is checked now (and an all-equal one read as a broadcast scalar, the EP's
    TryConvertTensorToBroadcastScalar); one bound at run time by its type and shape. The scale is
    ``scale_type``: QuantizeLinear's is its input's."""
    rank = len(x_shape)
    axis = ctx.attr("axis", 1)  # read only for a per-axis parameter, as onnxruntime and the DML EP do
    per_axis = any(np.prod(parameter_shape(ctx, i), dtype=np.int64) > 1 for i in (SCALE, ZERO_POINT) if ctx.input_name(i))
    if per_axis and not -rank <= axis < rank:
        raise QuantizationParameterError(f"axis {axis} is out of range for a {rank}-D input", node=ctx.node)
    axis = axis % rank if per_axis else 0
    length = x_shape[axis] if per_axis else 1

    def place(index, value):
        shape = value.shape if value is not None else ctx.info(index).shape
        if np.prod(shape, dtype=np.int64) > 1:
            if len(shape) != 1:  # onnxruntime takes a scalar or a 1-D [shape[axis]]
                raise QuantizationParameterError(f"a per-axis parameter must be 1-D of length {length}, not {list(shape)}",
                                                 node=ctx.node, tensor=ctx.input_name(index))
            shape = tuple(length if d == axis else 1 for d in range(rank))
        placed = (1,) * (len(sizes) - len(shape)) + tuple(shape)
        strides = broadcast_strides(placed, sizes)
        dtype = value.dtype if value is not None else ctx.info(index).dtype
        if value is not None and value.size > 1 and np.all(value.reshape(-1) == value.reshape(-1)[0]):
            return owned(parameter_tensor(value, sizes))  # all strides 0
        return tensor(dtype, sizes, strides, owned=value is not None)

    allowed = (1, length)
    scale = check_scale(ctx, SCALE, ctx.parameter(SCALE), allowed, scale_type)
    zero_point = check_zero_point(ctx, ZERO_POINT, ctx.parameter(ZERO_POINT), zero_point_type, allowed) if ctx.input_name(ZERO_POINT) else None
    scale_desc = place(SCALE, None if scale is None else np.asarray(scale))
    zero_point_desc = place(ZERO_POINT, None if zero_point is None else np.asarray(zero_point)) if ctx.input_name(ZERO_POINT) else None
    return scale_desc, zero_point_desc


def quantize_linear(ctx: NodeContext) -> DmlNode:
    x_type = ctx.info(X).dtype
    if x_type == np.dtype(np.int32):
        raise Fallback(f"{x_type} input is not modelled by dml_ep (ELEMENT_WISE_QUANTIZE_LINEAR takes it)", ON_DML)
    if x_type not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"input type {x_type} is not supported (FLOAT32, FLOAT16, INT32)", ON_CPU)
    y_type = ctx.values[ctx.node.output[0]].dtype
    if y_type not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise Fallback(f"output type {y_type} is not supported (INT8, UINT8)", ON_CPU)
    return element_wise_node(ctx, DML_ELEMENT_WISE_QUANTIZE_LINEAR_OPERATOR_DESC, y_type, y_type, x_type)


def element_wise_node(ctx: NodeContext, desc_class, zero_point_type, output_type, scale_type=np.float32) -> DmlNode:
    """The node as ``desc_class`` (QUANTIZE_LINEAR or DEQUANTIZE_LINEAR): x, scale (``scale_type``)
    and zero point with the output's sizes, bound to the node's inputs 0, 1, 2."""
    x_type, x_shape = ctx.info(X).dtype, ctx.info(X).shape
    out_shape, sizes = broadcast(ctx, x_shape, x_shape)
    scale, zero_point = placed_parameters(ctx, x_shape, sizes, zero_point_type, scale_type)
    desc = desc_class(
        InputTensor=tensor(x_type, sizes, owned=ctx.input_name(X) in ctx.constants),
        ScaleTensor=scale,
        ZeroPointTensor=zero_point,
        OutputTensor=tensor(output_type, sizes),
    )
    return ctx.dml_node(desc, FIELDS[:3], out_shape)


# --- kernel ----------------------------------------------------------------------------------


def parameters(desc, tensors: dict, state: KernelState) -> tuple[np.ndarray, np.ndarray]:
    """The scale (its values checked: one bound at run time arrives here unchecked) and the zero
    point (0 when null), read with the output's sizes; read once when both are constants
    (OWNED_BY_DML), kept in the kernel's ``state``."""
    cached = state.derived.get("parameters")
    if cached is not None:
        return cached
    constant = all(t is None or t.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML for t in (desc.ScaleTensor, desc.ZeroPointTensor))
    checked_scale(np.asarray(tensors["ScaleTensor"]))
    scale = distinct(view(tensors["ScaleTensor"], desc.ScaleTensor))
    zero_point = 0 if desc.ZeroPointTensor is None else distinct(view(tensors["ZeroPointTensor"], desc.ZeroPointTensor))
    if constant:
        state.derived["parameters"] = scale, np.asarray(zero_point)
    return scale, np.asarray(zero_point)


def distinct(x: np.ndarray) -> np.ndarray:
    """A broadcast view cut to its distinct elements (size 1 along every zero stride): it
    broadcasts the same, without a pass over the output's size per use."""
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.strides)]


def quantize_linear_kernel(desc, tensors: dict, arithmetic, state: KernelState, compiled: bool = False) -> np.ndarray:
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float32, copy=False)
    scale, zero_point = parameters(desc, tensors, state)
    dtype = desc.OutputTensor.DataType.numpy()
    return quantize_values(x, scale, zero_point, dtype, arithmetic, compiled)


def quantize_linear_compiled(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """:func:`quantize_linear_kernel` in one compiled pass (``kernels.compiled.quantize``) for a
    per-tensor scale and zero point."""
    return quantize_linear_kernel(desc, tensors, arithmetic, state, compiled=True)


def quantize_values(x: np.ndarray, scale, zero_point, dtype, arithmetic, compiled: bool = False, nan_free: bool = False) -> np.ndarray:
    """``x`` quantized: the float32 quotient and MLAS's steps (:func:`float32_quantize`), the same
    codes in both arithmetics; where ``compiled`` and the scale and zero point are per tensor, their
    compiled form. ``arithmetic`` is kept for the kernels' common signature."""
    if compiled and native.quantize is not None and np.size(scale) == 1 and np.size(zero_point) == 1:
        return _quantize_compiled(x, np.float32(np.reshape(scale, -1)[0]), int(np.reshape(zero_point, -1)[0]), dtype)
    return float32_quantize(x, scale, zero_point, dtype, nan_free)


def _quantize_compiled(x: np.ndarray, scale: np.float32, zero_point: int, dtype) -> np.ndarray:
    """One pass of ``kernels.compiled.quantize.mlas``."""
    lo, hi = quantize.quant_range(dtype)
    codes_array = np.empty_like(x, np.uint8)  # in ``x``'s layout: a convolution's channels-last output is read as it lies
    flat, out = np.ravel(x.astype(np.float32, copy=False), order="K"), codes_array.ravel(order="K")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # the scale is checked positive and finite
        native.quantize.mlas(flat, scale, np.float32(lo - zero_point), np.float32(hi - zero_point), zero_point & 0xFF, lo & 0xFF, out)
    return codes_array.view(dtype)


def float32_quantize(x: np.ndarray, scale, zero_point, dtype, nan_free: bool = False) -> np.ndarray:
    """float32 ``x / scale``, NaN -> ``qmin - zp``, clamp, round half to even (``cvtps2dq``), ``+ zp``:
    MLAS's QuantizeLinear kernel and DirectML's formula in float32. A NaN goes through the clamp and
    the rounding, and is then written as qmin: one pass over the quotients finds whether there is
    any, unless the caller knows (``nan_free``)."""
    return _codes(_quotients(x, scale), zero_point, dtype, nan_free)


def _quotients(x: np.ndarray, scale) -> np.ndarray:
    """The float32 quotients ``x / scale``, correctly rounded (a new array)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.divide(x, np.asarray(scale, dtype=np.float32), dtype=np.float32)


def _codes(v: np.ndarray, zero_point, dtype, nan_free: bool) -> np.ndarray:
    """MLAS's steps after the division, on quotients ``v`` (overwritten)."""
    zero_point = np.asarray(zero_point)
    if zero_point.size > 1 and zero_point.shape != v.shape:
        v = np.broadcast_to(v, np.broadcast_shapes(v.shape, zero_point.shape)).copy()
    out = quantize.mlas_codes(v, zero_point, dtype)
    if not nan_free and np.isnan(v.min(initial=0.0)):  # maxps(NaN, qmin - zp) is qmin - zp
        out[np.isnan(v)] = quantize.quant_range(dtype)[0]
    return out


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``x / scale`` (the zero point, an integer, left out)."""
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float64)
    return [(x, 1.0)], view(tensors["ScaleTensor"], desc.ScaleTensor).astype(np.float64)


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_QUANTIZE_LINEAR_OPERATOR_DESC, kernel=quantize_linear_kernel,
                      compiled_kernel=quantize_linear_compiled, exact_value=exact_value),)
