"""``dml-ep inspect`` on a large model: a summary first (counts and MACs by op type and by fallback
reason, the pending nodes as a count), no line over 160 characters; every node with ``--nodes``,
whole names in the JSON."""

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.cli.commands import main

MODELS = Path(__file__).resolve().parents[2] / "models"
WIDTH = 160
PAIRS, EXTRA_SIGMOIDS, PENDING = 100, 10, 12  # FLOAT_OP -> Add pairs, then FLOAT_OPs, then nodes after a Reshape
FLOAT_OP = "Softplus"  # a float op the real EP runs on DirectML and dml_ep does not model (Sigmoid is modelled now)
SIGMOID_REASON = f"ai.onnx::{FLOAT_OP}: float op on DirectML in the real EP, not modelled by dml_ep"


def long_name(op_type: str, index: int) -> str:
    """300 characters, told apart at both ends."""
    head, tail = f"{op_type}_{index:03d}_", f"_{index:03d}"
    return head + "x" * (300 - len(head) - len(tail)) + tail


def chain_model():
    """x [1,8] -> (FLOAT_OP -> Add c) x 100 -> FLOAT_OP x 10 -> Reshape by the input s -> 12 more
    nodes, alternately FLOAT_OP and Add, whose shapes only a run tells."""
    nodes, value = [], "x"

    def step(op_type, index, pending=False):
        nonlocal value
        out = f"v{len(nodes)}"
        inputs = [value, "c"] if op_type == "Add" else [value]
        nodes.append(helper.make_node(op_type, inputs, [out], name=long_name(("pending_" if pending else "") + op_type, index)))
        value = out

    for i in range(PAIRS):
        step(FLOAT_OP, i)
        step("Add", i)
    for i in range(EXTRA_SIGMOIDS):
        step(FLOAT_OP, PAIRS + i)
    nodes.append(helper.make_node("Reshape", [value, "s"], ["r"], name=long_name("Reshape", 0)))
    value = "r"
    for i in range(PENDING):
        step(FLOAT_OP if i % 2 == 0 else "Add", i, pending=True)
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(8, np.float32), "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "chain.onnx"
    onnx.save(chain_model(), path)
    return path


def inspect(capsys, *argv):
    status = main(["inspect", *map(str, argv)])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


def test_default_output_is_a_short_summary(capsys, chain):
    out = inspect(capsys, chain)
    lines = out.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert len(lines) < 30
    # by op type: 110 FLOAT_OPs and the Reshape fall back; 100 Adds of 8 elements on DirectML, all the MACs
    assert re.search(r"^Add +100 +DirectML \(DML_OPERATOR_ELEMENT_WISE_ADD1\) +800 +100\.0%$", out, re.M)
    assert re.search(rf"^{FLOAT_OP} +{PAIRS + EXTRA_SIGMOIDS} +CPU fallback +0 +0\.0%$", out, re.M)
    assert re.search(r"^Reshape +1 +CPU fallback +0 +0\.0%$", out, re.M)
    # by reason class: where the real EP runs them and why
    assert re.search(r"^DirectML: a DirectML operator dml_ep models +modelled +100 +800$", out, re.M)
    assert re.search(rf"^DirectML: on DirectML in the real EP, not modelled by dml_ep +not-modelled +{PAIRS + EXTRA_SIGMOIDS} +0$", out, re.M)
    assert re.search(r"^DirectML: on DirectML, planned when run \(a required CPU input computed at run time\) +planned-when-run +1 +0$", out, re.M)
    # by reason
    assert re.search(rf"^{re.escape(SIGMOID_REASON)} +{PAIRS + EXTRA_SIGMOIDS} +0$", out, re.M)
    # the totals as before, the pending nodes as a count and a few shortened names
    assert "100 of the model's 211 node(s) on DirectML (100 operator(s)), 111 on the CPU fallback" in out
    assert "estimated MACs: 800 on DirectML (100.0%), 0 on the fallback" in out
    assert f"{PENDING} node(s) are planned only when run, their input shapes depend on data" in out
    names = lines[lines.index(next(l for l in lines if "planned only when run" in l)) + 1].strip()
    shown, more = names.rsplit(" and ", 1)
    assert more == f"{PENDING - 5} more"
    for i, name in enumerate(shown.split(", ")):  # shortened in the middle
        whole = long_name("pending_" + (FLOAT_OP if i % 2 == 0 else "Add"), i)
        assert "…" in name and whole.startswith(name.split("…")[0]) and whole.endswith(name.split("…")[1])


