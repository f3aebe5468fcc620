"""DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY (ONNX QLinearMatMul): desc, import, kernel, exact value.

Import, as DmlOperatorQLinearMatMul.cpp: numpy matmul semantics folded to 4-D {B, C, M, K} x
{B, C, K, N}: a 1-D A gets a leading 1, a 1-D B a trailing 1 (and the output drops them again);
batch dimensions broadcast by zero strides. Scales/zero points: A's and the output's per tensor
or per row {1,1,M,1}, B's per tensor or per column {1,1,1,N}.

Kernel. DirectML: ``Output = Quantize(Dequantize(A) x Dequantize(B), OutputScale, OutputZeroPoint)`` over
{BatchCount, ChannelCount} independent {M,K} x {K,N} products, i.e.
``round(acc * AScale * BScale / OutputScale) + OutputZeroPoint`` with
``acc = sum_k (a - za) * (b - zb)``.

The integer core reads A and B through their descs and gives ``acc`` exactly on the session's
integer engine (``dml_ep.numerics.engines``), B prepared once per engine when it is bound at initialization
(a batch dimension that repeats one matrix, zero strides, is computed once and broadcast).
A per-row A zero point, which the engines do not take, is applied after as
``za * sum_k (b - zb)``. Then the shared requantize step (``kernels.quantized_product``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import ShapeError
from ..core.tensor_desc import DML_BUFFER_TENSOR_DESC, broadcast_shapes, broadcast_strides, view
from ..numerics.kernels import u8s8
from ..numerics.kernels.parameters import as4d, parameter4d, scalar
from ..numerics.kernels.quantized_product import PreparedQuantizedProduct
from ..realep.placement import ASSIGNED_TO_DML
from .base import QUANTIZED_BINARY_INPUTS, Operator, QuantizedBinaryDesc
from .importing import (Fallback, NodeContext, check_scale, check_zero_point, one_matrix, optional_parameter, output_type, placed_parameter,
                        quantized_type, tensor)
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC(QuantizedBinaryDesc):
    """QUANTIZED_LINEAR_MATRIX_MULTIPLY (ONNX QLinearMatMul), DML_FEATURE_LEVEL_2_1 and up."""

    OPERATOR_TYPE = OP.QUANTIZED_LINEAR_MATRIX_MULTIPLY
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = QuantizedBinaryDesc.tensor_rules(
        lambda field: {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4) if ("Scale" in field or "ZeroPoint" in field) else (2, 4)}
    )

    def validate_shapes(self, feature_level: FL) -> None:
        validate_matrix_sizes(self, ("AScaleTensor", "AZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"),
                              ("BScaleTensor", "BZeroPointTensor"))


def validate_matrix_sizes(desc, per_row: tuple[str, ...], per_column: tuple[str, ...]) -> None:
    """The matrix multiplies' size rules: A {B, C, M, K} x B {B, C, K, N} -> Output {B, C, M, N};
    the ``per_row`` parameters {1,1,1,1} or {1,1,M,1}, the ``per_column`` ones {1,1,1,1} or {1,1,1,N}."""
    batch, channels, m, k = desc.sizes4("ATensor")
    b_batch, b_channels, b_k, n = desc.sizes4("BTensor")
    if (b_batch, b_channels) != (batch, channels):
        desc.fail(f"BatchCount and ChannelCount {[b_batch, b_channels]} must equal ATensor's {[batch, channels]}", "BTensor")
    if b_k != k:
        desc.fail(f"Height {b_k} must equal ATensor's Width {k} (the inner dimension)", "BTensor")
    if desc.sizes4("OutputTensor") != (batch, channels, m, n):
        desc.fail(f"sizes {list(desc.OutputTensor.Sizes)} must be {[batch, channels, m, n]}", "OutputTensor")
    scalar = (1, 1, 1, 1)
    for field in per_row:
        desc.check_sizes(field, [scalar, (1, 1, m, 1)], f"{{1,1,1,1}} or {{1,1,{m},1}} (per row)")
    for field in per_column:
        desc.check_sizes(field, [scalar, (1, 1, 1, n)], f"{{1,1,1,1}} or {{1,1,1,{n}}} (per column)")


# --- import from ONNX ------------------------------------------------------------------------

A, A_SCALE, A_ZP, B, B_SCALE, B_ZP, Y_SCALE, Y_ZP = range(8)


def _fold_batch(batch: tuple[int, ...], a_batch, b_batch) -> tuple:
    """Batch dims as at most two (B, C): leading dims merge when neither operand broadcasts over them."""
    if len(batch) <= 2:
        return batch, a_batch, b_batch
    lead = len(batch) - 1
    for operand in (a_batch, b_batch):
        if operand[:lead] != batch[:lead] and any(d != 1 for d in operand[:lead]):
            raise Fallback(f"batch broadcasting over {len(batch)} batch dimensions does not fold into DirectML's 4-D", ASSIGNED_TO_DML)

    def fold(dims):
        return (int(np.prod(dims[:lead])), dims[lead])

    return fold(batch), fold(a_batch), fold(b_batch)


def per_column_parameter(parameter, n: int):
    """B's scale or zero point as onnxruntime also accepts it, [..., 1, N] per batch, reduced to [N].

    DirectML's {1,1,1,N} holds one row for every batch, so batches must agree.
    """
    if parameter is None or np.ndim(parameter) < 3 or np.shape(parameter)[-2:] != (1, n):
        return parameter
    rows = np.asarray(parameter).reshape(-1, n)
    if np.any(rows != rows[0]):
        raise Fallback(f"B quantization parameters differ between batches (shape {list(np.shape(parameter))}); DirectML's are {{1,1,1,N}}", ASSIGNED_TO_DML)
    return rows[0]


@dataclasses.dataclass(frozen=True)
class MatrixShapes:
    """A matrix multiply's operands as DirectML reads them (the DML EP's MatMulShapeMapping):
    A {.., M, K} and B {.., K, N} descs, the output's 4-D sizes and its ONNX shape."""

    m: int
    k: int
    n: int
    a: DML_BUFFER_TENSOR_DESC
    b: DML_BUFFER_TENSOR_DESC
    output_sizes: tuple[int, ...]
    output_shape: tuple[int, ...]


