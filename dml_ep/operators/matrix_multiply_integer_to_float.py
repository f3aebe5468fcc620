"""DML_OPERATOR_MATRIX_MULTIPLY_INTEGER_TO_FLOAT (com.microsoft MatMulIntegerToFloat): desc, import, kernel.

Import, as DmlOperatorMatMulIntegerToFloat.cpp: onnxruntime's inputs A, B, a_scale, b_scale,
a_zero_point, b_zero_point, bias go to the DML order A, AScale, AZeroPoint, B, BScale, BZeroPoint,
Bias; A and B through QLinearMatMul's shape mapping; a_scale and a_zero_point placed on H
(per tensor, or per row {1,1,M,1}; in practice the scalars of a DynamicQuantizeLinear, bound at
run time), b_scale and b_zero_point per tensor or per column {1,1,1,N}; the bias ([N]) broadcast
to the output's sizes. Constants are OWNED_BY_DML; the others are read at each run, a scale
checked as it arrives. A float16 output (T3) runs on DirectML in the real EP and is not modelled.
DirectML documents A, AZeroPoint, B and BZeroPoint as one DataType, yet the DML EP gives it uint8 A
with int8 B (the quantize_dynamic pattern) and nothing shows DirectML refusing it: the desc ties
each operand to its own zero point only.

Kernel: the integer core of the quantized matrix multiply (``PreparedMatrixMultiply``: the exact
``acc = sum_k (a - za) (b - zb)``, with onnxruntime's u8s8 saturation where the arithmetic asks
for it), then scale and bias.

- onnxruntime (``contrib_ops/cpu/quantization/dynamic_quantize_matmul.cc`` MatMulIntegerToFloat::Compute
  and MatMulIntegerToFloatBase::ComputeCommon, MLAS_QGEMM_SCALE_BIAS_OUTPUT_PROCESSOR in
  ``mlas/lib/qpostprocessor.cpp``; /work/scratch/arith/REPORT.md section 3): the multiplier
  ``f32(a_scale * b_scale[n])`` made once, then ``y = f32(f32(f32(acc) * multiplier) + bias[n])``,
  a separate multiply and add (no FMA). A per-row a_scale is not ComputeCommon's: the multiplier
  is b_scale alone and ``ScaleOutput`` multiplies by a_scale after the bias. A per-column b_scale
  with a batched B (more than one distinct B matrix: IsBQuantParamSupported refuses [N] for a B of
  rank 3 and up) likewise: multiplier a_scale, then times b_scale after the bias. Not modelled:
  FixupScaleTensor's swap of the scales (a 1-D per-row a_scale [M]; the desc places it as [M, 1]),
  and a B of rank 3 and up that holds one matrix ([1, K, N]) with a per-column b_scale, which
  onnxruntime also scales after the bias (the desc cannot tell it from a 2-D B).
- DirectML: the page gives no formula ("integer inputs, float output"; the fields imply dequantize
  A and B, multiply, add Bias); dml_ep takes the value a single rounding of the exact
  ``acc * AScale * BScale + Bias`` gives: float32 correctly rounded, ties to even, consistent with
  its other operators (the ideal value, rounded once). Evaluated in float64 (``AScale * BScale`` is
  exact there, the product and the sum round once each, within ``2^-52 * (|acc * scale| + |y|)``
  of the exact value); an element whose float64 value lies that close to a float32 rounding
  boundary (a midpoint between two float32 values) is settled in exact fractions against that
  midpoint. Evidence: none beyond the page (no DirectML test or skip pins its order); the onnxruntime
  order differs from it in about 31% of outputs by an ulp or so (REPORT.md section 5), which
  compare reports within its float tolerance.

No exact value for compare: the output is float (compare compares float outputs with a tolerance).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import broadcast_shapes, broadcast_strides
from ..numerics.kernels import compiled as native
from ..numerics.kernels.float32_fma import BELOW_FLOAT32, HALFWAY, float32_of_dyadic
from ..numerics.kernels.parameters import checked_scale, read4d
from ..numerics.kernels.quantize import per_column
from ..realep.placement import ON_DML
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, check_scale, one_matrix, owned, parameter_shape, placed_parameter, quantized_type, tensor
from .matrix_multiply_integer import PreparedMatrixMultiplyInteger, same_dimension_count, zero_points
from .nodes import DmlNode
from .quantized_linear_matrix_multiply import matrix_shapes, per_column_parameter, validate_matrix_sizes

F32 = np.float32

# --- desc ------------------------------------------------------------------------------------

INTEGERS = frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8})


@dataclasses.dataclass(frozen=True)
class DML_MATRIX_MULTIPLY_INTEGER_TO_FLOAT_OPERATOR_DESC(OperatorDesc):
    """MATRIX_MULTIPLY_INTEGER_TO_FLOAT (com.microsoft MatMulIntegerToFloat), DML_FEATURE_LEVEL_6_2 and up."""

    ATensor: TensorDesc
    AScaleTensor: TensorDesc
    AZeroPointTensor: TensorDesc | None
    BTensor: TensorDesc
    BScaleTensor: TensorDesc
    BZeroPointTensor: TensorDesc | None
    BiasTensor: TensorDesc | None
    OutputTensor: TensorDesc

    OPERATOR_TYPE = OP.MATRIX_MULTIPLY_INTEGER_TO_FLOAT
    INTRODUCED = FL.FL_6_2
    TENSOR_RULES = rules(
        {
            "ATensor": (False, {FL.FL_6_2: (2, 4)}),
            "AScaleTensor": (False, {FL.FL_6_2: (1, 4)}),
            "AZeroPointTensor": (True, {FL.FL_6_2: (1, 4)}),
            "BTensor": (False, {FL.FL_6_2: (2, 4)}),
            "BScaleTensor": (False, {FL.FL_6_2: (1, 4)}),
            "BZeroPointTensor": (True, {FL.FL_6_2: (1, 4)}),
            "BiasTensor": (True, {FL.FL_6_2: (2, 4)}),
            "OutputTensor": (False, {FL.FL_6_2: (2, 4)}),
        },
        {"ATensor": INTEGERS, "AScaleTensor": FLOATS, "AZeroPointTensor": INTEGERS, "BTensor": INTEGERS,
         "BScaleTensor": FLOATS, "BZeroPointTensor": INTEGERS, "BiasTensor": FLOATS, "OutputTensor": FLOATS},
    )
    SAME_TYPE = (("ATensor", "AZeroPointTensor"), ("BTensor", "BZeroPointTensor"),
                 ("OutputTensor", "AScaleTensor", "BiasTensor", "BScaleTensor"))

    def validate_shapes(self, feature_level: FL) -> None:
        same_dimension_count(self, ("AScaleTensor", "AZeroPointTensor", "BScaleTensor", "BZeroPointTensor"))
        same_dimension_count(self, ("ATensor", "BiasTensor", "BTensor", "OutputTensor"))
        validate_matrix_sizes(self, ("AScaleTensor", "AZeroPointTensor"), ("BScaleTensor", "BZeroPointTensor"))
        if self.BiasTensor is not None and self.BiasTensor.Sizes != self.OutputTensor.Sizes:
            self.fail(f"sizes {list(self.BiasTensor.Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", "BiasTensor")


# --- import from ONNX ------------------------------------------------------------------------

A, B, A_SCALE, B_SCALE, A_ZP, B_ZP, BIAS = range(7)
FIELDS_BY_INPUT = ("ATensor", "BTensor", "AScaleTensor", "BScaleTensor", "AZeroPointTensor", "BZeroPointTensor", "BiasTensor")


def matmul_integer_to_float(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, A, "A")
    b_type = quantized_type(ctx, B, "B")
    y_type = ctx.values[ctx.node.output[0]].dtype
    if y_type != np.float32:
        raise Fallback(f"output type {y_type} is not modelled (float32)", ON_DML)
    shapes = matrix_shapes(ctx, A, a_type, B, b_type)
    m, n = shapes.m, shapes.n
    one_matrix(ctx, A_SCALE, "A scale")
    b_scale = ctx.parameter(B_SCALE)
    if b_scale is None:
        one_matrix(ctx, B_SCALE, "B scale")
    a_scale = check_scale(ctx, A_SCALE, ctx.parameter(A_SCALE), (1, m))
    b_scale = check_scale(ctx, B_SCALE, None if b_scale is None else per_column_parameter(b_scale, n), (1, n))
    a_zp, b_zp = zero_points(ctx, A_ZP, a_type, B_ZP, b_type, m, n)
    desc = DML_MATRIX_MULTIPLY_INTEGER_TO_FLOAT_OPERATOR_DESC(
        ATensor=shapes.a,
        AScaleTensor=placed_parameter(ctx, A_SCALE, a_scale, (1, 1, m, 1)),
        AZeroPointTensor=a_zp,
        BTensor=shapes.b,
        BScaleTensor=placed_parameter(ctx, B_SCALE, b_scale, (1, 1, 1, n)),
        BZeroPointTensor=b_zp,
        BiasTensor=bias_tensor(ctx, shapes.output_sizes),
        OutputTensor=tensor(np.float32, shapes.output_sizes),
    )
    return ctx.dml_node(desc, FIELDS_BY_INPUT, shapes.output_shape)


def bias_tensor(ctx: NodeContext, output_sizes: tuple[int, ...]):
    """The bias ([N], or [1, ..., N]), float32, broadcast to the output's sizes (zero strides)."""
    if not ctx.input_name(BIAS):
        return None
    bias = ctx.parameter(BIAS)
    shape, dtype = parameter_shape(ctx, BIAS), ctx.info(BIAS).dtype if bias is None else bias.dtype
    n = output_sizes[-1]
    if dtype != np.float32:
        raise Fallback(f"bias type {dtype} is not modelled (float32)", ON_DML)
    if not shape or shape[-1] != n or any(size != 1 for size in shape[:-1]):
        raise ShapeError(f"bias has shape {list(shape)}; expected [{n}] (B's last dimension)", node=ctx.node, tensor=ctx.input_name(BIAS))
    desc = tensor(np.float32, output_sizes, broadcast_strides((1,) * (len(output_sizes) - 1) + (n,), output_sizes))
    return desc if bias is None else owned(desc)


