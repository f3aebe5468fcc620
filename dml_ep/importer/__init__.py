"""ONNX graph -> :class:`~dml_ep.plan.Plan`: each node becomes a DirectML desc or a fallback with its reason.

One importer function per ONNX op (a registry filled by ``@importer``); an importer raises
``Fallback(reason)`` for what DirectML cannot take, and dml_ep's typed errors for what is invalid.
A desc that breaks DirectML's tables at the target feature level falls back, naming the rule.
"""

from __future__ import annotations

import dataclasses

import onnx

from .. import graph as graph_module
from ..enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE
from ..errors import DescValidationError
from ..plan import DmlNode, FallbackNode, Plan, ValueInfo
from . import elementwise, qlinear_conv, qlinear_matmul  # noqa: F401  (fill the registry)
from .common import IMPORTERS, Fallback, NodeContext
from .elementwise import fused_activation

DEFAULT_FEATURE_LEVEL = max(DML_FEATURE_LEVEL)


def opset_versions(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


def import_model(model: onnx.ModelProto, feature_level=DEFAULT_FEATURE_LEVEL, input_shapes=None) -> Plan:
    """Plan a checked model for concrete input shapes (declared shapes, symbolic dims as 1, by default)."""
    feature_level = DML_FEATURE_LEVEL.parse(feature_level)
    graph = model.graph
    declared = graph_module.graph_inputs(graph)
    shapes = {v.name: graph_module.declared_shape(v) for v in declared}
    shapes.update(input_shapes or {})
    order = graph_module.topological_order(graph)
    constants = graph_module.constants(graph)
    values = graph_module.infer_values(model, shapes)
    opsets = opset_versions(model)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in order:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    graph_outputs = {o.name for o in graph.output}

    entries, fused_away = [], set()
    for node in order:
        if id(node) in fused_away:
            continue
        entry = _plan_node(node, values, constants, feature_level, opsets)
        if isinstance(entry, DmlNode) and entry.desc.OPERATOR_TYPE == DML_OPERATOR_TYPE.ELEMENT_WISE_ADD1:
            entry = _fuse(entry, consumers, graph_outputs, values, feature_level, fused_away)
        entries.append(entry)

    inputs = [ValueInfo(v.name, graph_module.element_dtype(v), tuple(shapes[v.name])) for v in declared]
    outputs = [values[o.name] for o in graph.output]
    return Plan(entries, feature_level, inputs, outputs, values, constants, model)


def _plan_node(node, values, constants, feature_level, opsets):
    domain = "" if node.domain == "ai.onnx" else node.domain
    fn = IMPORTERS.get((domain, node.op_type))
    if fn is None:
        return FallbackNode(node, f"no DirectML mapping in dml_ep for {domain or 'ai.onnx'}::{node.op_type}")
    ctx = NodeContext(node, values, constants, feature_level, opsets.get(domain, 1))
    try:
        entry = fn(ctx)
        entry.desc.validate(feature_level)
    except (Fallback, DescValidationError) as reason:  # DirectML cannot take it: onnxruntime runs it
        return FallbackNode(node, str(reason))
    return entry


def _fuse(entry, consumers, graph_outputs, values, feature_level, fused_away):
    """Fold a lone Relu/LeakyRelu consumer of an ADD1 into its FusedActivation."""
    users = consumers.get(entry.output, [])
    if len(users) != 1 or entry.output in graph_outputs:
        return entry
    activation_node = users[0]
    activation = fused_activation(activation_node)
    if activation is None or values.get(activation_node.output[0]) is None:
        return entry
    fused = dataclasses.replace(entry.desc, FusedActivation=activation)
    try:
        fused.validate(feature_level)
    except DescValidationError:
        return entry
    fused_away.add(id(activation_node))
    return dataclasses.replace(entry, desc=fused, output=activation_node.output[0], fused_nodes=[activation_node])
