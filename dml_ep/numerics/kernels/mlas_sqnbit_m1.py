"""onnxruntime's 4-bit MatMulNBits of one row at accuracy levels 0 to 3 (MLAS's M=1
``SQ4BitGemm`` CompFp32 kernels), bit for bit: where A has one row, qnbitgemm.cpp runs
``SQ4BitGemmM1Kernel_CompFp32`` instead of dequantizing B for SGEMM.

The weight is MLAS's ``(q - zp) * scale`` in float32 (one rounding, as DEQUANTIZE gives it in the
"onnxruntime" arithmetic). The AVX-512 kernel (``MlasQ4GemmKernelBlkLen16Avx512f``,
``MlasQ4GemmKernelBlkLen32PlusAvx512f``, sqnbitgemm_kernel_avx_common_fp32.h) keeps 16 float32
lanes per column: lane j sums ``fma(w[k], a[k], lane)`` over k = j, j + 16, j + 32, ... in order,
whatever the block size (a partial last block is masked: its A reads 0). Columns go four at a time,
folded by ``FoldAccumulators``: per group of four lanes ``((l0 + l1) + l2) + l3``, then
``(t0 + t2) + (t1 + t3)``; the last N mod 4 columns by GCC's ``_mm512_reduce_add_ps`` (halves
added: 16 -> 8 -> 4, then ``(u0 + u2) + (u1 + u3)``). The AVX2 kernel (``SQ4BitGemmM1Kernel_CompFp32_avx2``,
sqnbitgemm_kernel_avx2.cpp) keeps 8 lanes per column the same way; four columns are folded as
``(((l0 + l1) + l2) + l3) + (((l4 + l5) + l6) + l7)`` (its ``FoldAccumulators``), the last N mod 4 by
two ``hadd``: ``s_i = l_i + l_(i+4)``, then ``(s0 + s1) + (s2 + s3)``. A bias is added last (the DML
EP's MatMulNBits takes none). Measured bit for bit against onnxruntime 1.32 on an AVX-512 host and
under QEMU Haswell (AVX2), block sizes 16 to 256, K not a multiple of the block, N not a multiple of
4, with and without zero points, 1 to 4 threads. :func:`host_m1_kernel` says which kernel the host's
onnxruntime runs (None: none of these, as before AVX2, where it dequantizes B for SGEMM).
"""

from __future__ import annotations

import functools

import numpy as np

from . import compiled as native
from .float32_fma import fma32
from .matmul_nbits import dequantized_weight, onnxruntime_matmul_nbits
from .mlas_sgemm import run_parts, work_parts

AVX512, AVX2 = "avx512", "avx2"
LANES = {AVX512: 16, AVX2: 8}


