"""EnsureUniqueDQForNodeUnit: every consumer of a DequantizeLinear gets a DQ of its own.

onnxruntime runs it before any other rewrite, so that one DQ shared by two nodes does not keep
both out of their QDQ groups. The first consumer keeps the original DQ unless the DQ is also a
graph output; every other input that reads it gets a copy (``<name>/duplicated``).
"""

from __future__ import annotations

import dataclasses

import onnx

from .editable import EditableGraph
from .qdq_util import is_dq

NAME = "EnsureUniqueDQForNodeUnit"


def ensure_unique_dq_for_node_unit(graph: EditableGraph) -> bool:
    changed = False
    for dq in [n for n in graph.nodes if is_dq(n)]:
        name = dq.output[0]
        readers = {id(node): node for node in graph.consumers(name)}.values()
        slots = [(node, index) for node in readers for index, i in enumerate(node.input) if i == name]
        if not slots or len(slots) == 1 and name not in graph.graph_outputs:
            continue
        if name not in graph.graph_outputs:
            slots = slots[1:]
        for node, index in slots:
            copy = onnx.NodeProto()
            copy.CopyFrom(dq)
            copy.name = graph.unique_name(f"{dq.name or name}/duplicated")
            copy.output[0] = graph.unique_name(f"{name}/duplicated")
            origin = graph.origin(dq)
            graph.insert_after(dq, copy, dataclasses.replace(origin, rules=(*origin.rules, NAME)), graph.dtype(name))
            node.input[index] = copy.output[0]
            graph.changed(node)
            changed = True
    return changed
