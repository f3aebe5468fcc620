"""DmlOperatorFusion: the DML EP's GraphTransformer folds an activation into the operator before it.

As ``GraphTransformer.cpp`` (PerformOperatorFusion) does after onnxruntime's own rewrites: when an
op that DirectML can fuse into has its output read by exactly one node, an activation, and is not
a graph output, the pair becomes one com.microsoft.dml node (``DmlFusedAdd``) that carries the
activation as attributes; it is made only when the fused node runs on DirectML. dml_ep models the
fusion into Add and two-input Sum (ELEMENT_WISE_ADD1's FusedActivation).
"""

from __future__ import annotations

from typing import Callable

import onnx

from ..errors import FallbackError
from .editable import EditableGraph

DML_DOMAIN = "com.microsoft.dml"
FUSED_OP_TYPES = {"Add": "DmlFusedAdd", "Sum": "DmlFusedSum"}
ACTIVATIONS = ("Relu", "LeakyRelu")
NAME = "DmlOperatorFusion"


def dml_operator_fusion(graph: EditableGraph, on_dml: Callable[[onnx.NodeProto], bool]) -> bool:
    """Fuse each fusable (op, activation) pair whose fused node ``on_dml`` accepts; True if any."""
    if not graph.has_op(*ACTIVATIONS) or not graph.has_op(*FUSED_OP_TYPES):
        return False
    changed = False
    for node in list(graph.nodes):
        if node.domain not in ("", "ai.onnx") or node.op_type not in FUSED_OP_TYPES or not node.output:
            continue
        users = graph.consumers(node.output[0])
        if len(users) != 1 or node.output[0] in graph.graph_outputs:
            continue
        activation = users[0]
        if activation.domain not in ("", "ai.onnx") or activation.op_type not in ACTIVATIONS or len(activation.input) != 1:
            continue
        fused = fused_node(node, activation, graph.opset(activation.domain))
        if on_dml(node) and on_dml(fused):
            graph.replace([node, activation], fused, NAME, at=node)
            changed = True
    return changed


def fused_node(node: onnx.NodeProto, activation: onnx.NodeProto, opset: int) -> onnx.NodeProto:
    """``node`` with ``activation``'s output, the activation named in ``fused_*`` attributes."""
    fused = onnx.helper.make_node(
        FUSED_OP_TYPES[node.op_type], list(node.input), list(activation.output), name=node.name, domain=DML_DOMAIN,
        fused_activation=activation.op_type, fused_activation_domain=activation.domain,
        fused_activation_since_version=onnx.defs.get_schema(activation.op_type, opset).since_version,
    )
    fused.attribute.extend(node.attribute)
    for attribute in activation.attribute:
        renamed = fused.attribute.add()
        renamed.CopyFrom(attribute)
        renamed.name = "fused_" + attribute.name
    return fused


def unfused(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """The two ONNX nodes a fused node stands for (the inverse of :func:`fused_node`), for where
    onnxruntime runs it: an internal node never reaches onnxruntime."""
    if node.domain != DML_DOMAIN:
        return [node]
    if node.op_type in GRAPH_PARTS_ON_CPU:  # a part of a DirectML graph (operators/dml_graph.py) that onnxruntime has an op for
        plain = onnx.helper.make_node(GRAPH_PARTS_ON_CPU[node.op_type], list(node.input), list(node.output), name=node.name)
        plain.attribute.extend(node.attribute)
        return [plain]
    op_type = next((op for op, fused in FUSED_OP_TYPES.items() if fused == node.op_type), None)
    if op_type is None:  # a part of a DirectML graph (operators/dml_graph.py), planned only where it runs on DirectML
        raise FallbackError(f"{node.op_type} is a DirectML operator of the DML EP's own, which onnxruntime's CPU EP cannot run", node=node)
    own = [a for a in node.attribute if not a.name.startswith("fused_")]
    moved = [a for a in node.attribute if a.name.startswith("fused_") and a.name not in FUSED_MARKERS]
    inner = f"{node.output[0]}.before_{_attribute(node, 'fused_activation')}"
    first = onnx.helper.make_node(op_type, list(node.input), [inner], name=node.name)
    first.attribute.extend(own)
    activation = onnx.helper.make_node(_attribute(node, "fused_activation"), [inner], list(node.output), name=f"{node.name}.activation",
                                       domain=_attribute(node, "fused_activation_domain"))
    for attribute in moved:
        renamed = activation.attribute.add()
        renamed.CopyFrom(attribute)
        renamed.name = attribute.name.removeprefix("fused_")
    return [first, activation]


GRAPH_PARTS_ON_CPU = {"DmlJoin": "Concat"}  # split from a node whose shapes are known only when run, so it may fall back

FUSED_MARKERS = {"fused_activation", "fused_activation_domain", "fused_activation_since_version"}


def _attribute(node: onnx.NodeProto, name: str):
    value = onnx.helper.get_attribute_value(next(a for a in node.attribute if a.name == name))
    return value.decode() if isinstance(value, bytes) else value
