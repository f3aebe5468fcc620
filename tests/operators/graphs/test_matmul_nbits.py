"""com.microsoft MatMulNBits as the DML EP builds it (DEQUANTIZE -> GEMM, ``operators/matmul_nbits``),
against onnxruntime's CPU MatMulNBits.

References: onnxruntime's weight (its MatMulNBits times an identity matrix at accuracy level 0
gives each dequantized weight once, a product by 1 plus zeros: exact); the exact product of A and
that weight in float64, which DirectML's arithmetic rounds once; onnxruntime's own outputs, which
lie within a float32 GEMM's rounding bound of that product (level 0) or of the product with A
quantized to int8 per block (level 4), the causes compare names.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.core.errors import RealEpError
from dml_ep.numerics.kernels.matmul_nbits import int8_blocks
from dml_ep.numerics.kernels.mlas_sgemm import host_runs_sqnbit_fp32
from dml_ep.numerics.kernels.mlas_sqnbit_m1 import host_m1_kernel
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
from onnx_builders import matmul_nbits, with_accuracy_level
from operator_cases import host_quantizes_activations, rows

pytestmark = pytest.mark.host_sensitive  # the CPU's MatMulNBits kernels are MLAS's per host: CompInt8 needs AVX2 or later

F16, F32 = np.float16, np.float32


def onnxruntime_weight(model) -> np.ndarray:
    """onnxruntime's dequantized weight {K, N}: its MatMulNBits (level 0) of an identity A."""
    k = next(a.i for a in model.graph.node[0].attribute if a.name == "K")
    level0 = with_accuracy_level(model, 0)
    a = model.graph.input[0].type.tensor_type
    identity = np.eye(k, dtype=helper.tensor_dtype_to_np_dtype(a.elem_type)).reshape((1,) * (len(a.shape.dim) - 2) + (k, k))
    return cpu_session(level0).run(None, {"a": identity})[0].astype(np.float64).reshape(k, -1)


CASES = [  # K, N, block_size, bits, zero points
    (64, 8, 32, 4, True), (64, 8, 32, 4, False), (96, 5, 32, 4, True), (128, 7, 128, 4, True), (64, 6, 16, 8, True),
    (64, 6, 32, 8, False), (256, 3, 64, 4, True),
]


@pytest.mark.parametrize("k, n, block_size, bits, zero_points", CASES)
def test_directml_rounds_the_exact_product_of_onnxruntimes_weight_once(k, n, block_size, bits, zero_points):
    """DEQUANTIZE reads B, scales and zero points (odd block counts: the zero points' row stride)
    as onnxruntime does, and GEMM gives A x W rounded once: bit for bit the float64 product."""
    model = matmul_nbits(k, n, block_size, bits, zero_points)
    a = rows(model, 5)
    weight = onnxruntime_weight(model)
    session = dml_ep.InferenceSession(model.SerializeToString())
    y = session.run(None, {"a": a})[0]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, (a.astype(np.float64) @ weight).astype(np.float32))
    plan = session.plan
    assert [e.operator for e in plan.entries] == ["DML_OPERATOR_DEQUANTIZE", "DML_OPERATOR_GEMM"]
    assert plan.summary()["dml"]["macs"] == 5 * n * k


@pytest.mark.parametrize("level", [0, 4])
def test_onnxruntime_is_the_exact_product_within_float32_rounding_of_what_it_computes(level):
    if level == 4 and not host_quantizes_activations():
        level = 0  # this host's MLAS computes level 4 as level 0
    """The CPU's value (level 0: A x W; level 4: int8 A per block x W, CompInt8) lies within a
    float32 GEMM's bound of the exact product dml_ep's causes take it for: so the causes hold."""
    model = matmul_nbits(256, 16, 32, accuracy_level=level)
    a = rows(model, 8)
    expected = cpu_session(model).run(None, {"a": a})[0].astype(np.float64)
    weight = onnxruntime_weight(model)
    cpu_a = int8_blocks(a, 32) if level == 4 else a.astype(np.float64)
    bound = 258 * 2.0**-24 * (np.abs(cpu_a) @ np.abs(weight)) + np.spacing(np.abs(expected).astype(F32))
    assert (np.abs(expected - cpu_a @ weight) <= bound).all()
    if level == 4:  # and the int8 activations move it off the float product
        assert (np.abs(expected - a.astype(np.float64) @ weight) > bound).any()