# --- kernel ----------------------------------------------------------------------------------


class PreparedMatrixMultiplyIntegerToFloat(PreparedMatrixMultiplyInteger):
    """The integer core, then scale and bias in one arithmetic; constant scales and bias read once,
    the others (a DynamicQuantizeLinear's scale) at each run, checked as they arrive."""

    SCALES = ("AScaleTensor", "BScaleTensor")

    def prepare_finish(self, tensors: dict, arithmetic) -> None:
        self.onnxruntime = arithmetic.onnxruntime
        b_sizes, b_strides = self.desc.BTensor.Sizes[-4:-2], self.desc.BTensor.element_strides[-4:-2]
        self.batched_b = any(size > 1 and stride != 0 for size, stride in zip(b_sizes, b_strides))
        self.constants = {field: self._read(tensors, field) for field in (*self.SCALES, "BiasTensor") if not self.bound_at_run_time(field)}
        self.columns: dict[int, tuple] = {}  # the compiled step's constant B scale and bias per column, by column count

    def _read(self, tensors: dict, field: str):
        """A scale (checked) or the bias as float32, at least 4-D; None for a null bias."""
        if getattr(self.desc, field) is None:
            return None
        values = read4d(tensors, self.desc, field)
        return checked_scale(values, tensor=field) if field in self.SCALES else values

    def finish(self, acc: np.ndarray, tensors: dict) -> np.ndarray:
        a_scale, b_scale, bias = (self.constants[field] if field in self.constants else self._read(tensors, field)
                                  for field in (*self.SCALES, "BiasTensor"))
        if self.engine.compiled_kernels:
            y = self._compiled(acc, a_scale, b_scale, bias)
            if y is not None:
                return y
        if self.onnxruntime:
            return scale_bias_onnxruntime(acc, a_scale, b_scale, bias, self.batched_b)
        return scale_bias_directml(acc, a_scale, b_scale, bias)

    def _compiled(self, acc: np.ndarray, a_scale, b_scale, bias) -> np.ndarray | None:
        """:func:`scale_bias_compiled` where the sums are C-contiguous, the A scale per tensor,
        the B scale and the bias per column, and (onnxruntime) the B scale in the multiplier; None
        elsewhere (the twins run). The B scale and the bias per column are made once where they
        are constants."""
        if (native.scale_bias is None or acc.dtype not in (np.int32, np.float32) or not acc.flags.c_contiguous or a_scale.size != 1
                or (self.onnxruntime and self.batched_b and b_scale.size != 1)):
            return None
        columns, dtype = acc.shape[-1], F32 if self.onnxruntime else np.float64  # MLAS's float32 multiplier; the exact product
        constant = "BScaleTensor" in self.constants and "BiasTensor" in self.constants
        made = self.columns.get(columns) if constant else None
        if made is None:
            made = (per_column(b_scale, columns, dtype), np.zeros(0, dtype) if bias is None else per_column(bias, columns, dtype))
            if constant:
                self.columns[columns] = made
        b_columns, offset = made
        if b_columns is None or offset is None:
            return None
        scale = np.multiply(a_scale.reshape(()).astype(dtype), b_columns, dtype=dtype)  # as the twin forms it
        return scale_bias_compiled(acc, scale, offset, self.onnxruntime)


