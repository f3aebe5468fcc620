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

import functools

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...core import nibbles
from ...core.graph import internal_model
from ...ort.reference import cpu_session


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


def onnxruntime_matmul_nbits(a: np.ndarray, codes: np.ndarray, scales: np.ndarray, block_size: int, accuracy_level: int) -> np.ndarray:
    """The host's onnxruntime's 4-bit MatMulNBits (no zero points) of float32 ``a`` {M, K}, on one
    thread: ``codes`` {N, K / block_size, block_size / 2}, ``scales`` float32 [N * blocks]."""
    n, k = codes.shape[0], a.shape[1]
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=block_size,
                            accuracy_level=accuracy_level)
    graph = helper.make_graph([node], "matmul_nbits_probe", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(codes, "b"), numpy_helper.from_array(scales, "s")])
    model = internal_model(graph, 13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return cpu_session(model, threads=1).run(None, {"a": a})[0]


@functools.cache
def host_runs_sqnbit_int8() -> bool:
    """Whether the host's onnxruntime computes a 4-bit MatMulNBits at accuracy level 4 with A
    quantized to int8 (MLAS has CompInt8 kernels from AVX2 on; without them level 4 is level 0),
    measured: a block whose int8 codes round A visibly."""
    k, n, block = 32, 2, 32
    codes = np.full((n, 1, block // 2), 0x99, np.uint8)  # every weight code 9: (9 - 8) * scale
    a = np.zeros((1, k), np.float32)
    a[0, 0], a[0, 1] = 127.0, 0.4  # 0.4 rounds to code 0 in a block whose scale is 1
    return float(onnxruntime_matmul_nbits(a, codes, np.ones(n, np.float32), block, accuracy_level=4)[0, 0]) == 127.0
