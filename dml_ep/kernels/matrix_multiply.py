"""DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY.

DirectML: ``Output = Quantize(Dequantize(A) x Dequantize(B), OutputScale, OutputZeroPoint)`` over
{BatchCount, ChannelCount} independent {M,K} x {K,N} products, i.e.
``round(acc * AScale * BScale / OutputScale) + OutputZeroPoint`` with
``acc = sum_k (a - za) * (b - zb) = sum_k a*b - zb * sum_k a - za * sum_k b + K * za * zb``.

The raw-code product runs on float32 BLAS in exact K-blocks (``integer_gemm``), reading A and B
through their descs, so batch broadcasting (stride 0) is never materialized; the zero-point terms
are exact row and column sums. ``"onnxruntime"`` requantizes as MLAS does, with the float32
multiplier ``float32(AScale * BScale) / OutputScale``; ``"directml"`` rounds the ideal value.
"""

from __future__ import annotations

import numpy as np

from ..enums import DML_TENSOR_FLAGS
from ..tensor_desc import view
from . import quantize, u8s8
from .parameters import as4d, parameter4d
from .integer_gemm import exact_matmul, uniform_blocks


def _operand(tensors, desc, field, cache) -> tuple[np.ndarray, np.ndarray]:
    """The raw codes through the desc (4-D view, no copy) and the same as float32.

    The float32 copy of an operand bound at initialization (OWNED_BY_DML) is made once.
    """
    tensor_desc = getattr(desc, field)
    raw = view(tensors[field], tensor_desc)
    if tensor_desc.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML:
        if field not in cache:
            cache[field] = np.asarray(tensors[field]).astype(np.float32)
        buffer = cache[field]
    else:
        buffer = np.asarray(tensors[field]).astype(np.float32)
    return as4d(raw), as4d(view(buffer, tensor_desc))


def quantized_linear_matrix_multiply(desc, tensors: dict, options, cache: dict) -> np.ndarray:
    a_raw, a = _operand(tensors, desc, "ATensor", cache)
    b_raw, b = _operand(tensors, desc, "BTensor", cache)
    za = parameter4d(tensors, desc, "AZeroPointTensor")  # {1,1,1,1} or {1,1,M,1}
    zb = parameter4d(tensors, desc, "BZeroPointTensor")  # {1,1,1,1} or {1,1,1,N}
    k = a.shape[-1]
    blocks = uniform_blocks(k, quantize.max_abs_code(a_raw.dtype), quantize.max_abs_code(b_raw.dtype))
    acc = exact_matmul(a, b, blocks).astype(np.float64)
    if options.saturates_u8s8(desc.ATensor, desc.BTensor):
        acc += u8s8.matmul_correction(a_raw, b_raw)
    if np.any(zb):
        acc -= zb * a.sum(axis=-1, keepdims=True, dtype=np.float64)
    if np.any(za):
        acc -= za * b.sum(axis=-2, keepdims=True, dtype=np.float64)
        acc += k * za * zb

    result = quantize.requantize_product(
        acc,
        parameter4d(tensors, desc, "AScaleTensor"),
        parameter4d(tensors, desc, "BScaleTensor"),
        parameter4d(tensors, desc, "OutputScaleTensor"),
        parameter4d(tensors, desc, "OutputZeroPointTensor"),
        desc.OutputTensor.DataType.numpy(),
        options,
    )
    return result.reshape(desc.OutputTensor.Sizes)