def matrix_shapes(ctx: NodeContext, a_index: int, a_type, b_index: int, b_type) -> MatrixShapes:
    """numpy matmul semantics folded to 4-D {B, C, M, K} x {B, C, K, N}: a 1-D A gets a leading 1,
    a 1-D B a trailing 1 (and the output drops them again); batch dimensions broadcast by zero
    strides; A and B flagged OWNED_BY_DML when they are constants."""
    a_shape, b_shape = ctx.info(a_index).shape, ctx.info(b_index).shape
    if not a_shape or not b_shape:
        raise ShapeError("matrix multiply inputs must have at least 1 dimension", node=ctx.node)
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    m, k = a2[-2:]
    k_b, n = b2[-2:]
    if k != k_b:
        raise ShapeError(f"inner dimensions differ: A {list(a_shape)} has K={k}, B {list(b_shape)} has K={k_b}", node=ctx.node)
    try:
        batch = broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ShapeError(f"batch dimensions of A {list(a_shape)} and B {list(b_shape)} do not broadcast", node=ctx.node) from None
    a_batch = (1,) * (len(batch) - len(a2) + 2) + a2[:-2]
    b_batch = (1,) * (len(batch) - len(b2) + 2) + b2[:-2]
    batch4, a_batch4, b_batch4 = _fold_batch(batch, a_batch, b_batch)
    pad = (1,) * (2 - len(batch4))
    out_batch = pad + tuple(batch4)
    a_sizes, b_sizes = out_batch + (m, k), out_batch + (k, n)

    def operand(dtype, operand_batch, matrix, sizes, index):
        shape = pad + tuple(operand_batch) + matrix
        return tensor(dtype, sizes, broadcast_strides(shape, sizes), owned=ctx.input_name(index) in ctx.constants)

    out_shape = tuple(batch) + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    return MatrixShapes(m, k, n, operand(a_type, a_batch4, (m, k), a_sizes, a_index), operand(b_type, b_batch4, (k, n), b_sizes, b_index),
                        out_batch + (m, n), out_shape)