def scale_bias_compiled(acc: np.ndarray, scale: np.ndarray, offset: np.ndarray, onnxruntime: bool) -> np.ndarray:
    """The twins' step on C-contiguous sums (int32 or float32) with a scale and a bias per column
    (``offset``, empty for none): float32 for MLAS's arithmetic, float64 (the exact product of
    the scales) for DirectML's, where the elements the float64 value cannot settle go to
    :func:`scale_bias_directml`'s exact tier."""
    columns = acc.shape[-1]
    sums = acc.reshape(-1, columns)
    y = np.empty(sums.shape, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        if onnxruntime:
            native.scale_bias.mlas(sums, scale, offset, y)
            return y.reshape(acc.shape)
        suspects = native.flagged(native.scale_bias.directml, sums.size, sums, scale, offset, y)
    if suspects.size:
        rows, cols = np.divmod(suspects, columns)
        y[rows, cols] = scale_bias_directml(sums[rows, cols], np.float32(1), scale[cols], offset[cols] if offset.size else None)
    return y.reshape(acc.shape)


def scale_bias_onnxruntime(acc, a_scale, b_scale, bias, batched_b: bool) -> np.ndarray:
    """MatMulIntegerToFloat::Compute: ComputeCommon's ``f32(f32(f32(acc) * f32(a_scale * b_scale[n])) + bias[n])``
    (MLAS's scale/bias output processor: cvtdq2ps, a multiply, an add), the a_scale left out of the
    multiplier when per row and b_scale when B is batched, each then multiplied in after the bias
    (``ScaleOutput``)."""
    per_row = a_scale.size > 1
    b_supported = b_scale.size == 1 or not batched_b
    multiplier = F32(1) if per_row else a_scale.reshape(()).astype(F32)
    if b_supported:
        multiplier = np.multiply(multiplier, b_scale, dtype=F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.multiply(acc, multiplier, dtype=F32)  # int32 -> float32 rounds to nearest even, as cvtdq2ps
        if bias is not None:
            y = np.add(y, bias, out=y if y.shape == broadcast_shapes(y.shape, np.shape(bias)) else None, dtype=F32)
        if per_row:
            y = np.multiply(y, a_scale, dtype=F32)
        if not b_supported:
            y = np.multiply(y, b_scale, dtype=F32)
    return y


def scale_bias_directml(acc, a_scale, b_scale, bias) -> np.ndarray:
    """``acc * AScale * BScale + Bias`` rounded once to float32, ties to even: float64 where that
    cannot decide the rounding wrongly, exact fractions for the elements within float64's error of
    a float32 rounding boundary."""
    acc = np.asarray(acc, np.float64)  # integers below 2^32: exact
    scale = np.multiply(a_scale, b_scale, dtype=np.float64)  # two float32 significands: exact
    y = acc * scale
    if bias is None:
        cancels = None
    else:
        cancels = np.abs(y)  # the product, before the bias is added
        np.add(y, np.asarray(bias, np.float64), out=y)
    with np.errstate(over="ignore"):
        rounded = y.astype(F32)
    # float64 keeps 29 bits below float32's last: those bits of y say how far it lies from the
    # midpoint between two float32 neighbours (HALFWAY), in y's float64 ulps. The float64 value
    # is within half an ulp of the product's (no bias) or of the product's and the sum's (a
    # bias: more ulps of y where the sum cancels the product), so its float32 rounding is the
    # exact value's unless it lies that close to a midpoint. Below float32's normal range, and at
    # its top, the bits do not say it: those elements are checked exactly.
    distance = np.abs((y.view(np.int64) & int(BELOW_FLOAT32)) - int(HALFWAY))
    magnitude = np.abs(y)
    near = distance <= 2
    if cancels is not None:
        near |= distance <= 2 + 2 * cancels / np.maximum(magnitude, 2.0**-1000)
    suspect = np.flatnonzero(near | ((magnitude < 2.0**-126) & (magnitude > 0)) | (magnitude >= 2.0**127))
    if suspect.size:
        shape = y.shape
        rounded = rounded.copy()
        flat = rounded.reshape(-1)
        acc_f, scale_f = (np.broadcast_to(x, shape).reshape(-1) for x in (acc, scale))
        bias_f = None if bias is None else np.broadcast_to(np.asarray(bias, np.float64), shape).reshape(-1)
        for i in suspect:
            exact = Fraction(float(acc_f[i])) * Fraction(float(scale_f[i])) + (0 if bias_f is None else Fraction(float(bias_f[i])))
            numerator, denominator = exact.as_integer_ratio()  # a power of two: floats' products and sums are dyadic
            flat[i] = float32_of_dyadic(numerator, 1 - denominator.bit_length())
    return rounded


OPERATORS = (Operator(desc=DML_MATRIX_MULTIPLY_INTEGER_TO_FLOAT_OPERATOR_DESC, prepared=PreparedMatrixMultiplyIntegerToFloat, exact_value=None),)
