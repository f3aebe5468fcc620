"""The rewritten model (``dml_ep.reports.rewritten_model``: ``inspect --save-rewritten``, ``compare
--save-rewritten``, ``SessionOptions.optimized_model_filepath``), judged by onnxruntime.

For every shipped model and small QDQ and float models built here: onnx's checker passes; onnxruntime
loads it and runs it to the original model's outputs bit for bit (both with onnxruntime's default
optimizations: the rewrites are onnxruntime's own); run as written (optimizations off) it gives
dml_ep's own outputs in onnxruntime arithmetic, so the file is the graph dml_ep executes; and its
nodes are the plan's, each carrying the plan row's placement, operator, reason, rule and origin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.passes import DEFAULT_RELEASE
from dml_ep.passes.dml_fusion import DML_DOMAIN, FUSED_OP_TYPES
from dml_ep.planning.planner import Planner
from dml_ep.realep.placement import PLACEMENTS
from dml_ep.reports import rewritten_model as rm
from dml_ep.reports.node_table import plan_rows
from dml_ep.runtime.inputs import random_inputs
from onnx_builders import (K, S8, U8, add, binary_model, conv_model, dynamic_quantize_matmul, matmul_model, qlinear_concat,
                           qlinear_sigmoid)
from cli_runs import one_line_error, run_cli

MODELS = sorted((Path(__file__).resolve().parents[2] / "models").glob("*.onnx"))
ALL, NONE = ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL
UNFUSED_OP_TYPES = {fused: op for op, fused in FUSED_OP_TYPES.items()}


def ort_run(model: onnx.ModelProto, feeds: dict, level=ALL) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_same(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e, strict=True)


def with_output_shapes(model: onnx.ModelProto, feeds: dict) -> onnx.ModelProto:
    """The model with its outputs' shapes declared, as onnx's checker wants them (some models
    built for other tests leave them out)."""
    for output, value in zip(model.graph.output, ort_run(model, feeds)):
        shape = output.type.tensor_type.shape
        del shape.dim[:]
        for size in value.shape:
            shape.dim.add().dim_value = size
    onnx.checker.check_model(model)
    return model


def metadata(proto) -> dict[str, str]:
    return {p.key: p.value for p in proto.metadata_props}


def check_nodes(saved: onnx.ModelProto, plan) -> None:
    """The written nodes are the plan's in order, each with its row's metadata. A node of the DML
    EP's operator fusion is written as its op and activation (both marked FUSED, one plan entry);
    the parts of a DirectML graph as the node they split (PARTS names them, in order)."""
    entries, rows = plan.entries, plan_rows(plan)
    assert not plan.pending
    at = 0
    nodes = list(saved.graph.node)
    while nodes:
        node = nodes.pop(0)
        meta = metadata(node)
        assert meta[rm.FROM] and rm.PLACEMENT in meta, node.name
        if rm.PARTS in meta:
            parts = meta[rm.PARTS].split(" -> ")
            count = len(parts)
            assert [e.node.op_type for e in entries[at:at + count]] == parts
            assert entries[at].origin.whole is not None and node.op_type == entries[at].origin.whole.op_type
        else:
            count = 1
            if rm.FUSED in meta:
                fused = entries[at].node
                activation = nodes.pop(0)
                assert meta[rm.FUSED] == f"{DML_DOMAIN}:{fused.op_type}" and metadata(activation) == meta
                assert (node.op_type, activation.op_type, activation.output[0]) == (UNFUSED_OP_TYPES[fused.op_type], next(
                    a.s.decode() for a in fused.attribute if a.name == "fused_activation"), fused.output[0])
                assert activation.input[0] == node.output[0] and list(node.input) == list(fused.input)
            else:
                assert (node.op_type, node.domain, list(node.output)) == (entries[at].node.op_type, entries[at].node.domain,
                                                                          list(entries[at].node.output))
        group = rows[at:at + count]
        assert meta[rm.PLACEMENT] == max((r["placement"] for r in group), key=PLACEMENTS.index)
        assert meta.get(rm.OPERATOR) == (" -> ".join(r["runs_on"] for r in group if "desc" in r) or None)
        assert meta.get(rm.REASON) == ("; ".join(r["reason"] for r in group if "reason" in r) or None)
        assert meta.get(rm.RULE) == group[0]["rule"] and json.loads(meta[rm.FROM]) == group[0]["from"]
        at += count
    assert at == len(entries)


def check_saved(model: onnx.ModelProto, feeds: dict, *, same_as_dml_ep: bool = True, **options) -> onnx.ModelProto:
    """The rewritten model of a run of dml_ep on ``feeds``, checked as the module's docstring says."""
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime", **options)
    ours = session.run(None, feeds)
    saved = rm.rewritten_model(session.planner, session.plan)
    onnx.checker.check_model(saved)
    assert_same(ort_run(saved, feeds), ort_run(model, feeds))
    if same_as_dml_ep:
        assert_same(ort_run(saved, feeds, NONE), ours)
    check_nodes(saved, session.plan)
    assert not any(n.domain == DML_DOMAIN for n in saved.graph.node)
    imported = {o.domain for o in saved.opset_import}
    assert {n.domain for n in saved.graph.node} <= imported | {"ai.onnx"}
    assert [i.name for i in saved.graph.input] == [i.name for i in model.graph.input]
    assert [o.name for o in saved.graph.output] == [o.name for o in model.graph.output]
    assert metadata(saved)[rm.FEATURE_LEVEL] == str(session.plan.feature_level)
    return saved


