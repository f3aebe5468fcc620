"""com.microsoft QLinearConcat is, in the DML EP (DmlOperatorQLinearConcat.cpp L100-165), one
ELEMENT_WISE_DEQUANTIZE_LINEAR per input to FLOAT32, JOIN, then ELEMENT_WISE_QUANTIZE_LINEAR:
planned as those, the JOIN as com.microsoft.dml ``DmlJoin``.
Where the inputs' ranks are known only when run, the split is made and each run plans its parts;
the CPU EP runs a DmlJoin that falls back as a Concat.
"""

from __future__ import annotations

from typing import Callable

import onnx

from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...passes.qdq_actions import MS_DOMAIN
from ..dml_graph import FLOAT32, derived_infos

RULE = "DmlOperatorQLinearConcat"
JOIN = "DmlJoin"
DIRECTML_OPERATORS = ("ELEMENT_WISE_DEQUANTIZE_LINEAR (one per input)", "JOIN", "ELEMENT_WISE_QUANTIZE_LINEAR")


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """One DequantizeLinear per input to float32, a com.microsoft.dml ``DmlJoin`` (DML_OPERATOR_JOIN)
    of them, one QuantizeLinear to the output, where all run on DirectML (``on_dml(part, infos)``)
    or the inputs' ranks are known only when run. Inputs: y_scale, y_zero_point, then (x, x_scale,
    x_zero_point) per input; the values made are float32, each of its input's shape."""
    triples = [node.input[i:i + 3] for i in range(2, len(node.input), 3)]
    if len(node.input) < 5 or (len(node.input) - 2) % 3 or any(static.get(x) is None for x, _, _ in triples):
        return None
    out = node.output[0]
    floats = [graph.unique_name(f"{out}.x{index}") for index in range(len(triples))]
    joined = graph.unique_name(f"{out}.joined")
    prefix = node.name or out
    dequantize = [onnx.helper.make_node("DequantizeLinear", list(triple), [name], name=f"{prefix}.dequantize{index}", domain=MS_DOMAIN)
                  for index, (triple, name) in enumerate(zip(triples, floats))]
    axis = next(a.i for a in node.attribute if a.name == "axis")
    join = onnx.helper.make_node(JOIN, floats, [joined], name=f"{prefix}.join", domain=DML_DOMAIN, axis=axis)
    quantize = onnx.helper.make_node("QuantizeLinear", [joined, node.input[0], node.input[1]], [out], name=node.name, domain=MS_DOMAIN)
    made = {**{name: (x, FLOAT32, True) for (x, _, _), name in zip(triples, floats)}, joined: (out, FLOAT32, True)}
    infos = derived_infos(made, static)
    ranked = all(static[x].shape is not None for x, _, _ in triples)  # else judged in each run (DmlJoin falls back as a Concat)
    if ranked and not all(on_dml(part, infos) for part in (*dequantize, join, quantize)):
        return None
    return (*dequantize, join, quantize), made