@pytest.mark.parametrize("engine", ["onnxruntime", "numpy"])
def test_the_onnxruntime_arithmetic_gives_the_cpus_compfp32_bits(engine):
    """4 bits at accuracy levels 0 to 3: the CPU (SQ4BitGemm_CompFp32) takes A's rows in parts of
    128, each against the weight dequantized to float32, in MLAS's SGEMM kernel over all of K at
    once; dml_ep's onnxruntime arithmetic gives its bits, for float16 nodes too. A part of one row (the 129th) runs MLAS's
    M=1 kernel of the host (AVX-512 or AVX2: its lanes and folds, N 17 leaving one column after the fours), also to the bit.
    A host whose onnxruntime has no CompFp32 kernel (before AVX2: it dequantizes B and runs SGEMM) gets a float32
    GEMM in numpy's order: within float32 rounding."""
    exact_rows = (129 if host_m1_kernel() else 128) if host_runs_sqnbit_fp32() else 0
    for k, n, block_size, zero_points, float_type in [(384, 40, 32, True, F32), (256, 17, 128, False, F32), (64, 8, 16, True, F32),
                                                      (256, 24, 32, False, F16)]:
        # float16: the same in float32 (A converted, the weight float32: its float16 scales times codes), C rounded to float16
        model = matmul_nbits(k, n, block_size, 4, zero_points, float_type=float_type, accuracy_level=1)
        a = rows(model, 129)
        expected = cpu_session(model).run(None, {"a": a})[0]
        session = dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine=engine)
        y = session.run(None, {"a": a})[0]
        assert session.plan.entries[-1].operator == "DML_OPERATOR_GEMM"
        assert y.dtype == expected.dtype and np.array_equal(y[:exact_rows], expected[:exact_rows]), (k, n, block_size, float_type)
        np.testing.assert_allclose(y[exact_rows:], expected[exact_rows:], rtol=1e-3 if float_type == F16 else 1e-5, atol=1e-5)


@pytest.mark.parametrize("level", [0, 4])
def test_compare_names_the_cause(level):
    cause = "int8 activations" if level == 4 and host_quantizes_activations() else "float summation order"
    model = matmul_nbits(256, 16, 32, accuracy_level=level)
    report = compare_model(model, {"a": rows(model, 8)}, per_node=True)
    gemm = [node for node in report.nodes if node.op_type == "DmlGemm"][0]
    # where onnxruntime sums as the float32 alternative does (numpy's BLAS on some hosts), its bits are "float32 rounding"
    float_causes = {"float summation order", "float32 rounding"}
    assert (gemm.cause == cause or {gemm.cause, cause} <= float_causes) and set(gemm.causes) <= {cause} | float_causes


def test_float16_weights_are_float16_on_directml():
    """The DEQUANTIZE output is float16 (A's type): the weights round to float16 before GEMM, which
    onnxruntime's CPU kernel (float32 dequantization) does not; compare says so."""
    model = matmul_nbits(256, 16, 32, float_type=F16)
    a = rows(model, 8)
    weight16 = onnxruntime_weight(model).astype(F16).astype(np.float64)  # the float32 weights rounded to float16
    y = dml_ep.InferenceSession(model.SerializeToString()).run(None, {"a": a})[0]
    assert y.dtype == F16
    np.testing.assert_array_equal(y, (a.astype(np.float64) @ weight16).astype(F16))
    report = compare_model(model, {"a": a}, per_node=True)
    gemm = [node for node in report.nodes if node.op_type == "DmlGemm"][0]
    assert "float16 weights" in gemm.causes


def test_a_batched_a_reads_one_weight():
    model = matmul_nbits(64, 8, 32, a_shape=["b", "m", 64])
    a = np.random.default_rng(2).standard_normal((2, 3, 64)).astype(F32)
    y = dml_ep.InferenceSession(model.SerializeToString()).run(None, {"a": a})[0]
    np.testing.assert_array_equal(y, (a.astype(np.float64) @ onnxruntime_weight(model)).astype(F32))