@pytest.mark.host_sensitive
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_shipped_models(path):
    model = onnx.load(path)
    saved = check_saved(model, random_inputs(model, 3))
    assert metadata(saved)[rm.RELEASE] == DEFAULT_RELEASE


@pytest.mark.host_sensitive
@pytest.mark.parametrize("x_type, int8_allowed", [(U8, False), (S8, False), (S8, True)])
def test_qdq_conv(x_type, int8_allowed):
    """int8 activations fuse into QLinearConv only with session.qdqisint8allowed (the DML EP's
    rules); otherwise the DQ -> Conv -> Q stays, the float Conv on the real EP's DirectML."""
    model = conv_model(x_type=x_type)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdqisint8allowed", "1" if int8_allowed else "0")
    saved = check_saved(model, random_inputs(model, 1), sess_options=options)
    fused = x_type == U8 or int8_allowed
    assert ("QLinearConv" in [n.op_type for n in saved.graph.node]) == fused


@pytest.mark.host_sensitive
@pytest.mark.parametrize("release, written", [("1.24+", ["Conv", "Relu"]), ("1.17-1.19", ["QLinearConv"])])
def test_qdq_conv_relu(release, written):
    """A Relu before a Q of zero point 0 is redundant: by the 1.17-1.19 rules ReluQuantFusion drops
    it for DML nodes too and the group becomes a QLinearConv; by 1.24's the Relu stays, and so do the
    float Conv and Relu (which the real EP fuses into a DmlFusedConv that dml_ep does not model)."""
    model = conv_model(activation="Relu", q_zp=0)
    saved = check_saved(model, random_inputs(model, 2), qdq_rules=release)
    assert [n.op_type for n in saved.graph.node if n.op_type not in ("DequantizeLinear", "QuantizeLinear")] == written


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, activation, attributes", [("Add", "Relu", {}), ("Add", "LeakyRelu", {"alpha": 0.3}),
                                                             ("Sum", "Relu", {})])
