"""onnxruntime's QDQ rules that drop a group's Q/DQ and keep the op, as dml_ep emulates them
(``dml_ep.passes.qdq_selectors`` DropQDQ/DropDQ selectors, ``qdq_actions.merge_into_target``, and
which ops and providers each release's rule table in ``qdq_rules`` gives them): 'drop',
'drop_no_int16_support', 'drop_no_int16_support_and_positive_scale' and 'dropDQ' (ArgMax).

One rule condition at a time, on the graphs of ``onnx_builders``, for nodes on the DML EP unless a
test says otherwise; the expectations are onnxruntime's qdq_selector_action_transformer.cc,
qdq_selectors.cc and qdq_actions.cc.
"""

from __future__ import annotations

import pytest

from dml_ep.passes import CPU
from onnx_builders import ALL_RULE_SETS, MS, U16, argmax_model, drop_model, node, ops, rewrite, unfused


@pytest.mark.parametrize("rule_set", ALL_RULE_SETS)
def test_reshape_drop_fires(rule_set):
    """DropQDQNodesSelector + MergeIntoTargetFixed (every release since 1.17): equal constant scalar
    Q/DQ parameters, so the Reshape itself reads the quantized tensor and writes the Q's output name."""
    graph = rewrite(drop_model("Reshape"), rule_set)
    assert ops(graph) == [("Reshape", "")]
    [reshape] = graph.nodes
    assert list(reshape.input) == ["x", "shape"] and list(reshape.output) == ["y"] and reshape.name == "reshape"
    assert graph.origin(reshape).rules == ("drop",)


@pytest.mark.parametrize("op_type", ["Reshape", "MaxPool"])
def test_drop_with_different_scales_rejected(op_type):
    """IsQDQPairSupported: the Q and DQ scales (and zero points) must be equal."""
    graph = rewrite(drop_model(op_type, dq_scale=0.05, q_scale=0.06))
    assert unfused(graph, op_type)
    assert "not the same constant scalars" in graph.origin(node(graph, op_type)).note


@pytest.mark.parametrize("op_type, fires", [("Reshape", True), ("MaxPool", False)])
def test_drop_uint16(op_type, fires):
    """The 'drop' rule allows 16-bit types; 'drop_no_int16_support_and_positive_scale' (MaxPool) does not."""
    graph = rewrite(drop_model(op_type, dtype=U16, domain=MS))
    if fires:
        assert ops(graph) == [(op_type, "")]
    else:
        assert unfused(graph, op_type) and "16-bit" in graph.origin(node(graph, op_type)).note


def test_maxpool_12_drop_fires():
    """'drop_no_int16_support_and_positive_scale' covers MaxPool since-version 12 (opset 12+ models)."""
    graph = rewrite(drop_model("MaxPool"))
    assert ops(graph) == [("MaxPool", "")]
    assert list(graph.nodes[0].input) == ["x"] and list(graph.nodes[0].output) == ["y"]


def test_maxpool_11_not_covered():
    """The rule lists MaxPool {12}: an opset-11 model's MaxPool (since-version 11) is not dropped."""
    graph = rewrite(drop_model("MaxPool", opset=11))
    assert unfused(graph, "MaxPool") and graph.origin(node(graph, "MaxPool")).note is None


@pytest.mark.parametrize("scale", [0.0, -0.05])
@pytest.mark.parametrize("op_type, rule_set, fires", [
    ("MaxPool", "1.24+", False),       # allow_nonpositive_scale=false
    ("MaxPool", "1.17-1.19", True),    # the old drop_no_int16_support had no scale check
    ("Reshape", "1.24+", True),        # 'drop': allow_nonpositive_scale=true
])
def test_nonpositive_scale(op_type, rule_set, fires, scale):
    """Since 1.20, MaxPool/ReduceMax/ReduceMin need a positive constant Q scale (max does not
    commute with a negative scale); the plain 'drop' rule takes any scale."""
    graph = rewrite(drop_model(op_type, dq_scale=scale, q_scale=scale), rule_set)
    if fires:
        assert ops(graph) == [(op_type, "")]
    else:
        assert unfused(graph, op_type) and "positive" in graph.origin(node(graph, op_type)).note


@pytest.mark.parametrize("rule_set", ALL_RULE_SETS)
def test_resize_drop_on_dml_only_in_1_17_to_1_19(rule_set):
    """PR #22458 (1.20+) made Resize's drop CPU-only ("We don't drop the resample QDQ ops here for DML")."""
    graph = rewrite(drop_model("Resize"), rule_set)
    if rule_set == "1.17-1.19":
        assert ops(graph) == [("Resize", "")]
    else:
        assert unfused(graph, "Resize") and graph.origin(node(graph, "Resize")).cpu_rule == "drop_no_int16_support"


def test_resize_drop_fires_on_cpu():
    """'drop_no_int16_support' still drops Resize's Q/DQ for CPU nodes."""
    graph = rewrite(drop_model("Resize"), provider=CPU)
    assert ops(graph) == [("Resize", "")]


@pytest.mark.parametrize("zero_point", [True, False])
def test_argmax_drops_its_dq(zero_point):
    """DropDQNodeGroupSelector (IsDQSupported): the DQ's scale and zero point must be constant
    scalars, and the zero point must exist; ArgMax then reads the quantized tensor directly."""
    graph = rewrite(argmax_model(zero_point))
    if zero_point:
        assert ops(graph) == [("ArgMax", "")] and list(graph.nodes[0].input) == ["x"]
        assert graph.origin(graph.nodes[0]).rules == ("dropDQ",)
    else:
        assert ops(graph) == [("DequantizeLinear", ""), ("ArgMax", "")]
