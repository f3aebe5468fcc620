"""com.microsoft DynamicQuantizeMatMul is, in the DML EP (DmlOperatorDynamicQuantizeMatMul.cpp L66-148),
"MatrixMultiplyIntegerToFloat(DynamicQuantizeLinear(A), B)": DML_OPERATOR_DYNAMIC_QUANTIZE_LINEAR
quantizes A to **B's data type** (int8 when the weights are int8, where onnxruntime's CPU kernel
always quantizes A to uint8), then DML_OPERATOR_MATRIX_MULTIPLY_INTEGER_TO_FLOAT. dml_ep plans the
node as those two: com.microsoft.dml ``DmlDynamicQuantizeLinear`` (attribute ``to``: B's type)
writing A's codes, scale and zero point to values of its own, then com.microsoft
MatMulIntegerToFloat reading them; so the plan, ``inspect``, ``compare --per-node`` and the
DxDispatch export show each DirectML operator. Both stand for the user's node. The split is made
only when both run on DirectML; otherwise the node stays whole.

onnxruntime never makes DynamicQuantizeMatMul for DML nodes (its fusion is for CPU and ACL nodes),
so the node is one a model brings.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...passes.qdq_actions import MS_DOMAIN
from ..dml_graph import INTEGER_TYPES, derived_infos

RULE = "DmlOperatorDynamicQuantizeMatMul"
QUANTIZE = "DmlDynamicQuantizeLinear"
DIRECTML_OPERATORS = ("DYNAMIC_QUANTIZE_LINEAR", "MATRIX_MULTIPLY_INTEGER_TO_FLOAT")


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """DYNAMIC_QUANTIZE_LINEAR of A, MATRIX_MULTIPLY_INTEGER_TO_FLOAT, where both run on DirectML
    (``on_dml(part, infos)``); the values made are A's codes (A's shape), scale and zero point."""
    a, b = node.input[0], node.input[1]
    b_type = graph.dtype(b) or getattr(static.get(b), "dtype", None)
    if b_type not in INTEGER_TYPES or static.get(a) is None:
        return None
    names = [graph.unique_name(f"{node.output[0]}.{part}") for part in ("a_quantized", "a_scale", "a_zero_point")]
    made = {names[0]: (a, b_type, True), names[1]: (a, np.dtype(np.float32), False), names[2]: (a, b_type, False)}
    quantize = onnx.helper.make_node(QUANTIZE, [a], names, name=f"{node.name}.quantize" if node.name else "", domain=DML_DOMAIN,
                                     to=onnx.helper.np_dtype_to_tensor_dtype(b_type))
    optional = list(node.input[2:5]) + [""] * (5 - len(node.input))  # b_scale, b_zero_point, bias
    matmul = onnx.helper.make_node("MatMulIntegerToFloat", [names[0], b, names[1], optional[0], names[2], *optional[1:]],
                                   list(node.output), name=node.name, domain=MS_DOMAIN)
    infos = derived_infos(made, static)
    if not (on_dml(quantize, infos) and on_dml(matmul, infos)):
        return None
    return (quantize, matmul), made
