"""ONNX Cast and CastLike to bool are in the DML EP (DmlOperatorCast.cpp after onnxruntime 1.17's) a
DirectML graph: CAST of the input to UINT8 (DirectML's bool), then ELEMENT_WISE_CLIP1 of that UINT8
to [0, 1], written to the bool output. dml_ep plans it as ai.onnx Cast to uint8 and
com.microsoft.dml ``DmlClipToBool`` (CLIP1 [0, 1] on UINT8, its output the node's bool), both
standing for the user's node.

It is not ONNX's Cast to bool, which is true for every nonzero value: a float in (-1, 1) other
than 0, or NaN, converts to 0 and gives false; a negative float gives false where the cast clamps (the
"directml" arithmetic's Direct3D ``ftou``) and true where it wraps (the "onnxruntime" arithmetic's
C conversion); an integer keeps its low 8 bits, so 256 gives false. compare names such
differences "graph" (:data:`DIFFERS`). Masks of 0 and 1, what models cast to bool, are exact.

The Cast row (``registration.py``) answers for a node the split did not take. A CastLike to bool
reaches the planner as a Cast: onnxruntime's CPU session inlines CastLike, having no kernel for it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ..dml_graph import derived_infos

RULE = "DmlOperatorCast"
CLIP_TO_BOOL = "DmlClipToBool"
DIRECTML_OPERATORS = ("CAST (to UINT8)", "ELEMENT_WISE_CLIP1 (UINT8, [0, 1])")
DIFFERS = ("the DML EP's Cast to bool is CAST to UINT8 then CLIP1 to [0, 1]: a nonzero value the cast makes 0 "
           "(a float in (-1, 1) or NaN, a negative float where the cast clamps, an integer whose low 8 bits are 0) is false there, "
           "true in ONNX's Cast")

# The graph's parts run as DirectML OPERATORS of other modules (cast's, element_wise_clip's).
OPERATORS: tuple = ()


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """Cast to uint8 and DmlClipToBool of a Cast to bool whose parts both run on DirectML; the value
    made is the uint8 of the input's shape."""
    x = node.input[0]
    x_info = static.get(x)
    to_bool = any(a.name == "to" and onnx.helper.get_attribute_value(a) == onnx.TensorProto.BOOL for a in node.attribute)
    if x_info is None or not to_bool:
        return None
    prefix = node.name or node.output[0]
    codes = graph.unique_name(f"{node.output[0]}.uint8")
    made = {codes: (x, np.dtype(np.uint8), True)}
    nodes = (onnx.helper.make_node("Cast", [x], [codes], name=f"{prefix}.cast", to=onnx.TensorProto.UINT8),
             onnx.helper.make_node(CLIP_TO_BOOL, [codes], list(node.output), name=node.name, domain=DML_DOMAIN))
    infos = {**derived_infos(made, {x: x_info}), x: x_info}
    if not all(on_dml(part, infos) for part in nodes):
        return None
    return nodes, made
