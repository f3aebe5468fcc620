"""The one planning entry point: model -> onnxruntime's graph rewrites -> importer -> :class:`Plan`.

As in onnxruntime with the DML EP registered: the QDQ transformer turns QDQ node groups into
QLinear nodes by the rules that apply to DML nodes (``passes/qdq.py``, the release's rule set);
types and shapes are then known for the rewritten graph; the DML EP's own GraphTransformer folds
activations into the nodes it runs (``passes/dml_fusion.py``); each node then becomes a DirectML
desc or a CPU fallback. The session, the CLI and compare all plan through :func:`plan_model`.
"""

from __future__ import annotations

import onnx

from . import graph as graph_module
from .enums import DML_FEATURE_LEVEL
from .importer import DEFAULT_FEATURE_LEVEL, NodeImporter, opset_versions
from .errors import DmlEpError, RealEpError
from .passes import DEFAULT_RULE_SET, DML, RULE_SETS, EditableGraph, dml_operator_fusion, qdq_transformer
from .plan import Plan, ValueInfo
from .real_ep import has_dml_kernel


def plan_model(
    model: onnx.ModelProto,
    feature_level=DEFAULT_FEATURE_LEVEL,
    input_shapes=None,
    *,
    qdq_rules: str | None = DEFAULT_RULE_SET,
    provider: str = DML,
) -> Plan:
    """Plan a checked model for concrete input shapes (declared shapes, symbolic dims as 1, by
    default). ``qdq_rules`` names the onnxruntime release whose QDQ rules apply (see
    :data:`dml_ep.passes.RULE_SETS`); None turns them off, as ``session.disable_quant_qdq=1`` does.
    ``provider=CPU`` plans the graph onnxruntime's CPU EP runs instead (its rules, no DML fusion),
    which compare uses to explain the differences between two onnxruntime configurations."""
    feature_level = DML_FEATURE_LEVEL.parse(feature_level)
    if qdq_rules is not None and qdq_rules not in RULE_SETS:
        raise DmlEpError(f"unknown QDQ rule set {qdq_rules!r} (choose from {', '.join(RULE_SETS)})")
    declared = graph_module.graph_inputs(model.graph)
    shapes = {v.name: graph_module.declared_shape(v) for v in declared}
    shapes.update(input_shapes or {})
    graph = EditableGraph(model)
    if qdq_rules is not None:
        qdq_transformer(graph, qdq_rules, provider)
    rewritten = graph.to_model()
    values = graph_module.infer_values(rewritten, shapes)
    importer = NodeImporter(values, graph.constants, feature_level, opset_versions(rewritten))
    if provider == DML:
        dml_operator_fusion(graph, importer.maps)
    entries = [importer.plan_node(node, graph.origin(node)) for node in graph.nodes]
    if provider == DML:
        for entry in entries:
            if entry.origin.rules and not has_dml_kernel(entry.node):
                raise RealEpError(
                    f"onnxruntime {qdq_rules}'s QDQ rule ({entry.origin.rule}) makes {entry.node.op_type} for a DML node, "
                    "and the DML EP has no kernel for it: the real EP fails at session initialization "
                    "(onnxruntime issue #26882, fixed in 1.24)", node=entry.node)
    inputs = [ValueInfo(v.name, graph_module.element_dtype(v), tuple(shapes[v.name])) for v in declared]
    outputs = [values[o.name] for o in model.graph.output]
    return Plan(entries, feature_level, inputs, outputs, values, graph.constants, rewritten, qdq_rules)