def test_dml_operator_fusion_written_as_its_two_nodes(op_type, activation, attributes):
    """The DML EP's fused com.microsoft.dml node, which onnxruntime's CPU build cannot load, is
    written as the op and the activation with the model's value between them."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    model, feeds = add(a, b, op_type=op_type, activation=activation, **attributes)
    saved = check_saved(model, feeds)
    assert [(n.op_type, n.output[0]) for n in saved.graph.node] == [(op_type, "pre"), (activation, "y")]
    assert metadata(saved.graph.node[0])[rm.FUSED] == f"com.microsoft.dml:Dml{'FusedAdd' if op_type == 'Add' else 'FusedSum'}"


@pytest.mark.host_sensitive
def test_qdq_matmul_and_add():
    for model in (matmul_model(), binary_model()):
        saved = check_saved(model, random_inputs(model, 5))
        assert [n.op_type for n in saved.graph.node] in (["QLinearMatMul"], ["QLinearAdd"])


@pytest.mark.host_sensitive
def test_qdq_matmul_then_add_of_a_bias():
    """DQ -> MatMul -> Q -> DQ -> Add(DQ bias) -> Q: QLinearMatMul then QLinearAdd."""
    nodes, initializers = [], []

    def const(name, value):
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op_type, inputs, output, **attributes):
        nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    rng = np.random.default_rng(6)
    a = node("DequantizeLinear", ["a", const("a_s", np.float32(0.02)), const("a_z", np.uint8(3))], "a_dq")
    w = node("DequantizeLinear", [const("w", rng.integers(-128, 128, (8, 5)).astype(np.int8)), const("w_s", np.float32(0.01)),
                                  const("w_z", np.int8(0))], "w_dq")
    mm = node("QuantizeLinear", [node("MatMul", [a, w], "mm"), const("mm_s", np.float32(0.05)), const("mm_z", np.uint8(128))], "mm_q")
    mm_dq = node("DequantizeLinear", [mm, "mm_s", "mm_z"], "mm_dq")
    bias = node("DequantizeLinear", [const("bias", rng.integers(0, 256, 5).astype(np.uint8)), const("b_s", np.float32(0.03)),
                                     const("b_z", np.uint8(100))], "bias_dq")
    node("QuantizeLinear", [node("Add", [mm_dq, bias], "sum"), const("y_s", np.float32(0.07)), const("y_z", np.uint8(90))], "y")
    graph = helper.make_graph(nodes, "mm_add", [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3, 5])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    saved = check_saved(model, random_inputs(model, 7))
    assert [n.op_type for n in saved.graph.node] == ["QLinearMatMul", "QLinearAdd"]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_directml_graphs_written_as_the_node_they_split(dtype):
    """QLinearConcat and QLinearSigmoid, which the DML EP builds as DirectML graphs and dml_ep plans
    part by part, are written whole, each part's operator in order."""
    model, feeds = qlinear_concat(dtype, [(0.1, 7), (0.023, 0)], [(2, 3, 4), (2, 5, 4)], axis=1)
    saved = check_saved(with_output_shapes(model, feeds), feeds)
    assert [n.op_type for n in saved.graph.node] == ["QLinearConcat"]
    assert metadata(saved.graph.node[0])[rm.PARTS] == "DequantizeLinear -> DequantizeLinear -> DmlJoin -> QuantizeLinear"
    model, _ = qlinear_sigmoid(dtype, 0.05, 3, 1 / 256, 0)
    saved = check_saved(model, random_inputs(model, 8))
    assert metadata(saved.graph.node[0])[rm.OPERATOR].split(" -> ")[1] == "DML_OPERATOR_ACTIVATION_SIGMOID"


@pytest.mark.host_sensitive
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
def test_dynamic_quantize_matmul_written_whole(b_type):
    """Written as the user's com.microsoft node, which onnxruntime's CPU kernel runs its own way:
    with int8 weights the DML EP quantizes A to int8 where the CPU kernel quantizes it to uint8, so
    the file gives the original's outputs, not dml_ep's."""
    model = dynamic_quantize_matmul(b_type)
    feeds = {"x": np.random.default_rng(9).standard_normal((3, 4, K)).astype(np.float32)}
    saved = check_saved(with_output_shapes(model, feeds), feeds, same_as_dml_ep=b_type == np.uint8)
    assert [n.op_type for n in saved.graph.node] == ["DynamicQuantizeMatMul"]
    assert metadata(saved.graph.node[0])[rm.PARTS] == "DmlDynamicQuantizeLinear -> MatMulIntegerToFloat"


