"""ReluQuantFusion and ClipQuantFusion: a Relu or Clip right before a Q that clamps as much goes.

Relu goes when the Q's zero point is its type's minimum (the Q clamps below it anyway); Clip goes
when its range covers the Q's whole representable range (within float32's epsilon). onnxruntime
1.19 and later do this for CPU nodes only; before, for every EP (see ``RuleSet``).
"""

from __future__ import annotations

import numpy as np
import onnx

from .editable import EditableGraph
from .qdq_util import is_q, output_type, scalar_constant

NAME = {"Relu": "ReluQuantFusion", "Clip": "ClipQuantFusion"}
EPSILON = np.finfo(np.float32).eps


def relu_clip_quant_fusion(graph: EditableGraph) -> bool:
    changed = False
    for node in list(graph.nodes):
        if node.op_type not in NAME or node.domain not in ("", "ai.onnx") or node.output[0] in graph.graph_outputs:
            continue
        consumers = graph.consumers(node.output[0])
        if len(consumers) != 1 or not is_q(consumers[0]):
            continue
        q = consumers[0]
        if not made_redundant(graph, node):
            continue
        merged = onnx.NodeProto()
        merged.CopyFrom(q)
        merged.input[0] = node.input[0]
        graph.replace([node, q], merged, NAME[node.op_type], at=q)
        changed = True
    return changed


def made_redundant(graph: EditableGraph, node: onnx.NodeProto) -> bool:
    """Whether the one Q reading Relu/Clip ``node`` clamps at least as much as it does."""
    q = graph.consumers(node.output[0])[0]
    if len(q.input) != 3 or not q.input[2]:
        return False
    scale, zero_point = scalar_constant(graph, q.input[1]), scalar_constant(graph, q.input[2])
    dtype = output_type(graph, q)
    if scale is None or zero_point is None or dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        return False
    info = np.iinfo(dtype)
    if node.op_type == "Relu":
        return int(zero_point) == info.min
    low, high = _clip_range(graph, node)
    if low is None:
        return False
    lower = np.float32(scale) * np.float32(info.min - int(zero_point))
    upper = np.float32(scale) * np.float32(info.max - int(zero_point))
    return not (EPSILON < low - lower or EPSILON < upper - high)


def _clip_range(graph: EditableGraph, node: onnx.NodeProto):
    """Clip's constant (min, max), from attributes before opset 11 and inputs after; (None, None) if not constant."""
    attributes = {a.name: a.f for a in node.attribute}
    if attributes:
        return attributes.get("min", -np.inf), attributes.get("max", np.inf)
    bounds = []
    for index, default in ((1, -np.inf), (2, np.inf)):
        name = node.input[index] if len(node.input) > index else ""
        if not name:
            bounds.append(default)
            continue
        value = scalar_constant(graph, name)
        if value is None:
            return None, None
        bounds.append(float(value))
    return tuple(bounds)
