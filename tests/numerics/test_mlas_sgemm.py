"""kernels.mlas_sgemm against the host's onnxruntime, bit for bit: MatMul, FusedMatMul and Gemm
through each of MLAS's paths (the M=1 kernels both ways, N = 1, K panels of every length, a packed
constant B, the work split over threads), in the numpy twin and the compiled panels."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.core.graph import internal_model
from dml_ep.numerics.kernels import compiled
from dml_ep.numerics.kernels.mlas_sgemm import GemmCall, SgemmHost, host_sgemm, matmul, sgemm_batch
from dml_ep.ort.reference import cpu_session

pytestmark = pytest.mark.host_sensitive
BUILDS = [False] + ([True] if compiled.sgemm is not None else [])


def _data(rng, shape):
    """Normal values of mixed magnitudes, so that sums round differently in different orders."""
    return (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], size=shape)).astype(np.float32)


def _onnxruntime(node: onnx.NodeProto, feeds: dict, constants: dict) -> np.ndarray:
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info(name, TensorProto.FLOAT, value.shape) for name, value in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(value, name) for name, value in constants.items()])
    model = internal_model(graph, 13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return cpu_session(model).run(None, feeds)[0]  # the "ort" reference's threads


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and np.array_equal(x.view(np.uint32), y.view(np.uint32))


SHAPES = [  # M, K, N: each an MLAS path on its own
    (1, 7, 5), (1, 300, 40),  # the M=1 kernels: groups of 4, 2, 1 of K; 8 lanes and their tails
    (5, 1, 9), (7, 129, 1),  # K = 1; N = 1 (A and B swapped into the M=1 kernels)
    (2, 300, 3), (3, 1000, 17),  # N < K: K panels lengthened while N is small
    (37, 513, 20), (130, 40, 33),  # panels of 128; N >= K widens the panel to cover K
    (64, 200, 300), (200, 700, 64),  # enough work for several threads: split along N, then along M
]


@pytest.mark.parametrize("compiled_panels", BUILDS)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_and_fused_matmul_as_onnxruntime_computes(m, k, n, compiled_panels):
    rng = np.random.default_rng(m * 1000003 + k * 1009 + n)
    host = host_sgemm()
    for batch, trans_a, trans_b, constant, alpha in [((), 0, 0, 0, 1.0), ((), 0, 0, 1, 1.0), ((3,), 0, 0, 0, 1.0), ((2, 3), 0, 1, 0, 1.0),
                                                    ((), 1, 0, 1, 0.125), ((3,), 1, 1, 0, 1.0), ((3,), 0, 1, 1, 0.5)]:
        a = _data(rng, (*batch, k, m) if trans_a else (*batch, m, k))
        b = _data(rng, (n, k) if trans_b else (k, n))
        if not constant:
            b = np.broadcast_to(b, (*batch, *b.shape)).copy()
        if trans_a or trans_b or alpha != 1.0:
            node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", transA=trans_a, transB=trans_b, alpha=alpha)
        else:
            node = helper.make_node("MatMul", ["a", "b"], ["y"])
        expected = _onnxruntime(node, {"a": a} if constant else {"a": a, "b": b}, {"b": b} if constant else {})
        call = GemmCall(bool(trans_a), bool(trans_b), alpha, 0.0, packed=bool(constant))
        got = matmul(a, b, call, host, compiled=compiled_panels)
        assert _same_bits(got, expected), f"batch {batch}, transA {trans_a}, transB {trans_b}, constant B {constant}, alpha {alpha}"


@pytest.mark.parametrize("compiled_panels", BUILDS)
@pytest.mark.parametrize("m,k,n", [(1, 300, 40), (37, 513, 20), (64, 200, 300)])
def test_gemm_with_c_as_onnxruntime_computes(m, k, n, compiled_panels):
    """C starts the output (broadcast), times beta first where beta is neither 0 nor 1."""
    rng = np.random.default_rng(k)
    host = host_sgemm()
    for c_shape, alpha, beta, trans_b, constant in [((n,), 1.0, 1.0, 0, 0), ((m, n), 1.0, 0.5, 1, 1), ((m, 1), 2.0, 1.0, 0, 1), ((1, n), 1.0, 0.0, 1, 0)]:
        a, c = _data(rng, (m, k)), _data(rng, c_shape)
        b = _data(rng, (n, k) if trans_b else (k, n))
        node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=alpha, beta=beta, transB=trans_b)
        feeds = {"a": a, "c": c} if constant else {"a": a, "b": b, "c": c}
        expected = _onnxruntime(node, feeds, {"b": b} if constant else {})
        call = GemmCall(False, bool(trans_b), alpha, beta, packed=bool(constant))
        start = np.broadcast_to(c, (m, n))[None] if beta != 0.0 else None
        got = sgemm_batch(a[None], (b.T if trans_b else b)[None], call, host, start, compiled=compiled_panels)[0]
        assert _same_bits(got, expected), f"C {c_shape}, alpha {alpha}, beta {beta}, transB {trans_b}, constant B {constant}"


@pytest.mark.parametrize("compiled_panels", BUILDS)
def test_each_kernel_choice_changes_the_bits(compiled_panels):
    """The cases above can tell the kernels apart: fused or not, M=1 kernels or not, one thread or
    two give other bits on the same data (so matching onnxruntime means matching its choice)."""
    rng = np.random.default_rng(7)
    hosts = [SgemmHost(fused, m1, threads) for fused in (False, True) for m1 in (False, True) for threads in (1, 2)]
    a, b = _data(rng, (1, 1, 300)), _data(rng, (1, 300, 40))
    by_m1 = {host.m1: sgemm_batch(a, b, GemmCall(), host, compiled=compiled_panels).tobytes() for host in hosts if not host.fused}
    a, b = _data(rng, (1, 37, 513)), _data(rng, (1, 513, 20))
    by_fused = {host.fused: sgemm_batch(a, b, GemmCall(), host, compiled=compiled_panels).tobytes() for host in hosts}
    a, b = _data(rng, (1, 2, 20000)), _data(rng, (1, 20000, 2))  # 80,000 multiply-adds: two threads
    by_threads = {host.threads: sgemm_batch(a, b, GemmCall(), host, compiled=compiled_panels).tobytes() for host in hosts if host.m1}
    assert len(by_m1) == len(by_fused) == len(by_threads) == 2
    assert len(set(by_m1.values())) == len(set(by_fused.values())) == len(set(by_threads.values())) == 2