def qlinear_matmul(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, A, "A")
    b_type = quantized_type(ctx, B, "B")
    shapes = matrix_shapes(ctx, A, a_type, B, b_type)
    m, n = shapes.m, shapes.n

    y_type = output_type(ctx)
    for index in (A_SCALE, B_SCALE, Y_SCALE, A_ZP, B_ZP, Y_ZP):
        if ctx.parameter(index) is None:  # bound at run time: one row or column for every batch
            one_matrix(ctx, index, "a scale or zero point bound at run time")
    a_scale = check_scale(ctx, A_SCALE, ctx.parameter(A_SCALE), (1, m))
    b_scale = check_scale(ctx, B_SCALE, per_column_parameter(ctx.parameter(B_SCALE), n), (1, n))
    y_scale = check_scale(ctx, Y_SCALE, ctx.parameter(Y_SCALE), (1, m))
    a_zp = check_zero_point(ctx, A_ZP, ctx.parameter(A_ZP), a_type, (1, m))
    b_zp = check_zero_point(ctx, B_ZP, per_column_parameter(ctx.parameter(B_ZP), n), b_type, (1, n))
    y_zp = check_zero_point(ctx, Y_ZP, ctx.parameter(Y_ZP), y_type, (1, m))
    per_row, per_column = (1, 1, m, 1), (1, 1, 1, n)
    desc = DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC(
        ATensor=shapes.a,
        AScaleTensor=placed_parameter(ctx, A_SCALE, a_scale, per_row),
        AZeroPointTensor=optional_parameter(ctx, A_ZP, a_zp, per_row),
        BTensor=shapes.b,
        BScaleTensor=placed_parameter(ctx, B_SCALE, b_scale, per_column),
        BZeroPointTensor=optional_parameter(ctx, B_ZP, b_zp, per_column),
        OutputScaleTensor=placed_parameter(ctx, Y_SCALE, y_scale, per_row),
        OutputZeroPointTensor=optional_parameter(ctx, Y_ZP, y_zp, per_row),
        OutputTensor=tensor(y_type, shapes.output_sizes),
    )
    return ctx.dml_node(desc, QUANTIZED_BINARY_INPUTS, shapes.output_shape)


# --- kernel ----------------------------------------------------------------------------------


def _distinct(x: np.ndarray) -> np.ndarray:
    """[batch, channel, rows, cols] with each batch dimension that repeats one matrix (zero stride)
    cut to size 1: the product is computed once and broadcast."""
    if 0 not in x.strides[:2]:  # the common case, without making an index
        return x
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.strides[:2])]


def _matrix_b(desc, tensors: dict) -> np.ndarray:
    """B through its desc, each repeated batch matrix once; one [K, N] matrix where every batch
    reads the same one (the engines take per-column zero points for it)."""
    b = _distinct(as4d(view(tensors["BTensor"], desc.BTensor)))
    return b[0, 0] if b.shape[:2] == (1, 1) else b


