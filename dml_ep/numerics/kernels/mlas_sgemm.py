"""onnxruntime's CPU float32 GEMM on x86-64 (MLAS ``MlasGemmBatch``), bit for bit: the
``"onnxruntime"`` arithmetic of float MatMul, FusedMatMul and Gemm.

A float sum's bits depend on its order, and MLAS picks the order per call (onnxruntime 1.17 to 1.24,
``onnxruntime/core/mlas/lib/sgemm.cpp``, ``x86_64/FgemmKernelFma3Common.h``, ``SgemmKernelM1*.S``):
- the work is split over the thread pool (``MlasGemmBatch``, ``MlasSgemmThreaded``): along N when
  N > M (in blocks of 16 columns), else along M; each part is a GEMM of its own;
- a part of one row (A not transposed, alpha 1, beta 0 or 1) runs the AVX M=1 kernels: with B as
  stored, C += ((a0 b0 + a1 b1) + a2 b2) + a3 b3 per four k (then two, then one); with B
  transposed, eight lanes each sum every eighth product, reduced in a fixed tree. A GEMM whose B
  and C are one column (N = 1) runs them with A and B swapped;
- else K is cut into panels (128, widened to cover K when N >= K, or lengthened while N is small;
  256 for a constant 2-D B, which onnxruntime packs when the session loads): each panel sums its
  products in k order from zero, with one fused multiply-add per product on FMA3 and AVX-512 hosts
  (a multiply, then an add, on older ones); the first panel's sum times alpha is written, later
  ones are added to C in one FMA.
:func:`host_sgemm` measures which kernels the host runs; the threads are the reference session's
(onnxruntime's default: one per physical core). Every product and sum here is a correctly rounded
float32 operation (numpy's, :func:`fma32` for the fused ones), so the result is MLAS's to the bit.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
from typing import Any, Callable

import numpy as np
from onnx import TensorProto, helper

from ...core.graph import internal_model
from ...ort.reference import cpu_session
from . import compiled as native
from .float32_fma import fma32
from .matmul_nbits import dequantized_weight, onnxruntime_matmul_nbits

STRIDEN, STRIDEK, PACKED_STRIDEK = 128, 128, 256
THREAD_COMPLEXITY = 64 * 1024  # MLAS_SGEMM_THREAD_COMPLEXITY: multiply-adds worth a thread
THREAD_ALIGN_N = 16  # MLAS_SGEMM_STRIDEN_THREAD_ALIGN


@dataclasses.dataclass(frozen=True)
class SgemmHost:
    """The MLAS SGEMM kernels a host runs: ``fused`` (FMA3 or AVX-512F: one fused multiply-add per
    product), ``m1`` (AVX: the M=1 kernels), and how many threads share a GEMM."""

    fused: bool
    m1: bool
    threads: int


@functools.lru_cache(maxsize=1)
def host_sgemm() -> SgemmHost:
    """The host's kernels, measured on its onnxruntime: CPU flags would only guess MLAS's choice
    (and under an emulator describe another CPU).

    Fused: -1 + (1 + 2^-12)^2 is 2^-11 + 2^-24 with one rounding, 2^-11 when the square is rounded
    first (its 2^-24 is half an ulp of 1, a tie to even). M=1 kernel: 1 + 7 x 2^-24 summed in k
    order stays 1; the M=1 kernel adds the last four products (2^-22) together first.
    """
    square = np.float32(1 + 2.0**-12)
    a = np.array([[-1.0, square]] * 2, np.float32)
    b = np.array([[1.0] * 8, [square] * 8], np.float32)
    fused = _onnxruntime_matmul(a, b)[0, 0] != np.float32(2.0**-11)
    row = np.array([[1.0] + [2.0**-24] * 7], np.float32)
    m1 = _onnxruntime_matmul(row, np.ones((8, 8), np.float32))[0, 0] != 1.0
    return SgemmHost(fused=bool(fused), m1=bool(m1), threads=physical_cores())


@functools.lru_cache(maxsize=1)
def host_runs_sqnbit_fp32() -> bool:
    """Whether the host's onnxruntime computes a 4-bit MatMulNBits at accuracy level 0 as
    ``SQ4BitGemm_CompFp32`` does on x86-64 with AVX2 (A's rows against the float32 weight in one
    SGEMM panel over all of K), measured: without that kernel (older CPUs) onnxruntime dequantizes
    B and runs its SGEMM, K in panels. K 256 against N 100 is two panels in SGEMM."""
    rng = np.random.default_rng(0)
    k, n, block = 256, 100, 32
    codes = rng.integers(0, 256, (n, k // block, block // 2), dtype=np.uint8)
    scales = (rng.random(n * k // block) * 0.1 + 0.01).astype(np.float32)
    a = rng.standard_normal((2, k)).astype(np.float32)
    y = onnxruntime_matmul_nbits(a, codes, scales, block, accuracy_level=0)
    weight = dequantized_weight(codes, scales, None, n, k, 4, block).astype(np.float32).T  # exact: small integers times a scale
    return bool(np.array_equal(y, panel_sum(a[None], np.ascontiguousarray(weight)[None], host_sgemm().fused)[0]))


@functools.cache
def logical_cores() -> int:
    """The CPUs the kernels' threads may use, read once (``os.cpu_count`` reads the system on
    every call: tens of microseconds, per GEMM)."""
    return os.cpu_count() or 1


def physical_cores() -> int:
    """onnxruntime's default intra-op thread count: the physical cores (Linux's /proc/cpuinfo
    pairs of physical and core id; the logical CPUs where it does not say)."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = [line.split(":", 1) for line in f if line.startswith(("physical id", "core id"))]
    except OSError:
        fields = []
    pairs = {tuple(value.strip() for _, value in fields[i:i + 2]) for i in range(0, len(fields) - 1, 2)}
    return len(pairs) or logical_cores()


