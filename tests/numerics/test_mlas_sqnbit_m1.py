"""MLAS's M=1 SQ4BitGemm CompFp32 kernels (kernels.mlas_sqnbit_m1): the compiled lane sums against
the numpy twin's, and both against hand-computed lanes; the folds against hand-written trees; the
host's kernel against its onnxruntime on one-row MatMulNBits of every block size."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.numerics.kernels import compiled as native
from dml_ep.numerics.kernels.mlas_sgemm import host_runs_sqnbit_fp32
from dml_ep.numerics.kernels.mlas_sqnbit_m1 import fold_avx2, fold_avx512, host_m1_kernel, lane_sums, m1_code_product
from dml_ep.ort.reference import cpu_session
from onnx_builders import matmul_nbits
from operator_cases import rows

RNG = np.random.default_rng(62)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.skipif(native.sgemm is None, reason="not built"))])
@pytest.mark.parametrize("lanes", [8, 16])
def test_lane_j_sums_every_lanes_th_product_in_order(lanes, compiled):
    a = np.array([1.0, 2.0**-24, 2.0**-24, 1.0, 3.0], np.float32)
    b = np.ones((5, 2), np.float32)
    sums = lane_sums(a, b, lanes, compiled)
    expected = np.zeros(lanes, np.float32)
    for k, x in enumerate(a):  # each fused product rounded in turn: 1 + 2^-24 stays 1
        expected[k % lanes] = np.float32(expected[k % lanes] + x)
    np.testing.assert_array_equal(sums, np.stack([expected, expected]))
    big_a, big_b = RNG.standard_normal(300).astype(np.float32), RNG.standard_normal((300, 37)).astype(np.float32)
    np.testing.assert_array_equal(lane_sums(big_a, big_b, lanes, compiled), lane_sums(big_a, big_b, lanes, False))


def test_the_folds_add_in_the_kernels_trees():
    """Lanes spread over 2^24 (another order rounds some column otherwise): 400 columns in fours, then
    100 GEMMs of 3 columns, all left over after the fours."""
    sums = (RNG.standard_normal((700, 16)) * 2.0 ** RNG.integers(-12, 12, (700, 16))).astype(np.float32)
    lane = sums.T
    t = [((lane[4 * g] + lane[4 * g + 1]) + lane[4 * g + 2]) + lane[4 * g + 3] for g in range(4)]
    h = lane[8:] + lane[:8]
    q = h[4:] + h[:4]
    fours = (((lane[0] + lane[1]) + lane[2]) + lane[3]) + (((lane[4] + lane[5]) + lane[6]) + lane[7])
    s = lane[:4] + lane[4:8]
    np.testing.assert_array_equal(fold_avx512(sums[:400]), ((t[0] + t[2]) + (t[1] + t[3]))[:400])
    np.testing.assert_array_equal(fold_avx2(sums[:400, :8]), fours[:400])
    left = slice(400, None)
    np.testing.assert_array_equal(np.concatenate([fold_avx512(sums[i:i + 3]) for i in range(400, 700, 3)]), ((q[0] + q[2]) + (q[1] + q[3]))[left])
    np.testing.assert_array_equal(np.concatenate([fold_avx2(sums[i:i + 3, :8]) for i in range(400, 700, 3)]), ((s[0] + s[1]) + (s[2] + s[3]))[left])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("block_size, k, n", [(16, 72, 7), (32, 100, 6), (64, 300, 13), (128, 520, 4)])
def test_one_row_is_the_hosts_onnxruntime_to_the_bit(block_size, k, n):
    if not host_runs_sqnbit_fp32():
        pytest.skip("the host's onnxruntime has no CompFp32 kernels (before AVX2): no M=1 order to reproduce")
    assert host_m1_kernel() is not None, "an AVX2 or AVX-512 host's M=1 kernel is one of those dml_ep reproduces"
    model = matmul_nbits(k, n, block_size, 4, True, accuracy_level=0)
    a = rows(model, 1)
    expected = cpu_session(model).run(None, {"a": a})[0]
    for engine in ("onnxruntime", "numpy"):
        np.testing.assert_array_equal(dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine=engine).run(None, {"a": a})[0], expected)


@pytest.mark.host_sensitive
@pytest.mark.skipif(native.sgemm is None, reason="not built")
@pytest.mark.parametrize("float_type, zero_points", [(np.float32, True), (np.float16, False)])
def test_a_decode_step_reads_the_weight_as_its_codes(monkeypatch, float_type, zero_points):
    """The compiled engine's GEMM of one row reads its DEQUANTIZE's 4-bit codes and scales (a byte per
    weight), not the float32 weight, with the same bits: onnxruntime's."""
    if not host_runs_sqnbit_fp32():
        pytest.skip("the host's onnxruntime has no CompFp32 kernels (before AVX2)")
    from dml_ep.operators import gemm

    read = []
    monkeypatch.setattr(gemm, "m1_code_product", lambda *arguments: read.append(arguments[4]) or m1_code_product(*arguments))
    model = matmul_nbits(256, 20, 32, 4, zero_points, float_type=float_type, accuracy_level=0)
    a = rows(model, 1)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine="onnxruntime")
    for _ in range(2):  # the second run reads the codes the first noted
        np.testing.assert_array_equal(session.run(None, {"a": a})[0], cpu_session(model).run(None, {"a": a})[0])
    assert read == [host_m1_kernel()] * 2