def test_where_the_real_ep_runs_it_on_the_cpu_or_fails():
    """The support query (K a whole number of blocks, bits 4 or 8) sends it to the CPU; a bias,
    which the query does not look at, fails the real EP's kernel; 8-bit zero points of an odd block
    count are misread by the real EP's stride, which dml_ep does not model."""
    partial = plan_model(matmul_nbits(80, 4, 32), input_shapes={"a": (2, 80)})
    assert [type(e) for e in partial.entries] == [FallbackNode] and "not a multiple of block_size" in partial.entries[0].reason
    with pytest.raises(RealEpError, match="no g_idx or bias"):
        plan_model(matmul_nbits(64, 4, 32, bias=True), input_shapes={"a": (2, 64)})
    odd = plan_model(matmul_nbits(96, 4, 32, bits=8), input_shapes={"a": (2, 96)})
    assert any(isinstance(e, FallbackNode) and "misread" in e.reason for e in odd.entries)
    even = plan_model(matmul_nbits(64, 4, 32, bits=8), input_shapes={"a": (2, 64)})
    assert all(isinstance(e, DmlNode) for e in even.entries)


def test_int4_qdq_matmul_runs_as_matmul_nbits_on_directml():
    """A blocked int4 DQ -> MatMul (as MatMulNBitsQuantizer's QDQ format writes it) becomes
    MatMulNBits (onnxruntime 1.20+) and runs as DEQUANTIZE -> GEMM; against onnxruntime, which runs it
    at accuracy level 4 (session.qdq_matmulnbits_accuracy_level's default), every difference is its
    int8 activations or float rounding."""
    rng = np.random.default_rng(3)
    import ml_dtypes
    w = rng.integers(-8, 8, (128, 16)).astype(ml_dtypes.int4)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array((rng.random((4, 16)) * 0.1 + 0.01).astype(F32), "s")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wd"], axis=0, block_size=32), helper.make_node("MatMul", ["a", "wd"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 128])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    report = compare_model(model, {"a": rng.standard_normal((4, 128)).astype(F32)}, per_node=True)
    assert [n.op_type for n in report.nodes] == ["DmlDequantize", "DmlGemm"]
    assert set(report.nodes[1].causes) <= {"int8 activations", "float summation order", "float32 rounding"}
    assert ("int8 activations" in report.nodes[1].causes) == host_quantizes_activations()


@pytest.mark.parametrize("block_size", [32, 128])
def test_the_onnxruntime_arithmetic_quantizes_activations_at_level_4_as_the_cpu_does(block_size):
    """Level 4 on a host with CompInt8: A quantized to int8 per block as MLAS does, then the product
    rounded once: within a float32 GEMM's bound of onnxruntime's value, where the float product
    is not (the test above); compare then names only the summation order. Without CompInt8 the
    CPU computes level 4 as level 0, and so does dml_ep."""
    from dml_ep.numerics.kernels.matmul_nbits import host_runs_sqnbit_int8

    model = matmul_nbits(256, 16, block_size, accuracy_level=4)
    a = rows(model, 8)
    expected = cpu_session(model).run(None, {"a": a})[0].astype(np.float64)
    y = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, {"a": a})[0].astype(np.float64)
    weight = onnxruntime_weight(model)
    cpu_a = int8_blocks(a, block_size) if host_runs_sqnbit_int8() else a.astype(np.float64)
    bound = 258 * 2.0**-24 * (np.abs(cpu_a) @ np.abs(weight)) + np.spacing(np.abs(expected).astype(F32))
    assert (np.abs(y - expected) <= 2 * bound).all()  # both within a bound of the same product
    assert host_runs_sqnbit_int8() == host_quantizes_activations()
    report = compare_model(model, {"a": a}, arithmetic="onnxruntime", per_node=True)
    gemm = [node for node in report.nodes if node.op_type == "DmlGemm"][0]
    assert set(gemm.causes) <= {"float summation order", "float32 rounding"}
