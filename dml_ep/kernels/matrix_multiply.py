"""DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY.

DirectML: ``Output = Quantize(Dequantize(A) x Dequantize(B), OutputScale, OutputZeroPoint)`` over
{BatchCount, ChannelCount} independent {M,K} x {K,N} products, i.e.
``round(acc * AScale * BScale / OutputScale) + OutputZeroPoint`` with
``acc = sum_k (a - za) * (b - zb)``.

The integer core reads A and B through their descs and gives ``acc`` exactly on the session's
integer engine (``dml_ep.engines``), B prepared once per engine when it is bound at initialization
(a batch dimension that repeats one matrix, zero strides, is computed once and broadcast).
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


def _matrix_b(desc, tensors: dict) -> np.ndarray:
    """B through its desc, each repeated batch matrix once; one [K, N] matrix where every batch
    reads the same one (the engines take per-column zero points for it)."""
    b = _distinct(as4d(view(tensors["BTensor"], desc.BTensor)))
    return b[0, 0] if b.shape[:2] == (1, 1) else b


class PreparedMatrixMultiply:
    """What one matrix multiply desc needs at each run, worked out once per node, engine and
    arithmetic: zero points, B as the engine's product (its session made once; a B bound at run
    time is fed to it at each run), and the requantize step. Products are shared by the node's
    arithmetics (``products``, the node's cache)."""

    def __init__(self, desc, tensors: dict, arithmetic, engine, products: dict):
        self.desc, self.engine, self.products = desc, engine, products
        za = parameter4d(tensors, desc, "AZeroPointTensor")  # {1,1,1,1} or {1,1,M,1}
        self.per_row = za.size > 1
        self.a_zero_point = za.astype(np.int64) if self.per_row else int(za.reshape(-1)[0])
        self.b_zero_point = parameter4d(tensors, desc, "BZeroPointTensor").astype(np.int64)  # {1,1,1,1} or {1,1,1,N}
        self.constant = bool(desc.BTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
        if self.constant:
            self._product(_matrix_b(desc, tensors))
        self.saturates_u8s8 = arithmetic.saturates_u8s8(desc.ATensor, desc.BTensor)
        self.requantize = quantize.Requantizer(
            parameter4d(tensors, desc, "AScaleTensor"),
            parameter4d(tensors, desc, "BScaleTensor"),
            parameter4d(tensors, desc, "OutputScaleTensor"),
            parameter4d(tensors, desc, "OutputZeroPointTensor"),
            desc.OutputTensor.DataType.numpy(),
            arithmetic,
        )

    def _zero_point(self, b: np.ndarray) -> np.ndarray:
        """B's zero point as the engines take it: a scalar, or per column of each matrix of ``b``."""
        zb = self.b_zero_point
        return zb.reshape(()) if zb.size == 1 else np.broadcast_to(zb.reshape(-1), b.shape[:-2] + zb.shape[-1:])

    def _product(self, b: np.ndarray):
        """The engine's product for B (one per batch shape of a B bound at run time)."""
        key = ("product", self.engine.name, None if self.constant else b.shape[:-2])
        if key not in self.products:
            rows = int(np.prod(self.desc.OutputTensor.Sizes)) // self.desc.OutputTensor.Sizes[-1]  # batches * M
            self.products[key] = self.engine.product(np.ascontiguousarray(b), self._zero_point(b), self.constant, rows=rows)
        return self.products[key]

    def accumulate(self, tensors: dict) -> np.ndarray:
        """The integer core: the exact ``sum_k (a - za) * (b - zb)`` as [batch, channel, M, N]
        (int32, or float32 where that holds every sum exactly)."""
        desc = self.desc
        a = as4d(view(tensors["ATensor"], desc.ATensor))
        b = _matrix_b(desc, tensors)
        a_zero_point = 0 if self.per_row else self.a_zero_point
        if self.constant:
            acc = self._product(b)(_distinct(a), a_zero_point)
        else:
            acc = self._product(b)(_distinct(a), a_zero_point, np.ascontiguousarray(b))
        if self.per_row:  # sum_k (a - za) (b - zb) = sum_k a (b - zb) - za sum_k (b - zb)
            zb = self._zero_point(b)
            b_sums = np.subtract(b, np.expand_dims(zb, -2) if zb.ndim else zb, dtype=np.int64).sum(axis=-2, keepdims=True)
            acc = (acc - self.a_zero_point * b_sums).astype(np.int32)
        return np.broadcast_to(acc, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + acc.shape[-2:])

    def __call__(self, tensors: dict) -> np.ndarray:
        acc = self.accumulate(tensors)
        if self.saturates_u8s8:
            a = as4d(view(tensors["ATensor"], self.desc.ATensor))
            b = as4d(view(tensors["BTensor"], self.desc.BTensor))
            acc = acc + u8s8.matmul_correction(a, b)
        return self.requantize(acc).reshape(self.desc.OutputTensor.Sizes)
