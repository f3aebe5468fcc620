"""DmlOperatorFusion: the DML EP's GraphTransformer folds an activation into the operator before it.

As ``GraphTransformer.cpp`` (PerformOperatorFusion) does after onnxruntime's own rewrites: when an
op that DirectML can fuse into has its output read by exactly one node, an activation of one input,
and is not a graph output, the pair becomes one com.microsoft.dml node (``DmlFusedConv``,
``DmlFusedAdd``) that carries the activation as attributes; it is made only when the fused node
runs on DirectML. Both are matched by since-version, exactly, as ``FusionHelpers::TryGetFusedOp``
matches them (``c_fusableOps``, ``c_activationOps`` in OperatorUtility.cpp). dml_ep models the
fusion into Conv and ConvTranspose (CONVOLUTION's FusedActivation: every activation of the table),
and into Add and two-input Sum (ELEMENT_WISE_ADD1's: Relu and LeakyRelu, the table's filter for them).
"""

from __future__ import annotations

import functools
from typing import Callable

import onnx

from ..core.errors import FallbackError
from .editable import EditableGraph

DML_DOMAIN = "com.microsoft.dml"
FUSED_OP_TYPES = {"Conv": "DmlFusedConv", "ConvTranspose": "DmlFusedConvTranspose", "Add": "DmlFusedAdd", "Sum": "DmlFusedSum"}
# c_activationOps: each activation's since-versions (OnnxOperatorSetN::sc_sinceVer_*, N = 7, 13, ...).
ACTIVATIONS = {"Sigmoid": (6, 13), "HardSigmoid": (6,), "Tanh": (6, 13), "Relu": (6, 13, 14), "LeakyRelu": (6, 16),
               "ThresholdedRelu": (10,), "Elu": (6,), "Selu": (6,), "Softsign": (1,), "Softplus": (1,), "Dropout": (7,)}
# c_fusableOps' activation filters ("what DML's fused op internally fuses at the shader level"); the others take any.
ACTIVATION_FILTERS = {"Add": ("Relu", "LeakyRelu"), "Sum": ("Relu", "LeakyRelu")}
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
        if activation.domain not in ("", "ai.onnx") or not fusable(node.op_type, activation, graph.opset(activation.domain)):
            continue
        fused = fused_node(node, activation, graph.opset(activation.domain))
        if on_dml(node) and on_dml(fused):
            graph.replace([node, activation], fused, NAME, at=node)
            changed = True
    return changed


def fusable(op_type: str, activation: onnx.NodeProto, opset: int) -> bool:
    """Whether ``activation`` (an ai.onnx node at ``opset``) folds into an ``op_type`` node: a listed
    activation at a listed since-version, of one input (and one output), that the op's filter admits."""
    if activation.op_type not in ACTIVATIONS or len(activation.input) != 1 or len(activation.output) != 1:  # (a Dropout's mask)
        return False
    if activation.op_type not in ACTIVATION_FILTERS.get(op_type, (activation.op_type,)):
        return False
    return since_version(activation.op_type, opset) in ACTIVATIONS[activation.op_type]


@functools.lru_cache(maxsize=None)
def since_version(op_type: str, opset: int) -> int:
    """The since-version of an ai.onnx op at ``opset``: onnx's schema lookup, once per op and opset
    (a chain of thousands of fused pairs looked it up twice a pair, some 20 us each)."""
    return onnx.defs.get_schema(op_type, opset).since_version


def fused_node(node: onnx.NodeProto, activation: onnx.NodeProto, opset: int) -> onnx.NodeProto:
    """``node`` with ``activation``'s output, the activation named in ``fused_*`` attributes."""
    fused = onnx.helper.make_node(
        FUSED_OP_TYPES[node.op_type], list(node.input), list(activation.output), name=node.name, domain=DML_DOMAIN,
        fused_activation=activation.op_type, fused_activation_domain=activation.domain,
        fused_activation_since_version=since_version(activation.op_type, opset),
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