@pytest.mark.host_sensitive
def test_nodes_planned_only_when_run_are_written_pending():
    """A plan before any run leaves the nodes whose input ranks come with the data pending (the
    parts of a QLinearConcat of Reshapes to a shape fed at run time): they are written all the same,
    said to be pending; a run's plan places them."""
    model, feeds = qlinear_concat(np.uint8, [(0.1, 7), (0.023, 0)], [(1, 2, 8), (1, 2, 8)], axis=0, shape_known=False)
    feeds["shape"] = np.array([2, 8], np.int64)
    model = with_output_shapes(model, feeds)
    planner = Planner(model)
    plan = planner.plan_for_shapes()
    saved = rm.rewritten_model(planner, plan)
    onnx.checker.check_model(saved)
    assert_same(ort_run(saved, feeds), ort_run(model, feeds))
    assert [n.op_type for n in plan.pending] == ["DequantizeLinear", "DequantizeLinear", "DmlJoin", "QuantizeLinear"]
    assert [(n.op_type, metadata(n)[rm.PLACEMENT]) for n in saved.graph.node] == [("Reshape", "modelled")] * 2 + [("QLinearConcat", rm.PENDING)]  # planned when run
    assert metadata(saved.graph.node[2])[rm.REASON] == rm.PENDING_REASON
    check_saved(model, feeds)


def test_a_model_dml_ep_wrote_is_planned_and_written_again():
    """Its nodes' dml_ep metadata is replaced, not repeated; the model's own metadata is kept."""
    model = onnx.load(MODELS[0])
    planner = Planner(model)
    first = rm.rewritten_model(planner, planner.plan_for_shapes())
    again = Planner(first)
    second = rm.rewritten_model(again, again.plan_for_shapes())
    assert [p.key for p in second.graph.node[0].metadata_props] == [p.key for p in first.graph.node[0].metadata_props]
    assert [p.key for p in second.metadata_props] == [p.key for p in first.metadata_props]
    assert {p.key for p in model.metadata_props} <= {p.key for p in second.metadata_props}


def test_declared_value_info_is_kept():
    """onnxruntime's fusions match symbolic dimensions the model declares (SkipLayerNormFusion
    after a Reshape of a computed shape): the written model keeps the declarations."""
    model = onnx.load(MODELS[0])
    model.graph.value_info.extend([helper.make_tensor_value_info("fc1.add_quantized", TensorProto.UINT8, ["batch", 128])])
    planner = Planner(model)
    saved = rm.rewritten_model(planner, planner.plan_for_shapes())
    (declared,) = [v for v in saved.graph.value_info if v.name == "fc1.add_quantized"]
    assert declared.type.tensor_type.shape.dim[0].dim_param == "batch"
    assert all(v.type.tensor_type.elem_type for v in saved.graph.value_info)


# --- onnxruntime's SessionOptions.optimized_model_filepath -------------------------------------


def test_session_writes_the_rewritten_model_where_onnxruntime_writes_its_optimized_one(tmp_path):
    path = next(p for p in MODELS if p.stem == "small_cnn.qdq")
    options = dml_ep.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = dml_ep.InferenceSession(str(path), options)
    saved = onnx.load(tmp_path / "optimized.onnx")
    assert saved == rm.rewritten_model(session.planner, session.plan)
    assert {n.op_type for n in saved.graph.node} >= {"QLinearConv", "QLinearAdd"}


@pytest.mark.host_sensitive
def test_session_options_shape_the_written_graph(tmp_path):
    """With optimizations off, no QDQ group is fused: the file is the model's graph, annotated."""
    model = onnx.load(next(p for p in MODELS if p.stem == "small_cnn.qdq"))
    options = dml_ep.SessionOptions()
    options.graph_optimization_level = NONE
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    dml_ep.InferenceSession(model, options)
    saved = onnx.load(tmp_path / "optimized.onnx")
    assert [n.op_type for n in saved.graph.node] == [n.op_type for n in model.graph.node]
    feeds = random_inputs(model, 4)
    assert_same(ort_run(saved, feeds), ort_run(model, feeds))


