"""What a rule does with a selected group: onnxruntime's QDQ actions (qdq_actions.cc).

A replacement node takes the target's name and attributes and produces the Q's output tensor, so
tensor names downstream stay as the user wrote them; a drop keeps the target, reading the DQ's
input and writing the Q's output. Missing zero points become zero constants (SetOptionalZeroPoint).
"""

from __future__ import annotations

import numpy as np
import onnx

from ..core import nibbles
from ..core.errors import DmlEpError
from .editable import EditableGraph
from .qdq_selectors import NodeGroup
from .qdq_util import input_type, output_type

MS_DOMAIN = "com.microsoft"


def _parameters(graph: EditableGraph, node: onnx.NodeProto, dtype) -> list[str]:
    """A Q's or DQ's [scale, zero point], the zero point made a zero constant when absent."""
    zero_point = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    if not zero_point:
        zero_point = graph.add_constant(f"{node.name or node.output[0]}_zero_point", np.zeros((), dtype))
    return [node.input[1], zero_point]


def dq_inputs(graph: EditableGraph, dq: onnx.NodeProto | None) -> list[str]:
    """A DQ's input and parameters; ``dq``, one of a group's that the selector found (not None)."""
    assert dq is not None, "the group's selector found no DQ for this input"
    return [dq.input[0], *_parameters(graph, dq, input_type(graph, dq))]


def q_parameters(graph: EditableGraph, q: onnx.NodeProto) -> list[str]:
    return _parameters(graph, q, output_type(graph, q))


def _new_node(group: NodeGroup, op_type: str, domain: str, inputs: list[str], outputs: list[str]) -> onnx.NodeProto:
    target = group.target
    node = onnx.helper.make_node(op_type, inputs, outputs, name=target.name, domain=domain)
    node.attribute.extend(target.attribute)
    return node


