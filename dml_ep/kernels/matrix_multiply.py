"""DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY.

DirectML: ``Output = Quantize(Dequantize(A) x Dequantize(B), OutputScale, OutputZeroPoint)`` over
{BatchCount, ChannelCount} independent {M,K} x {K,N} products, i.e.
``round(acc * AScale * BScale / OutputScale) + OutputZeroPoint`` with
``acc = sum_k (a - za) * (b - zb)``.

The integer core reads A and B through their descs and gives ``acc`` exactly on the session's
integer engine (``dml_ep.engines``), B prepared once per engine when it is bound at initialization.
A per-row A zero point, which the engines do not take, is applied after as
``za * sum_k (b - zb)``. Then the shared requantize step (``quantize.Requantizer``).
"""

from __future__ import annotations

import numpy as np

from ..enums import DML_TENSOR_FLAGS
from ..tensor_desc import view
from . import quantize, u8s8
from .parameters import as4d, parameter4d


def _distinct(x: np.ndarray) -> np.ndarray:
    """[batch, channel, rows, cols] with each batch dimension that repeats one matrix (zero stride)
    cut to size 1: the product is computed once and broadcast."""
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.strides[:2])]


def matrix_multiply_accumulator(desc, tensors: dict, engine, cache: dict) -> np.ndarray:
    """The integer core: the exact ``sum_k (a - za) * (b - zb)`` as [batch, channel, M, N] (int32,
    or float32 where that holds every sum exactly)."""
    a = as4d(view(tensors["ATensor"], desc.ATensor))
    b = _distinct(as4d(view(tensors["BTensor"], desc.BTensor)))
    if b.shape[:2] == (1, 1):
        b = b[0, 0]  # one matrix: the engines take per-column zero points for it
    za = parameter4d(tensors, desc, "AZeroPointTensor")  # {1,1,1,1} or {1,1,M,1}
    zb = parameter4d(tensors, desc, "BZeroPointTensor").astype(np.int64)  # {1,1,1,1} or {1,1,1,N}
    zb = zb.reshape(()) if zb.size == 1 else np.broadcast_to(zb.reshape(-1), b.shape[:-2] + zb.shape[-1:])
    constant = bool(desc.BTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
    key = ("b", engine.name, b.ndim, zb.tobytes())
    if key not in cache:
        cache[key] = engine.product(np.ascontiguousarray(b), zb, constant)
    per_row = za.size > 1
    a_zero_point = 0 if per_row else int(za.reshape(-1)[0])
    a_distinct = _distinct(a)
    acc = cache[key](a_distinct, a_zero_point) if constant else cache[key](a_distinct, a_zero_point, b)
    if per_row:
        b_sums = np.subtract(b, np.expand_dims(zb, -2) if zb.ndim else zb, dtype=np.int64).sum(axis=-2, keepdims=True)
        acc = (acc - za.astype(np.int64) * b_sums).astype(np.int32)
    return np.broadcast_to(acc, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + acc.shape[-2:])


def quantized_linear_matrix_multiply(desc, tensors: dict, arithmetic, engine, cache: dict) -> np.ndarray:
    acc = matrix_multiply_accumulator(desc, tensors, engine, cache)
    if arithmetic.saturates_u8s8(desc.ATensor, desc.BTensor):
        a = as4d(view(tensors["ATensor"], desc.ATensor))
        b = as4d(view(tensors["BTensor"], desc.BTensor))
        acc = acc + u8s8.matmul_correction(a, b)
    key = ("requantize", arithmetic)
    if key not in cache:
        cache[key] = quantize.Requantizer(
            parameter4d(tensors, desc, "AScaleTensor"),
            parameter4d(tensors, desc, "BScaleTensor"),
            parameter4d(tensors, desc, "OutputScaleTensor"),
            parameter4d(tensors, desc, "OutputZeroPointTensor"),
            desc.OutputTensor.DataType.numpy(),
            arithmetic,
        )
    return cache[key](acc).reshape(desc.OutputTensor.Sizes)