def test_session_on_the_cpu_ep_alone_leaves_the_file_to_onnxruntime(tmp_path):
    options = dml_ep.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    dml_ep.InferenceSession(str(MODELS[0]), options, providers=["CPUExecutionProvider"])
    assert not any(p.key.startswith("dml_ep.") for p in onnx.load(tmp_path / "optimized.onnx").metadata_props)


def test_session_refuses_ort_format_and_its_own_model(tmp_path):
    options = dml_ep.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.ort")
    with pytest.raises(dml_ep.DmlEpError, match="ORT format"):
        dml_ep.InferenceSession(str(MODELS[0]), options)
    copy = tmp_path / "model.onnx"
    copy.write_bytes(MODELS[0].read_bytes())
    options.optimized_model_filepath = str(copy)
    with pytest.raises(OSError, match="it is an input"):
        dml_ep.InferenceSession(str(copy), options)
    assert copy.read_bytes() == MODELS[0].read_bytes()


# --- the command line ------------------------------------------------------------------------------


@pytest.mark.host_sensitive
def test_inspect_and_compare_save_it(capsys, tmp_path):
    model = next(p for p in MODELS if p.stem == "transformer_block")
    status, out, _ = run_cli(capsys, "inspect", model, "--save-rewritten", tmp_path / "inspect.onnx", "--json", tmp_path / "plan.json")
    assert status == 0 and f"{tmp_path / 'inspect.onnx'}: the rewritten model, 32 node(s)" in out
    saved = onnx.load(tmp_path / "inspect.onnx")
    rows = json.loads((tmp_path / "plan.json").read_text())["nodes"]
    assert [metadata(n)[rm.PLACEMENT] for n in saved.graph.node] == [r["placement"] for r in rows]
    # ort-exact: plain "ort" saturates u8s8 pairs on AVX2 CPUs without VNNI (compare then exits 1)
    status, _, _ = run_cli(capsys, "compare", model, "--reference", "ort-exact", "--save-rewritten", tmp_path / "compare.onnx")
    assert status == 0 and onnx.load(tmp_path / "compare.onnx").graph.node == saved.graph.node


@pytest.mark.host_sensitive
def test_inspect_from_a_run_places_every_node(capsys, tmp_path):
    model, feeds = qlinear_concat(np.uint8, [(0.1, 7), (0.023, 0)], [(1, 2, 8), (1, 2, 8)], axis=0, shape_known=False)
    feeds["shape"] = np.array([2, 8], np.int64)
    onnx.save(with_output_shapes(model, feeds), tmp_path / "m.onnx")
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
    status, _, _ = run_cli(capsys, "inspect", tmp_path / "m.onnx", "--input-dir", tmp_path, "--save-rewritten", tmp_path / "r.onnx")
    assert status == 0
    assert rm.PENDING not in {metadata(n)[rm.PLACEMENT] for n in onnx.load(tmp_path / "r.onnx").graph.node}


@pytest.mark.parametrize("command", ["inspect", "compare"])
def test_cli_refuses_to_write_over_the_model_and_says_a_bad_path_in_one_line(capsys, tmp_path, command):
    model = tmp_path / "model.onnx"
    model.write_bytes(MODELS[0].read_bytes())
    status, _, err = run_cli(capsys, command, model, "--save-rewritten", tmp_path / "." / "model.onnx")
    assert status == 2 and one_line_error(err) and "it is an input" in err
    assert model.read_bytes() == MODELS[0].read_bytes()
    status, _, err = run_cli(capsys, command, model, "--save-rewritten", tmp_path / "missing" / "r.onnx")
    assert status == 2 and one_line_error(err) and "no such directory" in err


def test_cli_errors_of_its_own(capsys, tmp_path):
    status, _, err = run_cli(capsys, "inspect", MODELS[0], "--save-rewritten", "-", "--json", "-")
    assert status == 2 and one_line_error(err) and "can be - (stdout)" in err
    status, _, err = run_cli(capsys, "compare", *MODELS[:2], "--save-rewritten", tmp_path / "r.onnx")
    assert status == 2 and one_line_error(err) and "give one model, not 2" in err
    assert not (tmp_path / "r.onnx").exists()
