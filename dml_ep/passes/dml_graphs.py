"""The DML EP's operators that are small DirectML graphs, planned as one node per DirectML operator.

com.microsoft DynamicQuantizeMatMul is, in the DML EP (DmlOperatorDynamicQuantizeMatMul.cpp L66-148),
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

com.microsoft QLinearSigmoid is, in the DML EP (DmlOperatorQLinearSigmoid.cpp L71-159, "the first
usage of graph based implementation"), ELEMENT_WISE_DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID (in
place on a FLOAT32 intermediate) -> ELEMENT_WISE_QUANTIZE_LINEAR. dml_ep plans it as com.microsoft
DequantizeLinear (x, x_scale, x_zero_point to a float32 value of its own), com.microsoft.dml
``DmlSigmoid`` (to a second one: dml_ep's values are not written in place), and com.microsoft
QuantizeLinear (to the node's output), all three standing for the user's node. The Q/DQ nodes
carry ``axis=0``: the EP puts a 1-D scale or zero point on axis 0 (L32-66), where
DmlOperatorElementwiseQLinear would read ``axis``; unlike that class it takes no 1-D length-1
parameter but on a first dimension of 1 (``ML_CHECK_VALID_ARGUMENT``), which the QLinearSigmoid row
reports. A node with fewer than 5 inputs is the CPU's (QueryQLinearSigmoid), and is not split.
onnxruntime's QDQ rules make QLinearSigmoid for DML nodes from DQ -> Sigmoid -> Q.

com.microsoft QLinearConcat is, in the DML EP (DmlOperatorQLinearConcat.cpp L100-165), one
ELEMENT_WISE_DEQUANTIZE_LINEAR per input to FLOAT32, JOIN, then ELEMENT_WISE_QUANTIZE_LINEAR:
planned as those, the JOIN as com.microsoft.dml ``DmlJoin``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import onnx

from ..graph import ValueInfo
from ..operators.activation import misplaced_parameter
from .dml_fusion import DML_DOMAIN
from .editable import EditableGraph
from .qdq_actions import MS_DOMAIN

NAME = "DmlOperatorDynamicQuantizeMatMul"
QUANTIZE = "DmlDynamicQuantizeLinear"
SIGMOID_NAME = "DmlOperatorQLinearSigmoid"
SIGMOID = "DmlSigmoid"
CONCAT_NAME = "DmlOperatorQLinearConcat"
JOIN = "DmlJoin"
FLOAT32 = np.dtype(np.float32)
GRAPHS = (NAME, SIGMOID_NAME, CONCAT_NAME)  # the rules of the nodes a split makes: compare runs each group as one
INTEGER_TYPES = {np.dtype(np.uint8): "tensor(uint8)", np.dtype(np.int8): "tensor(int8)"}


def dynamic_quantize_matmul_graph(graph: EditableGraph, static: dict, on_dml: Callable) -> dict[str, tuple]:
    """Split each DynamicQuantizeMatMul whose two operators ``on_dml(node, infos)`` accepts. Returns
    the values the split made, name -> (the value A they derive from, element type, whether it is
    A's codes (A's shape) or a scalar): the planner types them for any input shape."""
    derived = {}
    for node in [n for n in graph.nodes if n.domain == MS_DOMAIN and n.op_type == "DynamicQuantizeMatMul"]:
        a, b = node.input[0], node.input[1]
        b_type = graph.dtype(b) or getattr(static.get(b), "dtype", None)
        if b_type not in INTEGER_TYPES or static.get(a) is None:
            continue
        names = [graph.unique_name(f"{node.output[0]}.{part}") for part in ("a_quantized", "a_scale", "a_zero_point")]
        made = {names[0]: (a, b_type, True), names[1]: (a, np.dtype(np.float32), False), names[2]: (a, b_type, False)}
        quantize = onnx.helper.make_node(QUANTIZE, [a], names, name=f"{node.name}.quantize" if node.name else "", domain=DML_DOMAIN,
                                         to=onnx.helper.np_dtype_to_tensor_dtype(b_type))
        optional = list(node.input[2:5]) + [""] * (5 - len(node.input))  # b_scale, b_zero_point, bias
        matmul = onnx.helper.make_node("MatMulIntegerToFloat", [names[0], b, names[1], optional[0], names[2], *optional[1:]],
                                       list(node.output), name=node.name, domain=MS_DOMAIN)
        infos = derived_infos(made, static)
        if not (on_dml(quantize, infos) and on_dml(matmul, infos)):
            continue
        _split(graph, node, (quantize, matmul), NAME)
        derived.update(made)
    return derived


def qlinear_sigmoid_graph(graph: EditableGraph, static: dict, on_dml: Callable) -> dict[str, tuple]:
    """Split each QLinearSigmoid of 5 inputs whose three operators ``on_dml(node, infos)`` accepts.
    Returns the values the split made, as :func:`dynamic_quantize_matmul_graph` does (both are
    float32 of x's shape)."""
    derived = {}
    for node in [n for n in graph.nodes if n.domain == MS_DOMAIN and n.op_type == "QLinearSigmoid"]:
        x = node.input[0]
        if len(node.input) < 5 or getattr(static.get(x), "dtype", None) is None:  # QueryQLinearSigmoid: the CPU's
            continue
        shapes = {name: np.shape(constant) if (constant := graph.constant(name)) is not None else getattr(static.get(name), "shape", None)
                  for name in node.input[1:5] if name}
        x_info = static[x]
        if x_info.shape is None:
            # x's rank unknown to dml_ep (onnx's inference skips contrib ops; onnxruntime's knows them): with scalar
            # parameters nothing the EP checks depends on it, and each part is planned from the real shapes of a run
            if any(shape != () for shape in shapes.values()):
                continue
            x_info = ValueInfo(x, x_info.dtype, (1,), x_info.type)
        elif misplaced_parameter(x_info.shape, shapes) is not None:  # the real EP fails creating it: the row says so
            continue
        x_scale, x_zero_point, y_scale, y_zero_point = node.input[1:5]
        names = [graph.unique_name(f"{node.output[0]}.{part}") for part in ("dequantized", "sigmoid")]
        made = {name: (x, FLOAT32, True) for name in names}
        prefix = node.name or node.output[0]
        dequantize = onnx.helper.make_node("DequantizeLinear", [x, x_scale, x_zero_point], [names[0]], name=f"{prefix}.dequantize",
                                           domain=MS_DOMAIN, axis=0)
        sigmoid = onnx.helper.make_node(SIGMOID, [names[0]], [names[1]], name=f"{prefix}.sigmoid", domain=DML_DOMAIN)
        quantize = onnx.helper.make_node("QuantizeLinear", [names[1], y_scale, y_zero_point], list(node.output), name=node.name,
                                         domain=MS_DOMAIN, axis=0)
        infos = {**derived_infos(made, {x: x_info}), x: x_info}
        if not all(on_dml(part, infos) for part in (dequantize, sigmoid, quantize)):
            continue
        _split(graph, node, (dequantize, sigmoid, quantize), SIGMOID_NAME)
        derived.update(made)
    return derived


def derived_infos(derived: dict[str, tuple], values: dict) -> dict[str, ValueInfo]:
    """The ValueInfos of the values a split made, from those of the values they derive from."""
    infos = {}
    for name, (source, dtype, codes) in derived.items():
        info = values.get(source)
        shape = (info.shape if info is not None else None) if codes else ()
        infos[name] = ValueInfo(name, dtype, shape, INTEGER_TYPES.get(dtype, "tensor(float)"))
    return infos



def qlinear_concat_graph(graph: EditableGraph, static: dict, on_dml: Callable) -> dict[str, tuple]:
    """Split each com.microsoft QLinearConcat whose operators ``on_dml`` accepts, as
    DmlOperatorQLinearConcat.cpp builds it (L100-165): one DequantizeLinear per input to float32,
    a com.microsoft.dml ``DmlJoin`` (DML_OPERATOR_JOIN) of them, one QuantizeLinear to the output.
    Where the inputs' ranks are known only when run, the split is made and each run plans its
    parts; the CPU EP runs a DmlJoin that falls back as a Concat.
    Inputs: y_scale, y_zero_point, then (x, x_scale, x_zero_point) per input. Returns the values
    made, as :func:`dynamic_quantize_matmul_graph` does."""
    derived = {}
    for node in [n for n in graph.nodes if n.domain == MS_DOMAIN and n.op_type == "QLinearConcat"]:
        triples = [node.input[i:i + 3] for i in range(2, len(node.input), 3)]
        if len(node.input) < 5 or (len(node.input) - 2) % 3 or any(static.get(x) is None for x, _, _ in triples):
            continue
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
            continue
        _split(graph, node, (*dequantize, join, quantize), CONCAT_NAME)
        derived.update(made)
    return derived


def _split(graph: EditableGraph, node: onnx.NodeProto, parts: tuple, rule: str) -> None:
    """``node`` replaced by ``parts`` in order, the last making its outputs, all standing for it
    with one Origin, which keeps ``node`` (the rewritten model writes it back: onnxruntime's graph has it)."""
    *before, last = parts
    graph.replace([node], last, rule, at=node)
    graph.origins[id(last)] = dataclasses.replace(graph.origin(last), whole=node)
    for part in before:
        graph.insert_before(last, part, graph.origin(last), None)
