"""com.microsoft MatMulNBits' arithmetic as onnxruntime's CPU EP does it, for compare's causes.

- The weight: ``W[n, k] = (q[n, k] - zp[n, k / block_size]) * scale[n, k / block_size]`` (MLAS q4_dq.cpp),
  B packed [N, blocks, block_size * bits / 8] low bits first, zero points packed per row to whole
  bytes (or absent: 2^(bits-1)), scales [N, blocks] or [N * blocks] (contrib_defs.cc). Exact in
  float64.
- Accuracy level 4 (``SQNBIT_CompInt8``, matmul_nbits.cc), MLAS's QuantizeARow_CompInt8
  (sqnbitgemm_kernel_avx2.cpp): A quantized per row in blocks of block_size along K, each block's
  scale ``amax / 127`` in float32, its codes ``round(a * (127 / amax))`` half to even (an all-zero
  block's inverse scale 0), a partial last block zero-padded; the product then sums
  ``scale_A * scale_B * sum(q_a * (q_b - zp))`` per block, equal to A's dequantized codes times W.
"""

from __future__ import annotations

import numpy as np

from .. import nibbles


def dequantized_weight(b: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, n: int, k: int, bits: int,
                       block_size: int) -> np.ndarray:
    """The exact float64 {N, K} weight a MatMulNBits' B, scales and zero points hold."""
    blocks = -(-k // block_size)
    per_row = blocks * block_size
    if bits == 4:
        codes = nibbles.unpack(b, n * per_row, signed=False).reshape(n, per_row)
    else:
        codes = np.asarray(b, np.uint8).reshape(n, per_row)
    if zero_points is None:
        zp = np.full((n, blocks), 1 << (bits - 1))
    elif zero_points.dtype != np.uint8:  # float zero points, unpacked [N, blocks]
        zp = np.asarray(zero_points, np.float64).reshape(n, blocks)
    elif bits == 4:
        row_bytes = (blocks + 1) // 2
        zp = nibbles.unpack(zero_points, n * row_bytes * 2, signed=False).reshape(n, row_bytes * 2)[:, :blocks]
    else:
        zp = np.asarray(zero_points).reshape(n, blocks)
    scale = np.asarray(scales, np.float64).reshape(n, blocks)
    weight = (codes.reshape(n, blocks, block_size).astype(np.float64) - zp[..., None]) * scale[..., None]
    return weight.reshape(n, per_row)[:, :k]


def int8_blocks(a: np.ndarray, block_size: int) -> np.ndarray:
    """A as CompInt8 sees it (float64): each row's blocks of ``block_size`` quantized to int8 and
    dequantized, in float32 as MLAS computes the scale and the codes."""
    a = np.asarray(a, np.float32)
    k = a.shape[-1]
    blocks = -(-k // block_size)
    padded = np.zeros((*a.shape[:-1], blocks * block_size), np.float32)
    padded[..., :k] = a
    grouped = padded.reshape(*a.shape[:-1], blocks, block_size)
    amax = np.abs(grouped).max(axis=-1, keepdims=True)
    scale = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inverse = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    codes = np.rint(grouped * inverse)  # float32 product, rounded half to even
    return (codes.astype(np.float64) * scale.astype(np.float64)).reshape(padded.shape)[..., :k]
