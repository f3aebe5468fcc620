"""The graph the real EP runs: onnxruntime's rewrites for DML nodes, per release, before dml_ep plans.

The reference is onnxruntime's own optimizer (``optimized_model_filepath``): where a rewrite runs
for CPU nodes too, dml_ep's graph for the CPU provider must equal what onnxruntime's CPU EP makes
with the CPU-only transformers after it turned off.
"""

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep

from dml_ep.passes import CPU, DML, RELEASES, EditableGraph, matmul_integer_to_float_fusion
from dml_ep.planning.planner import Planner, plan_model
from onnx_builders import K, N, dynamic_quantize_matmul


def dynamic_matmul(bias_shape=(N,), a_shape=("batch", 4, K), b_input=False, bias_first=False, cast_readers=1, dtype=TensorProto.FLOAT):
    """quantize_dynamic's MatMul: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(., Mul(a_scale, b_scale)) [-> Add bias]."""
    rng = np.random.default_rng(0)
    float_type = helper.tensor_dtype_to_np_dtype(dtype)
    initializers = [numpy_helper.from_array(np.array(0.05, float_type), "b_scale"),
                    numpy_helper.from_array(np.array(3, np.int8), "b_zp")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a_shape))]
    if b_input:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.INT8, [K, N]))
    else:
        initializers.append(numpy_helper.from_array(rng.integers(-128, 128, (K, N), dtype=np.int8), "b"))
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["a", "a_scale", "a_zp"]),
        helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"], ["acc"], name="mm"),
        helper.make_node("Cast", ["acc"], ["acc_f"], to=dtype),
        helper.make_node("Mul", ["a_scale" if dtype == TensorProto.FLOAT else "a_scale_f", "b_scale"], ["scale"]),
        helper.make_node("Mul", ["acc_f", "scale"], ["y0"]),
    ]
    if dtype != TensorProto.FLOAT:
        nodes.insert(1, helper.make_node("Cast", ["a_scale"], ["a_scale_f"], to=dtype))
    outputs = ["y0"]
    if bias_shape is not None:
        initializers.append(numpy_helper.from_array(rng.standard_normal(bias_shape).astype(float_type), "bias"))
        nodes.append(helper.make_node("Add", ["bias", "y0"] if bias_first else ["y0", "bias"], ["y"]))
        outputs = ["y"]
    if cast_readers > 1:
        nodes.append(helper.make_node("Identity", ["acc_f"], ["acc_copy"]))
        outputs.append("acc_copy")
    graph = helper.make_graph(nodes, "dynamic_matmul", inputs, [helper.make_tensor_value_info(o, dtype, None) for o in outputs],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def onnxruntime_optimized(model, disabled=(), level=ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED) -> onnx.ModelProto:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 4
    options.optimized_model_filepath = os.path.join(pytest.tmp_dir, "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled))
    return onnx.load(options.optimized_model_filepath)


@pytest.fixture(autouse=True)
def _tmp(tmp_path):
    pytest.tmp_dir = str(tmp_path)


def signature(nodes) -> list:
    """Nodes by op and wiring, names left out (onnxruntime names a fused node as it likes)."""
    return sorted((n.domain or "", n.op_type, tuple(n.input), tuple(n.output)) for n in nodes)


CASES = {
    "bias [N]": {},
    "bias [1, N]": {"bias_shape": (1, N)},
    "no bias": {"bias_shape": None},
    "bias [1, 1, N]": {"bias_shape": (1, 1, N)},
    "bias [1] stays an Add": {"bias_shape": (1,)},
    "bias first": {"bias_first": True},
    "B fed at run time": {"b_input": True},
    "Cast read twice: no fusion": {"cast_readers": 2},
}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", CASES)
def test_matmul_integer_to_float_fusion_for_cpu_nodes_is_onnxruntime_s(case):
    model = dynamic_matmul(**CASES[case])
    graph = EditableGraph(model)
    matmul_integer_to_float_fusion(graph, RELEASES["1.24+"], CPU, graph.loaded)
    expected = onnxruntime_optimized(model, disabled=["DynamicQuantizeMatMulFusion"])
    assert signature(graph.nodes) == signature(expected.graph.node)


def test_matmul_integer_to_float_fusion_leaves_float16_to_dml_nodes():
    """onnxruntime fuses a float16 chain for DML nodes only (matmul_integer_to_float.cc)."""
    model = dynamic_matmul(dtype=TensorProto.FLOAT16)
    on_cpu = EditableGraph(model)
    assert not matmul_integer_to_float_fusion(on_cpu, RELEASES["1.24+"], CPU, on_cpu.loaded)
    on_dml = EditableGraph(model)
    assert matmul_integer_to_float_fusion(on_dml, RELEASES["1.24+"], DML, on_dml.loaded)


@pytest.mark.parametrize("release, fused", [("1.17", False), ("1.18-1.19", True), ("1.24+", True)])
def test_dml_nodes_get_matmul_integer_to_float_from_1_18(release, fused):
    ops = {n.op_type for n in Planner(dynamic_matmul(), qdq_rules=release).nodes}
    assert ("MatMulIntegerToFloat" in ops) == fused
    assert ("MatMulInteger" in ops) != fused


@pytest.mark.parametrize("release, fused", [("1.20", True), ("1.21-1.23", False), ("1.24+", False)])
def test_a_matmul_over_4_gib_as_floats_stays_integer_on_dml_from_1_21(release, fused):
    """(65536 * 16384 + 16384 * 6) elements * 4 bytes > UINT32_MAX: planned, never run."""
    model = dynamic_matmul(a_shape=(65536, 16384))
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 16384
    b = next(i for i in model.graph.initializer if i.name == "b")
    b.CopyFrom(numpy_helper.from_array(np.zeros((16384, N), np.int8), "b"))
    planner = Planner(model, qdq_rules=release)
    ops = {n.op_type for n in planner.nodes}
    assert ("MatMulIntegerToFloat" in ops) == fused
    if not fused:
        (matmul,) = [n for n, o in zip(planner.nodes, planner.origins) if n.op_type == "MatMulInteger"]
        assert "4 GiB" in planner.origins[planner.nodes.index(matmul)].note


@pytest.mark.host_sensitive
def test_dml_nodes_never_get_dynamic_quantize_matmul():
    """DynamicQuantizeMatMulFusion is for CPU and ACL nodes only: the CPU EP's graph has it, the DML EP's not."""
    model = dynamic_matmul()
    assert "DynamicQuantizeMatMul" in {n.op_type for n in onnxruntime_optimized(model).graph.node}
    planner = Planner(model)
    assert [n.op_type for n in planner.nodes] == ["DynamicQuantizeLinear", "MatMulIntegerToFloat"]
    assert planner.origins[1].rule == "MatMulIntegerToFloatFusion"
    assert sorted(n.op_type for n in planner.origins[1].nodes) == ["Add", "Cast", "MatMulInteger", "Mul", "Mul"]


def layer_norm_gelu(simplified=False):
    """x -> LayerNorm (or RMS norm) written out in primitives -> erf Gelu written out."""
    h = 16
    c = numpy_helper.from_array
    initializers = [c(np.array(2.0, np.float32), "two"), c(np.array(1e-5, np.float32), "eps"), c(np.ones(h, np.float32), "gamma"),
                    c(np.zeros(h, np.float32), "beta"), c(np.array(1.4142135, np.float32), "sqrt2"), c(np.array(1.0, np.float32), "one"),
                    c(np.array(0.5, np.float32), "half"), c(np.array([-1], np.int64), "axes")]
    if simplified:
        norm = [helper.make_node("Pow", ["x", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
                helper.make_node("Add", ["var", "eps"], ["var_eps"]), helper.make_node("Sqrt", ["var_eps"], ["std"]),
                helper.make_node("Div", ["x", "std"], ["normed"]), helper.make_node("Mul", ["normed", "gamma"], ["n"])]
    else:
        norm = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]), helper.make_node("Sub", ["x", "mean"], ["d"]),
                helper.make_node("Pow", ["d", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
                helper.make_node("Add", ["var", "eps"], ["var_eps"]), helper.make_node("Sqrt", ["var_eps"], ["std"]),
                helper.make_node("Div", ["d", "std"], ["normed"]), helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
                helper.make_node("Add", ["scaled", "beta"], ["n"])]
    gelu = [helper.make_node("Div", ["n", "sqrt2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
            helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", ["n", "g2"], ["g3"]),
            helper.make_node("Mul", ["g3", "half"], ["y"])]
    graph = helper.make_graph(norm + gelu, "norm_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.host_sensitive
def test_float_fusions_for_dml_nodes_are_onnxruntime_s():
    """LayerNormFusion and GeluFusion run for DML nodes: the graph is onnxruntime's own."""
    model = layer_norm_gelu()
    planner = Planner(model)
    assert signature(planner.nodes) == signature(onnxruntime_optimized(model).graph.node)
    assert [n.op_type for n in planner.nodes] == ["LayerNormalization", "Gelu"]
    assert [o.rule for o in planner.origins] == ["LayerNormFusion", "GeluFusion"]
    assert len(planner.origins[0].nodes) == 9 and len(planner.origins[1].nodes) == 5


@pytest.mark.host_sensitive
def test_simplified_layer_norm_fusion_is_for_cpu_nodes_only():
    """SimplifiedLayerNormFusion's provider list lacks the DML EP: a T5-style RMS norm stays as
    written on DML, while onnxruntime's CPU EP fuses it."""
    model = layer_norm_gelu(simplified=True)
    assert "SimplifiedLayerNormalization" in {n.op_type for n in onnxruntime_optimized(model).graph.node}
    ops = [n.op_type for n in Planner(model).nodes]
    assert "SimplifiedLayerNormalization" not in ops and "ReduceMean" in ops


@pytest.mark.host_sensitive
def test_the_cpu_transpose_optimizer_stays_off_for_dml_nodes():
    """Transpose -> layer norm over the channels (gamma, beta [C]) -> Transpose back, as VITS/Piper
    TTS encoders write it. onnxruntime's Level-2 TransposeOptimizer (for CPU nodes only) cancels the
    transposes by reshaping gamma and beta in place, under the same names: a graph read back with
    it on kept the old ones, and every command failed on a valid model (a Piper voice)."""
    model = layer_norm_gelu()
    graph = model.graph
    graph.input[0].type.tensor_type.shape.dim[1].dim_param, graph.input[0].type.tensor_type.shape.dim[2].dim_value = "", 3
    graph.input[0].type.tensor_type.shape.dim[1].dim_value = 16  # x [batch, C=16, T=3], its channels last inside
    graph.node.insert(0, helper.make_node("Transpose", ["x_nct"], ["x"], perm=[0, 2, 1]))
    graph.input[0].name = "x_nct"
    graph.node[-1].output[0] = "y_ntc"
    graph.node.append(helper.make_node("Transpose", ["y_ntc"], ["y"], perm=[0, 2, 1]))
    gamma = next(i for i in graph.initializer if i.name == "gamma")
    gamma.CopyFrom(numpy_helper.from_array(np.linspace(0.5, 2, 16, dtype=np.float32), "gamma"))
    assert "Transpose" not in {n.op_type for n in onnxruntime_optimized(model).graph.node}  # on CPU nodes it goes
    assert [n.op_type for n in Planner(model).nodes] == ["Transpose", "LayerNormalization", "Gelu", "Transpose"]
    x = np.random.default_rng(0).standard_normal((2, 16, 3)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x_nct": x})[0]
    np.testing.assert_allclose(dml_ep.InferenceSession(model).run(None, {"x_nct": x})[0], expected, rtol=1e-6, atol=1e-6)


def test_inspect_names_the_rewrite_behind_each_node():
    plan = plan_model(layer_norm_gelu(), input_shapes={"x": (2, 3, 16)})
    assert [(e.node.op_type, e.origin.rule) for e in plan.entries] == [("LayerNormalization", "LayerNormFusion"), ("Gelu", "GeluFusion")]


@pytest.mark.host_sensitive
def test_optimization_level_1_runs_level_1_fusions_only():
    """ORT_ENABLE_BASIC: Level 1 (whose GeluFusion and LayerNormFusion make ONNX ops only, from
    opsets 20 and 17); MatMulIntegerToFloatFusion is Level 2."""
    for opset in (13, 17):
        model = layer_norm_gelu()
        model.opset_import[0].version = opset
        expected = onnxruntime_optimized(model, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
        assert signature(Planner(model, optimization_level=1).nodes) == signature(expected.graph.node)
    assert "LayerNormalization" in {n.op_type for n in expected.graph.node}
    assert "MatMulIntegerToFloat" not in {n.op_type for n in Planner(dynamic_matmul(), optimization_level=1).nodes}


@pytest.mark.host_sensitive
def test_dynamic_quantize_matmul_is_planned_as_the_two_directml_operators_the_dml_ep_builds():
    """DmlOperatorDynamicQuantizeMatMul.cpp: DYNAMIC_QUANTIZE_LINEAR to B's type, then
    MATRIX_MULTIPLY_INTEGER_TO_FLOAT. With uint8 weights that is onnxruntime's CPU arithmetic bit for bit."""
    import dml_ep
    from dml_ep.operators.nodes import DmlNode
    from dml_ep.ort.reference import cpu_session

    model = dynamic_quantize_matmul(np.uint8)
    x = np.random.default_rng(2).standard_normal((3, 4, K)).astype(np.float32)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], cpu_session(model).run(None, {"x": x})[0])
    entries = session.executor.plan.entries
    assert [e.operator for e in entries] == ["DML_OPERATOR_DYNAMIC_QUANTIZE_LINEAR", "DML_OPERATOR_MATRIX_MULTIPLY_INTEGER_TO_FLOAT"]
    assert all(isinstance(e, DmlNode) and e.origin.rule == "DmlOperatorDynamicQuantizeMatMul" and e.origin.nodes[0].name == "dqmm"
               for e in entries)
    plan = plan_model(model)  # typed before any run too: nothing pending
    assert not plan.pending and len(plan.dml_nodes) == 2


@pytest.mark.host_sensitive
def test_dynamic_quantize_matmul_quantizes_a_to_int8_for_int8_weights_as_the_dml_ep_does():
    """The DML EP quantizes A to B's type (int8 here); onnxruntime's CPU kernel to uint8: the codes
    differ, by 128 as the zero points do (the same range over -128..127 as over 0..255, the same
    rounding), so the integer sums and the float outputs are the same, bit for bit (against
    ort-exact: plain "ort" also saturates its u8s8 pairs on AVX2 CPUs without VNNI, measured 2.47
    off on one of 48 outputs under QEMU's Haswell; ort-exact 0 there, under Nehalem and natively)."""
    import dml_ep
    from dml_ep.ort.reference import cpu_session

    model = dynamic_quantize_matmul(np.int8)
    x = np.random.default_rng(3).standard_normal((2, 4, K)).astype(np.float32)
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    values = session.executor.run({"x": x}, keep_all=True)
    codes = values["y.a_quantized"]
    scale, zero_point = float(values["y.a_scale"].reshape(-1)[0]), int(values["y.a_zero_point"].reshape(-1)[0])
    assert codes.dtype == np.int8
    low, high = min(x.min(), 0), max(x.max(), 0)  # the range widened to 0, spread over -128..127
    assert scale == np.float32(np.float32(high - low) / np.float32(255))
    assert zero_point == int(np.rint(np.clip(np.float32(-128) - np.float32(low / np.float32(scale)), -128, 127)))
    np.testing.assert_array_equal(values["y"], cpu_session(model, "ort-exact").run(None, {"x": x})[0], strict=True)
