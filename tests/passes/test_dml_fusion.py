"""DmlOperatorFusion (``dml_ep.passes.dml_fusion``, the DML EP's GraphTransformer.cpp
PerformOperatorFusion): an Add whose one reader is a Relu becomes com.microsoft.dml DmlFusedAdd,
planned as ELEMENT_WISE_ADD1 with a fused activation.
"""

from __future__ import annotations

from dml_ep.operators.nodes import DmlNode
from dml_ep.planning.planner import plan_model
from onnx_builders import F32, Graph, names


def add_relu_model(add_is_output=False):
    g = Graph()
    g.input("a", F32, [2, 3])
    g.input("b", F32, [2, 3])
    g.node("Add", ["a", "b"], "sum", name="add")
    g.output(g.node("Relu", ["sum"], "out", name="relu"), F32)
    if add_is_output:
        g.output("sum", F32)
    return g.model()


def test_dml_fuses_relu_into_add():
    """GraphTransformer.cpp PerformOperatorFusion: Add with one consumer, a Relu, becomes
    com.microsoft.dml DmlFusedAdd: ELEMENT_WISE_ADD1 with a fused RELU."""
    plan = plan_model(add_relu_model())
    [entry] = plan.entries
    assert isinstance(entry, DmlNode)
    assert (entry.node.op_type, entry.node.domain) == ("DmlFusedAdd", "com.microsoft.dml")
    assert entry.desc.OPERATOR_TYPE.name == "ELEMENT_WISE_ADD1"
    assert entry.desc.FusedActivation.OPERATOR_TYPE.name == "ACTIVATION_RELU"
    assert entry.origin.rule == "DmlOperatorFusion" and names(entry.origin.nodes) == ["add", "relu"]


def test_dml_does_not_fuse_an_add_that_is_a_graph_output():
    """The fusion needs the Add's output to have one edge and not be a graph output."""
    plan = plan_model(add_relu_model(add_is_output=True))
    assert [e.node.op_type for e in plan.entries] == ["Add", "Relu"]
    assert plan.entries[0].desc.FusedActivation is None