class PreparedMatrixMultiply(PreparedQuantizedProduct):
    """A matrix multiply desc prepared: zero points, B as the engine's product (its session made
    once; a B bound at run time is fed to it at each run), and the requantize step. Sums come as
    [batch, channel, M, N]."""

    A_FIELD, B_FIELD = "ATensor", "BTensor"
    REQUANTIZE_FIELDS = ("AScaleTensor", "BScaleTensor", "OutputScaleTensor", "OutputZeroPointTensor")

    def prepare(self, tensors: dict) -> None:
        desc = self.desc
        self.per_row = desc.AZeroPointTensor is not None and desc.AZeroPointTensor.element_count > 1  # {1,1,M,1}
        self.a_zero_point = None if self.bound_at_run_time("AZeroPointTensor") else self._a_zero_point(tensors)
        # A B zero point bound at run time is taken off after the product: zb * sum_k (a - za).
        self.late_b_zero_point = self.bound_at_run_time("BZeroPointTensor")
        self.b_zero_point = np.zeros((1, 1, 1, 1), np.int64) if self.late_b_zero_point else parameter4d(tensors, desc, "BZeroPointTensor").astype(np.int64)  # {1,1,1,1} or {1,1,1,N}
        if self.constant:  # B and its product, read once
            self.b = _matrix_b(desc, tensors)
            self.b_product = self._product(self.b)

    def _a_zero_point(self, tensors: dict):
        """A's zero point: an int per tensor, int64 {1,1,M,1} per row."""
        if self.per_row:
            return parameter4d(tensors, self.desc, "AZeroPointTensor").astype(np.int64)
        return int(scalar(tensors, self.desc, "AZeroPointTensor"))

    def requantize_parameters(self, tensors: dict) -> tuple:
        return tuple(parameter4d(tensors, self.desc, field) for field in self.REQUANTIZE_FIELDS)

    def _zero_point(self, b: np.ndarray) -> np.ndarray:
        """B's zero point as the engines take it: a scalar, or per column of each matrix of ``b``."""
        zb = self.b_zero_point
        return zb.reshape(()) if zb.size == 1 else np.broadcast_to(zb.reshape(-1), b.shape[:-2] + zb.shape[-1:])

    def _product(self, b: np.ndarray):
        """The engine's product for B (one per batch shape of a B bound at run time)."""
        batches = None if self.constant else b.shape[:-2]
        made = self.products.get(self.product_key(batches))
        if made is not None:
            return made
        rows = int(np.prod(self.desc.OutputTensor.Sizes)) // self.desc.OutputTensor.Sizes[-1]  # batches * M
        return self.product(b, self._zero_point(b), rows=rows, key=(batches,))

    def operand(self, tensors: dict) -> np.ndarray:
        return as4d(view(tensors["ATensor"], self.desc.ATensor))

    def accumulate(self, tensors: dict, operand: np.ndarray | None = None) -> np.ndarray:
        """The exact ``sum_k (a - za) * (b - zb)`` as [batch, channel, M, N]."""
        a = self.operand(tensors) if operand is None else operand
        b = self.b if self.constant else _matrix_b(self.desc, tensors)
        za = self._a_zero_point(tensors) if self.a_zero_point is None else self.a_zero_point
        a_zero_point = 0 if self.per_row else za
        if self.constant:
            acc = self.b_product(_distinct(a), a_zero_point)
        else:
            acc = self._product(b)(_distinct(a), a_zero_point, np.ascontiguousarray(b))
        if self.per_row:  # sum_k (a - za) (b - zb) = sum_k a (b - zb) - za sum_k (b - zb)
            zb = self._zero_point(b)
            b_sums = np.subtract(b, np.expand_dims(zb, -2) if zb.ndim else zb, dtype=np.int64).sum(axis=-2, keepdims=True)
            acc = (acc - za * b_sums).astype(np.int32)
        if self.late_b_zero_point:  # sum_k (a - za) (b - zb) = sum_k (a - za) b - zb sum_k (a - za)
            zb = parameter4d(tensors, self.desc, "BZeroPointTensor").astype(np.int64)  # {1,1,1,1} or {1,1,1,N}
            a_sums = np.subtract(_distinct(a).sum(axis=-1, keepdims=True, dtype=np.int64), a.shape[-1] * za)
            acc = (acc - a_sums * zb).astype(np.int32)
        shape = broadcast_shapes(a.shape[:-2], b.shape[:-2]) + acc.shape[-2:]
        return acc if acc.shape == shape else np.broadcast_to(acc, shape)  # one product for all batches: broadcast

    def u8s8_correction(self, tensors: dict, operand: np.ndarray) -> np.ndarray:
        return u8s8.matmul_correction(operand, as4d(view(tensors["BTensor"], self.desc.BTensor)))

    def output(self, requantized: np.ndarray) -> np.ndarray:
        return requantized.reshape(self.desc.OutputTensor.Sizes)


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``acc * AScale * BScale / OutputScale``, ``acc`` the exact integer core."""
    acc = PreparedMatrixMultiply.integer_core(desc, tensors, engine)  # sum (a - za) * (b - zb)
    terms = [(acc, parameter4d(tensors, desc, "AScaleTensor") * parameter4d(tensors, desc, "BScaleTensor"))]
    return terms, parameter4d(tensors, desc, "OutputScaleTensor")


OPERATORS = (
    Operator(desc=DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC, prepared=PreparedMatrixMultiply, exact_value=exact_value),
)