def test_nodes_lists_every_node(capsys, chain):
    out = inspect(capsys, chain, "--nodes")
    for node in chain_model().graph.node:
        assert node.name in out
    assert "pending_Add_011_" not in inspect(capsys, chain)


def test_json_keeps_whole_names_and_adds_the_summaries(capsys, chain, tmp_path):
    inspect(capsys, chain, "--json", tmp_path / "plan.json")
    plan = json.loads((tmp_path / "plan.json").read_text())
    names = [n.name for n in chain_model().graph.node]
    assert [r["node"] for r in plan["nodes"]] == names[:-PENDING]
    assert plan["pending"] == names[-PENDING:]
    by_op_type = {(r["op_type"], r["runs_on"]): (r["nodes"], r["macs"]) for r in plan["by_op_type"]}
    assert by_op_type == {("Add", "DML_OPERATOR_ELEMENT_WISE_ADD1"): (PAIRS, 8 * PAIRS),
                          (FLOAT_OP, "fallback"): (PAIRS + EXTRA_SIGMOIDS, 0), ("Reshape", "fallback"): (1, 0)}
    assert {r["reason_class"]: r["nodes"] for r in plan["by_reason_class"]} == {"modelled": PAIRS, "not-modelled": PAIRS + EXTRA_SIGMOIDS,
                                                                                "planned-when-run": 1}
    assert {r["reason_class"] for r in plan["nodes"]} == {"modelled", "not-modelled", "planned-when-run"}
    assert {r["reason"]: r["nodes"] for r in plan["by_reason"]} == {
        SIGMOID_REASON: PAIRS + EXTRA_SIGMOIDS,
        "input 1 's' is computed at run time (a required CPU input, which the real EP reads from CPU memory); on DirectML in the real EP, "
        "which makes its kernel from the value; dml_ep plans it when a run computes the value": 1}
    reshape = next(r for r in plan["nodes"] if r["op_type"] == "Reshape")
    assert (reshape["placement"], reshape["reason_class"]) == ("modelled", "planned-when-run")


def test_qdq_rules_named_only_for_a_model_they_rewrote(capsys):
    out = inspect(capsys, MODELS / "transformer_block.onnx")  # QOperator: no QDQ group
    assert "QDQ" not in out and max(map(len, out.splitlines())) <= WIDTH
    out = inspect(capsys, MODELS / "small_cnn.qdq.onnx")
    assert "onnxruntime 1.24+ rewrites" in out and "13 made by onnxruntime's graph rewrites" in out
    assert "made by onnxruntime's graph rewrites (onnxruntime 1.24+ rewrites), from the model's nodes:" not in out  # --nodes lists them
    assert "made by onnxruntime's graph rewrites (onnxruntime 1.24+ rewrites), from the model's nodes:" in inspect(
        capsys, MODELS / "small_cnn.qdq.onnx", "--nodes")


def test_long_reasons_are_shortened_at_the_end(capsys, tmp_path):
    """A float Resize between DQ and Q falls back with a note on the CPU-only rule that would drop its Q/DQ:
    shortened in the summary, whole in the JSON."""
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]), helper.make_node("Resize", ["x", "", "scales"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "s", "z"], ["yq"])]
    constants = {"s": np.array(0.1, np.float32), "z": np.array(128, np.uint8), "scales": np.array([1, 1, 2, 2], np.float32)}
    graph = helper.make_graph(nodes, "qdq_resize", [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("yq", TensorProto.UINT8, None)],
                              [numpy_helper.from_array(value, name) for name, value in constants.items()])
    path = tmp_path / "qdq_resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    out = inspect(capsys, path, "--json", tmp_path / "plan.json")
    assert max(map(len, out.splitlines())) <= WIDTH
    row = next(line for line in out.splitlines() if line.startswith("ai.onnx::Resize: "))
    shown, nodes_, macs = row.rsplit(None, 2)
    assert shown.endswith("…") and (nodes_, macs) == ("1", "0")
    by_reason = json.loads((tmp_path / "plan.json").read_text())["by_reason"]
    reason = next(r["reason"] for r in by_reason if r["reason"].startswith("ai.onnx::Resize: "))
    assert reason.startswith(shown[:-1]) and "is for CPU nodes only" in reason
