"""compare's "DirectML device precision" cause: a float output within its operator's envelope
(D3D11.3's bounds, WebNN's tolerances) of dml_ep's "directml" value, against hand-made references;
and the "graph" cause of a float16 SkipLayerNormalization's rounded sum, against onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.conformance.causes import SKIP_SUM_ROUNDING, ulp_distance
from dml_ep.conformance.compare import compare_model
from dml_ep.core.enums import DML_MATRIX_TRANSFORM
from dml_ep.operators.gemm import DML_GEMM_OPERATOR_DESC, device_precision
from dml_ep.operators.importing import tensor
from dml_ep.ort.reference import cpu_session
from dml_ep.reports.text import format_report
from onnx_builders import Feed, single_node_model

F32 = np.float32


def sqrt_case():
    x = np.random.default_rng(3).uniform(0.5, 100, (4, 32)).astype(F32)
    model, feeds = single_node_model("Sqrt", [Feed(x)], np.float32, 2)
    return model, feeds, np.sqrt(x)  # IEEE's correctly rounded square root: dml_ep's "directml" value


def test_one_ulp_off_is_device_precision_two_is_other():
    """Elements 1 ULP off the correctly rounded sqrt are within D3D's and WebNN's 1 ULP; one 2 ULP off is not."""
    model, feeds, exact = sqrt_case()
    saved = exact.copy()
    saved.flat[:10] = np.nextafter(saved.flat[:10], F32(np.inf))
    saved.flat[10:15] = np.nextafter(saved.flat[10:15], F32(0))
    saved.flat[20] = np.nextafter(np.nextafter(saved.flat[20], F32(np.inf)), F32(np.inf))
    (output,) = [o.name for o in model.graph.output]
    report = compare_model(model, feeds, reference="ort", expected_outputs={output: saved}, per_node=True)
    (node,) = report.nodes
    assert node.causes == {"DirectML device precision": 15, "other": 1}
    assert node.precision_rule.startswith("D3D11.3 §3.1.3.2") and "WebNN" in node.precision_rule
    assert node.to_dict()["precision_rule"] == node.precision_rule


def test_the_rule_is_in_the_text_report():
    model, feeds, exact = sqrt_case()
    saved = np.nextafter(exact, F32(np.inf))
    (output,) = [o.name for o in model.graph.output]
    report = compare_model(model, feeds, reference="ort", expected_outputs={output: saved}, per_node=True)
    assert report.nodes[0].cause == "DirectML device precision"
    assert "DirectML device precision: D3D11.3 §3.1.3.2" in report.nodes[0].cause_text
    assert report.within_tolerance_cause_counts == {"DirectML device precision": 1}
    assert "DirectML device precision: D3D11.3" in format_report(report, per_node=True)


def test_ulp_distance_counts_bit_patterns_across_zero():
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    a = np.array([1.0, 0.0, -0.0, tiny, np.nan, 1.0], F32)
    b = np.array([np.nextafter(F32(1), F32(2)), -0.0, tiny, -tiny, 1.0, 1.0], F32)
    assert ulp_distance(a, b).tolist() == [1, 0, 1, 2, np.inf, 0]
    half = np.array([1.0], np.float16)
    assert ulp_distance(half, np.nextafter(half, np.float16(2))).tolist() == [1]


@pytest.mark.parametrize("alpha, beta, with_c, ulp", [(1.0, 0.0, False, 64), (0.5, 0.0, False, 65), (1.0, 1.0, True, 65), (2.0, 0.5, True, 67)])
def test_gemm_envelope_is_webnns_2k(alpha, beta, with_c, ulp):
    """wpt's getGemmPrecisionTolerance: 2K, +1 for alpha != 1, +1 for C with beta != 0, +1 for beta != 1."""
    a, b, out = tensor(F32, (1, 1, 3, 32)), tensor(F32, (1, 1, 5, 32)), tensor(F32, (1, 1, 3, 5))
    desc = DML_GEMM_OPERATOR_DESC(a, b, out if with_c else None, out, DML_MATRIX_TRANSFORM.NONE, DML_MATRIX_TRANSFORM.TRANSPOSE, alpha, beta)
    precision = device_precision(desc)
    assert precision.ulp32 == precision.ulp16 == ulp and "K = 32" in precision.rule


def float16_skip_norm(hidden=256, seed=1):
    """One float16 SkipSimplifiedLayerNormalization [1, 6, hidden]: input and skip fed, gamma an initializer."""
    rng = np.random.default_rng(seed)
    feeds = {name: (rng.standard_normal((1, 6, hidden)) * 2 + 0.3).astype(np.float16) for name in ("x", "skip")}
    node = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["y"], domain="com.microsoft", epsilon=1e-6)
    graph = helper.make_graph([node], "skip", [helper.make_tensor_value_info(n, TensorProto.FLOAT16, (1, 6, hidden)) for n in feeds],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
                              [numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float16), "gamma")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]), feeds


@pytest.mark.host_sensitive
def test_float16_skip_sum_rounding_is_named_as_the_real_eps_graph():
    """"directml": the graph's float16 sum is "graph", with the text naming it; "onnxruntime": bit for bit."""
    model, feeds = float16_skip_norm(hidden=2048)
    report = compare_model(model, feeds, reference="ort", per_node=True)
    node = next(n for n in report.nodes if n.isolated is not None and n.isolated.differing)
    assert node.cause == "graph" and node.graph == SKIP_SUM_ROUNDING
    session = cpu_session(model, threads=1)  # the elements onnxruntime gives otherwise for the graph's float16 sum are "graph"
    expected = session.run(None, feeds)[0]
    summed = (feeds["x"].astype(np.float32) + feeds["skip"].astype(np.float32)).astype(np.float16)
    on_rounded = session.run(None, {"x": summed, "skip": np.zeros_like(summed)})[0]
    differing = dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[0] != expected
    assert node.causes == {"float32 rounding": np.count_nonzero(differing & (on_rounded == expected)),
                           "graph": np.count_nonzero(differing & (on_rounded != expected))}
    assert node.causes["float32 rounding"] > 0
    assert "rounds input + skip to float16" in format_report(report, per_node=True)
    assert compare_model(model, feeds, reference="ort", arithmetic="onnxruntime").ok
