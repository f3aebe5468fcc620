"""com.microsoft QuickGelu, ``x * sigmoid(alpha * x)`` (onnxruntime's QuickGeluFusion makes it of a
float32 SiLU, Sigmoid -> Mul of the same x), is in the DML EP (DmlOperatorQuickGelu.cpp) a DirectML
graph: ELEMENT_WISE_IDENTITY with ScaleBias {alpha, 0}, only where alpha is not 1 -> ACTIVATION_SIGMOID
-> ELEMENT_WISE_MULTIPLY of the input and the sigmoid, every intermediate of the input's type and
shape. dml_ep plans it as com.microsoft.dml ``DmlScale`` (ELEMENT_WISE_IDENTITY with that ScaleBias),
ai.onnx Sigmoid and ai.onnx Mul, all three standing for the user's node.

In the "onnxruntime" arithmetic the float32 parts give onnxruntime's CPU QuickGelu bit for bit (it
computes ``alpha * x``, MLAS's logistic of it, then ``x *`` that, each rounded to float32). A float16
QuickGelu rounds the scaled value and the sigmoid to float16 between the parts, as DirectML's
float16 intermediates do, where onnxruntime's float16 kernel computes in float32 throughout.

The QuickGelu row (``registration.py``) answers for a node the split did not take (:func:`unsplit`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...realep.placement import ON_DML
from ..dml_graph import derived_infos
from ..importing import Fallback, NodeContext
from ..nodes import DmlNode

RULE = "DmlOperatorQuickGelu"
SCALE = "DmlScale"
DIRECTML_OPERATORS = ("ELEMENT_WISE_IDENTITY (ScaleBias alpha, 0; where alpha != 1)", "ACTIVATION_SIGMOID", "ELEMENT_WISE_MULTIPLY")
DEFAULT_ALPHA = 1.702  # QuickGelu's schema default

# The graph's parts run as DirectML OPERATORS of other modules (element_wise_identity's, activation's, ...).
OPERATORS: tuple = ()


def alpha_of(node: onnx.NodeProto) -> float:
    """``alpha`` as the DML EP reads it: a float32."""
    values = [onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "alpha"]
    return float(np.float32(values[0] if values else DEFAULT_ALPHA))


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """DmlScale (alpha != 1), Sigmoid, Mul of a float QuickGelu whose parts all run on DirectML; the
    values made are of x's type and shape."""
    x = node.input[0]
    x_info = static.get(x)
    if x_info is None or x_info.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        return None
    alpha = alpha_of(node)
    prefix = node.name or node.output[0]
    steps = (["scaled"] if alpha != 1.0 else []) + ["sigmoid"]
    names = [graph.unique_name(f"{node.output[0]}.{step}") for step in steps]
    made = {name: (x, x_info.dtype, True) for name in names}
    nodes = []
    if alpha != 1.0:
        nodes.append(onnx.helper.make_node(SCALE, [x], [names[0]], name=f"{prefix}.scale", domain=DML_DOMAIN, alpha=alpha))
    nodes.append(onnx.helper.make_node("Sigmoid", [names[0] if alpha != 1.0 else x], [names[-1]], name=f"{prefix}.sigmoid"))
    nodes.append(onnx.helper.make_node("Mul", [x, names[-1]], list(node.output), name=node.name))
    infos = {**derived_infos(made, {x: x_info}), x: x_info}
    if not all(on_dml(part, infos) for part in nodes):
        return None
    return tuple(nodes), made


def unsplit(ctx: NodeContext) -> DmlNode:
    """A QuickGelu the planner did not split (:func:`parts` plans it as its DirectML operators where
    each runs on DirectML, its type known before a run)."""
    raise Fallback(f"QuickGelu is a graph of DirectML operators ({', '.join(DIRECTML_OPERATORS)}); dml_ep plans it as those only "
                   "where the planner finds them all on DirectML before a run", ON_DML)