def _onnxruntime_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """onnxruntime's MatMul of two graph inputs (B not a constant: not packed), on one thread."""
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "sgemm_probe",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return cpu_session(internal_model(graph, 13), threads=1).run(None, {"a": a, "b": b})[0]


@dataclasses.dataclass(frozen=True)
class GemmCall:
    """One MLAS GEMM call's settings: whether A and B are transposed as stored, alpha and beta,
    and whether B was packed when the session loaded (a constant 2-D B)."""

    trans_a: bool = False
    trans_b: bool = False
    alpha: float = 1.0
    beta: float = 0.0
    packed: bool = False


def sgemm_batch(a: np.ndarray, b: np.ndarray, call: GemmCall, host: SgemmHost, c: np.ndarray | None = None,
                compiled: bool = False) -> np.ndarray:
    """``MlasGemmBatch``: ``alpha * a @ b + beta * c`` for a stack of GEMMs (``a`` {batch, M, K},
    ``b`` {batch, K, N}, ``c`` {batch, M, N} or None, the matrices as multiplied, float32);
    ``compiled``: the panels summed by ``kernels.compiled.sgemm`` where it was built."""
    batch, m, k = a.shape
    n = b.shape[-1]
    out = np.empty((batch, m, n), np.float32) if c is None else np.array(c, np.float32)  # the parts cover it; without C, beta is 0
    if k == 0:
        return out * np.float32(call.beta) if c is not None else out
    target = min(int(m * n * k / THREAD_COMPLEXITY) + 1, host.threads)
    per_gemm = -(-target // batch)
    if n > m:
        threads_m, threads_n = 1, min(per_gemm, -(-n // THREAD_ALIGN_N))
    else:
        threads_m, threads_n = min(per_gemm, m), 1
    for thread in range(threads_m * threads_n):
        rows = _partition(thread // threads_n, threads_m, m)
        blocks = _partition(thread % threads_n, threads_n, -(-n // THREAD_ALIGN_N))
        columns = slice(blocks.start * THREAD_ALIGN_N, min(n, blocks.stop * THREAD_ALIGN_N))
        if rows.stop > rows.start and columns.stop > columns.start:
            out[:, rows, columns] = _operation(a[:, rows], b[:, :, columns], out[:, rows, columns], call, host, n, compiled)
    return out


def _partition(index: int, parts: int, total: int):
    """``MlasPartitionWork``: part ``index`` of ``total`` in ``parts``, the first ones one longer."""
    each, extra = divmod(total, parts)
    start = index * (each + 1) if index < extra else index * each + extra
    return slice(start, start + each + (index < extra))


def _operation(a, b, c, call: GemmCall, host: SgemmHost, full_n: int, compiled: bool) -> np.ndarray:
    """``MlasSgemmOperation`` (or the packed one) on one thread's rows and columns."""
    m, k, n = a.shape[1], a.shape[2], b.shape[2]
    small = call.alpha == 1.0 and call.beta in (0.0, 1.0) and host.m1 and not call.packed
    if small and m == 1 and not call.trans_a:
        vector = a[:, 0, :]
        return (_m1_transposed(vector, np.swapaxes(b, 1, 2), c[:, 0], call.beta) if call.trans_b else _m1(vector, b, c[:, 0], call.beta))[:, None, :]
    if small and full_n == 1 and (not call.trans_b or k == 1):  # B and C one contiguous column: A and B swapped
        vector = b[:, :, 0]
        return (_m1(vector, np.swapaxes(a, 1, 2), c[:, :, 0], call.beta) if call.trans_a else _m1_transposed(vector, a, c[:, :, 0], call.beta))[:, :, None]
    return _panels(a, b, c, call, host.fused, _stride_k(call, k, n), compiled)


def _stride_k(call: GemmCall, k: int, n: int) -> int:
    """The panel length along K for ``n`` columns."""
    if call.packed:
        return PACKED_STRIDEK
    stride_n, stride_k = STRIDEN, STRIDEK
    if n >= k:
        while stride_k // 2 >= k:
            stride_n, stride_k = stride_n * 2, stride_k // 2
    elif not call.trans_a:
        while stride_n > 16 and stride_n // 2 >= n:
            stride_n, stride_k = stride_n // 2, stride_k * 2
    return stride_k


def _panels(a, b, c, call: GemmCall, fused: bool, stride_k: int, compiled: bool) -> np.ndarray:
    """K in panels of ``stride_k``: each summed in k order from zero, then scaled into C."""
    alpha = np.float32(call.alpha)
    if call.beta not in (0.0, 1.0):
        c = c * np.float32(call.beta)
    first = call.beta == 0.0
    for start in range(0, a.shape[2], stride_k):
        total = panel_sum(a[:, :, start:start + stride_k], b[:, start:start + stride_k], fused, compiled)
        if first:
            c, first = (total if alpha == 1 else total * alpha), False
        elif fused:
            c = fma32(total, alpha, c)
        else:
            c = total * alpha + c
    return c


def panel_sum(a: np.ndarray, b: np.ndarray, fused: bool, compiled: bool = False, panels: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` ({batch, M, K} x {batch, K, N}) summed in k order from zero, each product fused
    into the sum or rounded first; ``compiled``: by ``kernels.compiled.sgemm`` where it was built,
    from B's ``panels`` (:func:`packed_panels`) where the caller keeps a constant's."""
    if compiled and native.sgemm is not None:
        panels = _pack(b) if panels is None else panels
        total = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.float32)  # every element written
        work = a.size * b.shape[2]
        if a.shape[0] == 1:  # one GEMM: its columns in parts of whole panels
            parts = [(slice(None), tiles) for tiles in work_parts(panels.shape[1], work)]
        else:  # a stack: its GEMMs in parts
            parts = [(gemms, slice(None)) for gemms in work_parts(a.shape[0], work)]

        def run(part):
            gemms, tiles = part
            columns = slice(tiles.start * PANEL, tiles.stop * PANEL) if tiles.stop is not None else slice(None)
            native.sgemm.panel_sum(a[gemms], panels[gemms if panels.shape[0] > 1 else slice(None), tiles], total[gemms, :, columns], fused)

        run_parts(run, parts)
        return total
    total = np.zeros((a.shape[0], a.shape[1], b.shape[2]), np.float32)
    for k in range(a.shape[2]):
        column, row = a[:, :, k:k + 1], b[:, k:k + 1, :]
        total = fma32(column, row, total) if fused else total + column * row
    return total


PANEL = 16  # B's columns per packed panel (the compiled kernel's tile width)


def packed_panels(b: np.ndarray) -> np.ndarray | None:
    """B ({batch, K, N}) as the compiled kernel reads it, 16 columns a panel ({batch, ceil(N / 16),
    K, 16}, the last padded with 0s); None where that kernel was not built."""
    return None if native.sgemm is None else _pack(b)


def _pack(b: np.ndarray) -> np.ndarray:
    b = np.asarray(b, np.float32)
    if b.strides[-1] != b.itemsize:
        b = np.ascontiguousarray(b)
    panels = np.empty((b.shape[0], -(-b.shape[2] // PANEL), b.shape[1], PANEL), np.float32)
    native.sgemm.pack_panels(b, panels)
    return panels


PARALLEL_WORK = 1 << 21  # multiply-adds worth a second thread of the compiled panels (one part stays on the caller's)


def work_parts(count: int, work: int) -> list[slice]:
    """``count`` column panels (or GEMMs) in one part per core for the compiled panels (each element's sum
    is the same whoever takes it), one part where the work is small."""
    parts = max(1, min(logical_cores(), count, work // PARALLEL_WORK))
    return [_partition(index, parts, count) for index in range(parts)]


def run_parts(run: Callable[[Any], None], parts: list) -> None:
    """``run(part)`` for each of ``parts``: the first on this thread while the compiled kernels'
    pool takes the others (they release the GIL)."""
    others = [_pool().submit(run, part) for part in parts[1:]]
    run(parts[0])
    for other in others:
        other.result()


@functools.lru_cache(maxsize=1)
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads the compiled panels run on (they release the GIL)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=logical_cores(), thread_name_prefix="dml_ep_sgemm")


def _m1(vector: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float) -> np.ndarray:
    """``MlasSgemmKernelM1Avx``: ``vector`` {batch, K} times ``b`` {batch, K, N}: per four k the
    products summed in order, then added to C (per two, then one, at the end of K)."""
    c = np.zeros_like(c) if beta == 0.0 else c
    k, start = vector.shape[1], 0
    for size in [4] * (vector.shape[1] // 4) + [2] * (k % 4 // 2) + [1] * (k % 2):
        group = vector[:, start:start + 1] * b[:, start, :]
        for j in range(start + 1, start + size):
            group = group + vector[:, j:j + 1] * b[:, j, :]
        c, start = group + c, start + size
    return c


def _m1_transposed(vector: np.ndarray, rows: np.ndarray, c: np.ndarray, beta: float) -> np.ndarray:
    """``MlasSgemmKernelM1TransposeBAvx``: the dot products of ``vector`` {batch, K} with each of
    ``rows`` {batch, N, K}: eight lanes, lane l summing products l, l + 8, ... in order; the
    lanes reduced as the kernel's blocks of 4, 2 and 1 rows do; then added to C."""
    k = vector.shape[1]
    padded = -(-k // 8) * 8
    x = np.zeros((vector.shape[0], 1, padded), np.float32)
    x[:, 0, :k] = vector
    y = np.zeros((*rows.shape[:2], padded), np.float32)
    y[:, :, :k] = rows
    lanes = np.zeros((*rows.shape[:2], 8), np.float32)
    for start in range(0, padded, 8):
        lanes = lanes + x[:, :, start:start + 8] * y[:, :, start:start + 8]
    lane = [lanes[..., i] for i in range(8)]
    four = ((lane[0] + lane[1]) + lane[2]) + lane[3] + (((lane[4] + lane[5]) + lane[6]) + lane[7])
    two = ((lane[0] + lane[2]) + (lane[4] + lane[6])) + ((lane[1] + lane[3]) + (lane[5] + lane[7]))
    one = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))
    n = rows.shape[1]
    in_fours, rest = n // 4 * 4, n % 4
    block = np.concatenate([np.zeros(in_fours, int), np.full(rest // 2 * 2, 1, int), np.full(rest % 2, 2, int)])
    reduced = np.choose(block[None, :], [four, two, one])
    return reduced + (np.zeros_like(c) if beta == 0.0 else c)


def matmul(a: np.ndarray, b: np.ndarray, call: GemmCall, host: SgemmHost, compiled: bool = False) -> np.ndarray:
    """onnxruntime's MatMul and FusedMatMul (``MatMul<float>``, ``MatMulComputeHelper``) of ``a``
    and ``b`` as stored (2 or more dimensions each): A's rows folded into one GEMM where B has no
    batch, else one GEMM per broadcast batch."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    b_matrix = np.swapaxes(b, -1, -2) if call.trans_b else b
    if not call.trans_a and a.ndim >= b.ndim and int(np.prod(b.shape[:-2])) == 1:
        product = sgemm_batch(a.reshape(1, -1, a.shape[-1]), b_matrix.reshape(1, *b_matrix.shape[-2:]), call, host, compiled=compiled)
        return product.reshape(*a.shape[:-1], b_matrix.shape[-1])
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a_matrix = np.swapaxes(a, -1, -2) if call.trans_a else a
    a_stack = np.broadcast_to(a_matrix, (*batch, *a_matrix.shape[-2:])).reshape(-1, *a_matrix.shape[-2:])
    b_stack = np.broadcast_to(b_matrix, (*batch, *b_matrix.shape[-2:])).reshape(-1, *b_matrix.shape[-2:])
    return sgemm_batch(a_stack, b_stack, call, host, compiled=compiled).reshape(*batch, a_matrix.shape[-2], b_matrix.shape[-1])
