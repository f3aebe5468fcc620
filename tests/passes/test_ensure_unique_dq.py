"""EnsureUniqueDQForNodeUnit (``dml_ep.passes.ensure_unique_dq``, onnxruntime's
ensure_unique_dq_for_node_unit.cc): a DQ read by two nodes, or also a graph output, is rejected by
the selectors alone (NodeGroup::CanCreateNodeGroup), and fused once each consumer has its own copy.
"""

from __future__ import annotations

from dml_ep.passes import EditableGraph
from dml_ep.passes.qdq_selectors import conv as conv_selector
from dml_ep.passes.qdq_selectors import qdq_group
from onnx_builders import conv_model, node, ops, rewrite, shared_dq_model


def test_dq_graph_output_rejected_by_selector_but_duplicated_by_ensure_unique_dq():
    """NodeGroup::CanCreateNodeGroup refuses a DQ that produces a graph output; but
    EnsureUniqueDQForNodeUnit runs first and gives every consumer of such a DQ its own copy, so
    onnxruntime fuses the Conv and keeps the original DQ for the graph output."""
    model = conv_model(dq_is_output=True)
    graph = EditableGraph(model)
    reason = conv_selector(graph, next(n for n in graph.nodes if n.op_type == "Conv"))
    assert isinstance(reason, str) and "graph output" in reason
    graph = rewrite(model)
    assert sorted(ops(graph)) == [("DequantizeLinear", ""), ("QLinearConv", "")]
    assert node(graph, "DequantizeLinear").output[0] == "x_dq"
    assert node(graph, "QLinearConv").input[0] == "x"
    assert graph.origin(node(graph, "QLinearConv")).rules == ("EnsureUniqueDQForNodeUnit", "Conv")


def test_shared_dq_rejected_by_the_selector_alone():
    """CanCreateNodeGroup: each DQ must have one output edge, to the target."""
    graph = EditableGraph(shared_dq_model())
    for target in [n for n in graph.nodes if n.op_type == "Conv"]:
        assert "other consumers" in conv_selector(graph, target)
        assert "other consumers" in qdq_group(graph, target)


def test_shared_dq_duplicated_then_both_convs_fuse():
    """EnsureUniqueDQForNodeUnit copies the DQ for the second consumer (``<name>/duplicated``),
    after which both Conv groups qualify and become QLinearConvs reading the same ``x``."""
    graph = rewrite(shared_dq_model())
    assert ops(graph) == [("QLinearConv", "")] * 2
    assert [(n.name, n.input[0], n.output[0]) for n in graph.nodes] == [("conv1", "x", "y1"), ("conv2", "x", "y2")]
    rules = sorted(graph.origin(n).rules for n in graph.nodes)
    assert rules == [("Conv",), ("EnsureUniqueDQForNodeUnit", "Conv")]
