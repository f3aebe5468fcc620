"""QLinearMatMul -> DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC, as DmlOperatorQLinearMatMul.cpp.

numpy matmul semantics folded to 4-D {B, C, M, K} x {B, C, K, N}: a 1-D A gets a leading 1, a 1-D B
a trailing 1 (and the output drops them again); batch dimensions broadcast by zero strides.
Scales/zero points: A's and the output's per tensor or per row {1,1,M,1}, B's per tensor or per
column {1,1,1,N}.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..operator_descs import DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC, QUANTIZED_BINARY_INPUTS
from ..plan import DmlNode
from ..real_ep import ASSIGNED_TO_DML
from ..tensor_desc import broadcast_shapes, broadcast_strides
from .common import Fallback, NodeContext, check_scale, check_zero_point, importer, output_type, parameter_tensor, quantized_type, tensor

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


def _per_column(parameter, n: int):
    """B's scale or zero point as onnxruntime also accepts it, [..., 1, N] per batch, reduced to [N].

    DirectML's {1,1,1,N} holds one row for every batch, so batches must agree.
    """
    if parameter is None or np.ndim(parameter) < 3 or np.shape(parameter)[-2:] != (1, n):
        return parameter
    rows = np.asarray(parameter).reshape(-1, n)
    if np.any(rows != rows[0]):
        raise Fallback(f"B quantization parameters differ between batches (shape {list(np.shape(parameter))}); DirectML's are {{1,1,1,N}}", ASSIGNED_TO_DML)
    return rows[0]


@importer("QLinearMatMul")
def qlinear_matmul(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, A, "A")
    b_type = quantized_type(ctx, B, "B")
    a_shape, b_shape = ctx.info(A).shape, ctx.info(B).shape
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

    a_scale = check_scale(ctx, A_SCALE, ctx.constant(A_SCALE, "A scale"), (1, m))
    b_scale = check_scale(ctx, B_SCALE, _per_column(ctx.constant(B_SCALE, "B scale"), n), (1, n))
    y_scale = check_scale(ctx, Y_SCALE, ctx.constant(Y_SCALE, "output scale"), (1, m))
    a_zp = check_zero_point(ctx, A_ZP, ctx.optional_constant(A_ZP, "A zero point"), a_type, (1, m))
    b_zp = check_zero_point(ctx, B_ZP, _per_column(ctx.optional_constant(B_ZP, "B zero point"), n), b_type, (1, n))
    y_type = output_type(ctx)
    y_zp = check_zero_point(ctx, Y_ZP, ctx.optional_constant(Y_ZP, "output zero point"), y_type, (1, m))

    def per_row(array):
        return parameter_tensor(array, (1, 1, m, 1) if np.asarray(array).size > 1 else (1, 1, 1, 1))

    def per_column(array):
        return parameter_tensor(array, (1, 1, 1, n) if np.asarray(array).size > 1 else (1, 1, 1, 1))

    def operand(dtype, operand_batch, matrix, sizes, index):
        shape = pad + tuple(operand_batch) + matrix
        return tensor(dtype, sizes, broadcast_strides(shape, sizes), owned=ctx.input_name(index) in ctx.constants)

    desc = DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC(
        ATensor=operand(a_type, a_batch4, (m, k), a_sizes, A),
        AScaleTensor=per_row(a_scale),
        AZeroPointTensor=None if a_zp is None else per_row(a_zp),
        BTensor=operand(b_type, b_batch4, (k, n), b_sizes, B),
        BScaleTensor=per_column(b_scale),
        BZeroPointTensor=None if b_zp is None else per_column(b_zp),
        OutputScaleTensor=per_row(y_scale),
        OutputZeroPointTensor=None if y_zp is None else per_row(y_zp),
        OutputTensor=tensor(y_type, out_batch + (m, n)),
    )
    out_shape = tuple(batch) + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    return ctx.dml_node(desc, QUANTIZED_BINARY_INPUTS, out_shape)