def lane_sums(a: np.ndarray, b: np.ndarray, lanes: int, compiled: bool = False) -> np.ndarray:
    """{N, lanes} float32: lane j of column n sums ``fma(b[k, n], a[k], .)`` over k = j (mod ``lanes``),
    k increasing from a zero start; ``a`` {K}, ``b`` {K, N} float32, rows contiguous."""
    depth, columns = b.shape
    sums = np.zeros((lanes, columns), np.float32)
    if compiled and native.sgemm is not None:
        a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
        run_parts(lambda part: native.sgemm.lane_sums(a, sums[:, part], weights=b[:, part]), work_parts(columns, depth * columns))
        return sums.T
    steps = -(-depth // lanes)
    padded_a = np.zeros(steps * lanes, np.float32)
    padded_a[:depth] = a
    padded_b = np.zeros((steps * lanes, columns), np.float32)
    padded_b[:depth] = b
    for step in range(steps):
        rows = slice(step * lanes, (step + 1) * lanes)
        sums = fma32(padded_b[rows], padded_a[rows, None], sums)
    return sums.T


def code_lane_sums(a: np.ndarray, codes: np.ndarray, scales: np.ndarray, block: int, lanes: int) -> np.ndarray:
    """:func:`lane_sums` of the weight ``codes[k, n] * scales[k // block, n]`` (float32, one rounding each, as
    MLAS dequantizes ``(q - zp) * scale``) from ``codes`` {K, N} int8 and ``scales`` {ceil(K / block), N}
    float32, compiled: a 4-bit weight read as a byte per code, not four."""
    sums = np.zeros((lanes, codes.shape[1]), np.float32)
    a = np.ascontiguousarray(a, np.float32)
    run_parts(lambda part: native.sgemm.lane_sums(a, sums[:, part], codes=codes[:, part], scales=scales[:, part], block=block),
              work_parts(codes.shape[1], codes.size))
    return sums.T


def fold_avx512(sums: np.ndarray) -> np.ndarray:
    """{N} float32: each column's 16 lanes folded as the AVX-512 kernel folds them (module docstring)."""
    lane = [sums[:, j] for j in range(16)]
    groups = [((lane[4 * g] + lane[4 * g + 1]) + lane[4 * g + 2]) + lane[4 * g + 3] for g in range(4)]
    out = (groups[0] + groups[2]) + (groups[1] + groups[3])
    rest = sums.shape[0] % 4
    if rest:  # the columns after the last four: _mm512_reduce_add_ps
        halves = sums[-rest:, 8:] + sums[-rest:, :8]
        quarters = halves[:, 4:] + halves[:, :4]
        out[-rest:] = (quarters[:, 0] + quarters[:, 2]) + (quarters[:, 1] + quarters[:, 3])
    return out


def fold_avx2(sums: np.ndarray) -> np.ndarray:
    """{N} float32: each column's 8 lanes folded as the AVX2 kernel folds them (module docstring)."""
    lane = [sums[:, j] for j in range(8)]
    out = (((lane[0] + lane[1]) + lane[2]) + lane[3]) + (((lane[4] + lane[5]) + lane[6]) + lane[7])
    rest = sums.shape[0] % 4
    if rest:  # the columns after the last four: two _mm_hadd_ps
        pairs = sums[-rest:, :4] + sums[-rest:, 4:8]
        out[-rest:] = (pairs[:, 0] + pairs[:, 1]) + (pairs[:, 2] + pairs[:, 3])
    return out


FOLDS = {AVX512: fold_avx512, AVX2: fold_avx2}


def m1_product(a: np.ndarray, b: np.ndarray, kernel: str, compiled: bool = False) -> np.ndarray:
    """{N} float32: ``a`` {K} times the float32 weight ``b`` {K, N} as MLAS's M=1 ``kernel`` sums it."""
    return FOLDS[kernel](lane_sums(a, b, LANES[kernel], compiled))


def m1_code_product(a: np.ndarray, codes: np.ndarray, scales: np.ndarray, block: int, kernel: str) -> np.ndarray:
    """:func:`m1_product` of the weight as :func:`code_lane_sums` reads it (compiled)."""
    return FOLDS[kernel](code_lane_sums(a, codes, scales, block, LANES[kernel]))


@functools.lru_cache(maxsize=1)
def host_m1_kernel() -> str | None:
    """The M=1 CompFp32 kernel the host's onnxruntime runs, of those dml_ep reproduces, measured on a
    MatMulNBits of one row (N 6: four columns and two left over; K 80 in blocks of 32, the last partial);
    None for none of them (CPU flags would only guess MLAS's choice)."""
    rng = np.random.default_rng(5)
    k, n, block = 80, 6, 32
    codes = rng.integers(0, 256, (n, -(-k // block), block // 2), dtype=np.uint8)
    scales = (rng.random(codes.shape[0] * codes.shape[1]) * 0.1 + 0.01).astype(np.float32)
    a = rng.standard_normal((1, k)).astype(np.float32)
    y = onnxruntime_matmul_nbits(a, codes, scales, block, accuracy_level=0)[0]
    weight = np.ascontiguousarray(dequantized_weight(codes, scales, None, n, k, 4, block).astype(np.float32).T)
    for kernel in FOLDS:
        if np.array_equal(y, m1_product(a[0], weight, kernel)):
            return kernel
    return None