def replace_with_qlinear(domain: str):
    """Unary and binary ops -> QLinear<Op>: each DQ's (x, scale, zero point), then the Q's
    parameters; QLinearSoftmax also gets the Softmax's since-version as ``opset``."""

    def action(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
        inputs = [name for dq in group.dqs for name in dq_inputs(graph, dq)] + q_parameters(graph, group.qs[0])
        node = _new_node(group, "QLinear" + group.target.op_type, domain, inputs, [group.qs[0].output[0]])
        if group.target.op_type == "Softmax":
            node.attribute.append(onnx.helper.make_attribute("opset", onnx.defs.get_schema("Softmax", graph.opset()).since_version))
        return node

    return action


def variadic_replace_with_qlinear(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """Concat -> com.microsoft QLinearConcat: the Q's parameters, then each DQ's triple."""
    inputs = q_parameters(graph, group.qs[0]) + [name for dq in group.dqs for name in dq_inputs(graph, dq)]
    return _new_node(group, "QLinearConcat", MS_DOMAIN, inputs, [group.qs[0].output[0]])


def conv_replace_with_qlinear(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """Conv -> QLinearConv: X and W triples, the Q's parameters, then the int32 bias the bias DQ reads."""
    x, w, *bias = group.dqs
    inputs = dq_inputs(graph, x) + dq_inputs(graph, w) + q_parameters(graph, group.qs[0])
    if bias and bias[0] is not None:
        inputs.append(bias[0].input[0])
    return _new_node(group, "QLinearConv", "", inputs, [group.qs[0].output[0]])


def matmul_replace(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """MatMul -> QLinearMatMul with a Q; without, com.microsoft MatMulIntegerToFloat on the float output."""
    a, b = group.dqs
    if group.qs:
        inputs = dq_inputs(graph, a) + dq_inputs(graph, b) + q_parameters(graph, group.qs[0])
        return _new_node(group, "QLinearMatMul", "", inputs, [group.qs[0].output[0]])
    (a_x, a_scale, a_zp), (b_x, b_scale, b_zp) = dq_inputs(graph, a), dq_inputs(graph, b)
    inputs = [a_x, b_x, a_scale, b_scale, a_zp, b_zp]
    return _new_node(group, "MatMulIntegerToFloat", MS_DOMAIN, inputs, list(group.target.output))


def gemm_replace_with_quant(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """Gemm -> com.microsoft QGemm (CPU nodes only): A and B triples, the int32 bias the bias DQ
    reads, then the Q's parameters (none, for a float output); ``beta`` goes."""
    a, b, *bias = group.dqs
    inputs = dq_inputs(graph, a) + dq_inputs(graph, b) + [bias[0].input[0] if bias and bias[0] is not None else ""]
    outputs = list(group.target.output)
    if group.qs:
        inputs += q_parameters(graph, group.qs[0])
        outputs = [group.qs[0].output[0]]
    node = _new_node(group, "QGemm", MS_DOMAIN, inputs, outputs)
    kept = [a for a in node.attribute if a.name != "beta"]
    del node.attribute[:]
    node.attribute.extend(kept)
    return node


def where_replace_with_qlinear(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """Where -> com.microsoft QLinearWhere (CPU nodes only): the condition, X and Y triples, the Q's parameters."""
    _, x, y = group.dqs
    inputs = [group.target.input[0]] + dq_inputs(graph, x) + dq_inputs(graph, y) + q_parameters(graph, group.qs[0])
    return _new_node(group, "QLinearWhere", MS_DOMAIN, inputs, [group.qs[0].output[0]])


def merge_into_target(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """Drop the DQ (and the Q): the target reads the DQ's input and writes the Q's output."""
    node = onnx.NodeProto()
    node.CopyFrom(group.target)
    dq = group.dqs[0]
    assert dq is not None, "the group's selector found no DQ for input 0"
    node.input[0] = dq.input[0]
    if group.qs:
        node.output[0] = group.qs[0].output[0]
    return node


MATMUL_NBITS_ACCURACY_LEVEL = 4  # session.qdq_matmulnbits_accuracy_level's default ("4", graph_transformer_utils.cc)


def dq_matmul_to_matmul_nbits(graph: EditableGraph, group: NodeGroup) -> onnx.NodeProto:
    """DQ -> MatMul -> com.microsoft MatMulNBits (DQMatMulToMatMulNBitsAction): A, then the weight,
    scale and zero point transposed into MatMulNBits' layout as ``MlasQDQTransposeBlockwiseQuantized``
    writes them (B ``[N, blocks, block_size / 2]``, scales ``[N * blocks]``, zero points
    ``[N * ceil(blocks / 2)]``, int4 shifted to uint4 by +8; B's rows past K 0, an odd row of zero points
    padded with a shifted 0); a uint4 weight without a zero point
    gets zero ones (MatMulNBits' own default is 8), an int4 one none (8 is its shifted 0)."""
    dq = group.dqs[1]
    assert dq is not None, "the selector found B's DQ"
    weight, scale = graph.constants[dq.input[0]], graph.constants[dq.input[1]]
    zero_point = graph.constants[dq.input[2]] if len(dq.input) > 2 and dq.input[2] else None
    block_size = next(a.i for a in dq.attribute if a.name == "block_size")
    (k, n), blocks = weight.shape, scale.shape[0]
    shift = 8 if str(weight.dtype) == "int4" else 0
    codes = np.zeros((blocks * block_size, n), np.uint8)  # the last block's rows past K stay 0
    codes[:k] = weight.astype(np.int16) + shift
    b = nibbles.pack(codes.T.reshape(n, blocks, block_size))
    inputs = [group.target.input[0], graph.add_constant(f"{dq.input[0]}_T", b),
              graph.add_constant(f"{dq.input[1]}_T", np.ascontiguousarray(scale.T).reshape(-1))]
    if zero_point is not None:
        rows = np.zeros((n, blocks + blocks % 2), np.int16)  # an odd row's unused nibble is a zero point of 0, shifted too
        rows[:, :blocks] = zero_point.T
        zp = nibbles.pack(rows + shift).reshape(-1)
        inputs.append(graph.add_constant(f"{dq.input[2]}_T", zp))
    elif not shift:
        inputs.append(graph.add_constant("fused_DQ_MatMul_zero_point_T", np.zeros(n * ((blocks + 1) // 2), np.uint8)))
    node = onnx.helper.make_node("MatMulNBits", inputs, list(group.target.output), name=group.target.name, domain=MS_DOMAIN,
                                 K=k, N=n, accuracy_level=MATMUL_NBITS_ACCURACY_LEVEL, bits=4, block_size=block_size)
    node.attribute.extend(group.target.attribute)
    return node


def set_matmul_nbits_accuracy_level(graph: EditableGraph, level: int) -> None:
    """The MatMulNBits nodes DQMatMulToMatMulNBits made take ``level`` (the session's
    session.qdq_matmulnbits_accuracy_level; onnxruntime enforces 0 to 4 when it makes its session)."""
    if not 0 <= level <= 4:
        raise DmlEpError(f"session.qdq_matmulnbits_accuracy_level is {level}; onnxruntime takes 0 to 4 (MatMulNBits accuracy level)")
    for node in graph.nodes:
        if node.op_type == "MatMulNBits" and "DQMatMulToMatMulNBits" in graph.origin(node).rules:
            for attribute in node.attribute:
                if attribute.name == "accuracy_level":
                    attribute.i = level
