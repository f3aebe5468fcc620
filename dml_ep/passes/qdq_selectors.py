"""Which QDQ node groups a rule may fuse: onnxruntime's NodeGroupSelectors (qdq_selectors.cc).

A selector ``(graph, target, int8_allowed)`` returns the :class:`NodeGroup` (the DQs feeding the
target's inputs, the target, the Qs reading its outputs) or, when a condition rejects it, the
reason as a string. Only Conv and MatMul read ``int8_allowed`` (session.qdqisint8allowed).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from .editable import EditableGraph
from .qdq_util import (input_type, is_4bit, is_dq, is_positive_scalar_scale, is_q, is_qdq_pair_supported, narrow_type_problem, output_type,
                       scalar_constant)

INT8, INT32 = np.dtype(np.int8), np.dtype(np.int32)
INT8_NOT_ALLOWED = "int8 activations are fused only where session.qdqisint8allowed is 1 (default 0 on x86-64)"


@dataclasses.dataclass
class NodeGroup:
    """A target with its DQ inputs (by input index; None where an input has no DQ) and its Qs."""

    target: onnx.NodeProto
    dqs: list[onnx.NodeProto | None]
    qs: list[onnx.NodeProto]

    @property
    def nodes(self) -> list[onnx.NodeProto]:
        return [dq for dq in self.dqs if dq is not None] + [self.target] + self.qs


def qdq_group(graph: EditableGraph, target: onnx.NodeProto, dq_count: int | None = None, allow_no_q: bool = False):
    """GetQDQSelection + CheckQDQNodes: every counted input from a DQ that only the target reads,
    every output read by Qs only, none of them a graph output. ``dq_count`` defaults to the
    number of inputs the target has."""
    dqs = [graph.producer(name) if name else None for name in target.input]
    dqs = [dq if is_dq(dq) else None for dq in dqs]
    problem = _dq_inputs_problem(graph, target, dqs, dq_count)
    if problem is not None:
        return problem
    found = _output_qs(graph, target)
    if isinstance(found, str):
        return found
    qs, edges = found
    if not qs:
        return NodeGroup(target, dqs, []) if allow_no_q else _no_q_reason(graph, target)
    outputs = sum(1 for name in target.output if name)
    if not (outputs == len(qs) == edges) or any(name in graph.graph_outputs for name in target.output):
        return "its outputs need one QuantizeLinear each, and nothing else"
    return NodeGroup(target, dqs, qs)


def _dq_inputs_problem(graph: EditableGraph, target: onnx.NodeProto, dqs: list[onnx.NodeProto | None],
                       dq_count: int | None) -> str | None:
    """CheckQDQNodes on the input side: ``dq_count`` DQs (default: one per input), each with one
    output edge, to the target (NodeGroup::CanCreateNodeGroup), and none a graph output."""
    expected = sum(1 for name in target.input if name) if dq_count is None else dq_count
    found = sum(dq is not None for dq in dqs)
    if found != expected:
        return f"{found} of its inputs come from DequantizeLinear, {expected} must"
    for dq in dqs:
        if dq is None:
            continue
        if dq.output[0] in graph.graph_outputs:
            return f"DequantizeLinear {dq.name or dq.output[0]!r} is also a graph output"
        if graph.consumers(dq.output[0]) != [target]:
            return f"DequantizeLinear {dq.name or dq.output[0]!r} has other consumers"
    return None


def _output_qs(graph: EditableGraph, target: onnx.NodeProto) -> tuple[list[onnx.NodeProto], int] | str:
    """The Qs reading the target's outputs and the number of edges out of it, or why an output
    rules the group out: it feeds a Q and another node, or it feeds a Q and is a graph output."""
    qs, edges = [], 0
    for name in target.output:
        if not name:
            continue
        consumers = graph.consumers(name)
        edges += len(consumers)
        quantizers = [c for c in consumers if is_q(c)]
        if quantizers and len(quantizers) != len(consumers):
            return f"output {name!r} feeds both QuantizeLinear and other nodes"
        if quantizers and name in graph.graph_outputs:
            return f"output {name!r} is a graph output"
        qs += quantizers
    return qs, edges


def _no_q_reason(graph: EditableGraph, target: onnx.NodeProto) -> str:
    """Why a target that needs a Q has none: a Relu/Clip in between says more than "no Q" does."""
    activation = between_op_and_q(graph, target)
    if activation is not None:
        return f"its output goes through {activation.op_type} before the QuantizeLinear"
    return "no QuantizeLinear reads its output"



def between_op_and_q(graph: EditableGraph, target: onnx.NodeProto) -> onnx.NodeProto | None:
    """The Relu or Clip that alone reads ``target``'s output and alone feeds a Q, if there is one."""
    readers = graph.consumers(target.output[0]) if target.output else []
    if len(readers) != 1 or readers[0].op_type not in ("Relu", "Clip") or target.output[0] in graph.graph_outputs:
        return None
    after = graph.consumers(readers[0].output[0])
    return readers[0] if len(after) == 1 and is_q(after[0]) else None


def drop_qdq(graph, target, int8_allowed=False, allow_16bit=False, allow_nonpositive_scale=True):
    """DropQDQNodeGroupSelector: DQ -> op -> Q with the same type and the same constant parameters."""
    group = qdq_group(graph, target, dq_count=1)
    if isinstance(group, str):
        return group
    if len(group.qs) != 1 or group.dqs[0] is None:
        return "it needs a DequantizeLinear on input 0 and one QuantizeLinear"
    dq, q = group.dqs[0], group.qs[0]
    dtype = input_type(graph, dq)
    problem = _type_problem(dtype, output_type(graph, q), allow_16bit)
    if problem:
        return problem
    if not allow_nonpositive_scale and not is_positive_scalar_scale(graph, q):
        return "the QuantizeLinear scale is not a positive constant scalar"
    if not is_qdq_pair_supported(graph, q, dq):
        return "the DequantizeLinear and QuantizeLinear parameters are not the same constant scalars"
    return group


def drop_qdq_16bit(graph, target, int8_allowed=False):
    return drop_qdq(graph, target, allow_16bit=True)


def drop_qdq_positive_scale(graph, target, int8_allowed=False):
    return drop_qdq(graph, target, allow_nonpositive_scale=False)


def drop_dq(graph, target, int8_allowed=False):
    """DropDQNodeGroupSelector (ArgMax): one DQ with constant scalar scale and zero point."""
    group = qdq_group(graph, target, dq_count=1, allow_no_q=True)
    if isinstance(group, str):
        return group
    dq = group.dqs[0]
    if dq is None:
        return "input 0 does not come from DequantizeLinear"
    problem = narrow_type_problem(input_type(graph, dq))
    if problem:
        return problem
    if len(dq.input) < 3 or scalar_constant(graph, dq.input[1]) is None or scalar_constant(graph, dq.input[2]) is None:
        return "the DequantizeLinear scale and zero point are not constant scalars"
    return group


def unary(graph, target, int8_allowed=False):
    """UnaryNodeGroupSelector: one DQ, one Q, the same quantized type."""
    group = qdq_group(graph, target, dq_count=1)
    if isinstance(group, str):
        return group
    if group.dqs[0] is None:
        return "input 0 does not come from DequantizeLinear"
    return _type_problem(input_type(graph, group.dqs[0]), output_type(graph, group.qs[0])) or group


def binary(graph, target, int8_allowed=False):
    """BinaryNodeGroupSelector: two DQs and a Q, all of one quantized type."""
    group = qdq_group(graph, target)
    if isinstance(group, str):
        return group
    a, b = (input_type(graph, dq) for dq in group.dqs[:2])
    if a != b:
        return f"input types differ ({a}, {b})"
    return _type_problem(a, output_type(graph, group.qs[0])) or group


def variadic(graph, target, int8_allowed=False):
    """VariadicNodeGroupSelector (Concat): every input from a DQ, every type the same."""
    group = qdq_group(graph, target)
    if isinstance(group, str):
        return group
    types = {input_type(graph, dq) for dq in group.dqs if dq is not None} | {output_type(graph, q) for q in group.qs}
    if len(types) != 1:
        return f"input and output types differ ({', '.join(sorted(map(str, types)))})"
    return narrow_type_problem(types.pop()) or group


def conv(graph, target, int8_allowed=False):
    """ConvNodeGroupSelector: X and W (and an int32 bias) from DQs, a Q; int8 X only where allowed."""
    group = qdq_group(graph, target)
    if isinstance(group, str):
        return group
    x, w = (input_type(graph, dq) for dq in group.dqs[:2])
    problem = _type_problem(x, output_type(graph, group.qs[0])) or narrow_type_problem(w)
    if problem:
        return problem
    problem = _int8_problem(x, w, int8_allowed)
    if problem:
        return problem
    if len(group.dqs) > 2 and group.dqs[2] is not None and input_type(graph, group.dqs[2]) != INT32:
        return f"the bias DequantizeLinear reads {input_type(graph, group.dqs[2])}, not int32"
    return group


def matmul(graph, target, int8_allowed=False):
    """MatMulNodeGroupSelector: A and B from DQs; with a Q -> QLinearMatMul, without -> MatMulIntegerToFloat.

    Without a Q onnxruntime checks neither single consumers nor graph outputs (as here).
    """
    dqs = [graph.producer(name) for name in target.input]
    if len(dqs) != 2 or not all(is_dq(dq) for dq in dqs):
        return "A and B do not both come from DequantizeLinear"
    a, b = (input_type(graph, dq) for dq in dqs)
    problem = narrow_type_problem(a) or narrow_type_problem(b) or _int8_problem(a, b, int8_allowed)
    if problem:
        return problem
    if not any(is_q(c) for c in graph.consumers(target.output[0])):
        return NodeGroup(target, dqs, [])
    group = qdq_group(graph, target)
    if isinstance(group, str):
        return group
    out = output_type(graph, group.qs[0])
    return group if a == out else f"input type {a} differs from output type {out}"


def gemm(graph, target, int8_allowed=False):
    """GemmNodeGroupSelector, as far as dml_ep needs it (the rule is CPU-only): A and B (and a bias,
    if it has one from a DQ) from DQs, an optional Q."""
    if not all(is_dq(graph.producer(name)) for name in target.input[:2]):
        return "A and B do not both come from DequantizeLinear"
    group = qdq_group(graph, target, dq_count=sum(is_dq(graph.producer(name)) for name in target.input if name), allow_no_q=True)
    if isinstance(group, str):
        return group
    a, b = (input_type(graph, dq) for dq in group.dqs[:2])
    return narrow_type_problem(a) or narrow_type_problem(b) or group


def where(graph, target, int8_allowed=False):
    """WhereNodeGroupSelector (CPU-only): X and Y from DQs of the output's type, a Q."""
    group = qdq_group(graph, target, dq_count=2)
    if isinstance(group, str):
        return group
    types = {input_type(graph, dq) for dq in group.dqs if dq is not None} | {output_type(graph, group.qs[0])}
    return "input and output types differ" if len(types) != 1 else group


def _type_problem(dtype_in, dtype_out, allow_16bit=False) -> str | None:
    if dtype_in != dtype_out:
        return f"input type {dtype_in} differs from output type {dtype_out}"
    return narrow_type_problem(dtype_in, allow_16bit)


def _int8_problem(dtype_in, dtype_weight, int8_allowed) -> str | None:
    if dtype_in != INT8:
        return None
    if not int8_allowed:
        return INT8_NOT_ALLOWED
    return None if dtype_weight == INT8 else f"int8 activations need int8 weights, not {dtype_weight}"


def dq_matmul_nbits(graph, target, int8_allowed=False):
    """DQMatMulNodeGroupSelector (1.20+): B alone from a DQ whose only reader is the MatMul, no Q
    after it; the DQ's weight int4 or uint4, its scale float or float16, ``axis`` 0 and a power of
    two ``block_size`` of at least 16 (both given), its weight, scale and zero point constants of
    rank 2 with ``[ceil(K / block_size), N]`` scales and zero points."""
    dqs = [dq if is_dq(dq) else None for dq in (graph.producer(name) if name else None for name in target.input)]
    if sum(dq is not None for dq in dqs) != 1 or len(dqs) < 2 or not is_dq(dqs[1]):
        return "B alone must come from DequantizeLinear"
    if any(is_q(c) for name in target.output if name for c in graph.consumers(name)):
        return "its output goes to a QuantizeLinear"
    dq = dqs[1]
    if dq.output[0] in graph.graph_outputs or len(graph.consumers(dq.output[0])) != 1:
        return f"DequantizeLinear {dq.name or dq.output[0]!r} has other consumers"
    problem = _blocked_4bit_problem(graph, dq)
    return problem if problem else NodeGroup(target, dqs, [])


def _blocked_4bit_problem(graph, dq) -> str | None:
    """Why a DQ is not one DQMatMulToMatMulNBits takes (None if it is): its types and attributes,
    then its constants."""
    scale_type = graph.dtype(dq.input[1])
    if scale_type not in (np.dtype(np.float32), np.dtype(np.float16)):
        return f"its scale type {scale_type} is not float or float16"
    if not is_4bit(graph.dtype(dq.input[0])):
        return f"its weight type {graph.dtype(dq.input[0])} is not int4 or uint4"
    attributes = {a.name: a.i for a in dq.attribute}
    if attributes.get("axis") != 0:
        return "its axis is not given as 0"
    block_size = attributes.get("block_size")
    if block_size is None or block_size < 16 or block_size & (block_size - 1):
        return f"its block_size {block_size} is not a power of two of at least 16"
    return _blocked_constants_problem(graph, dq, block_size)


def _blocked_constants_problem(graph, dq, block_size: int) -> str | None:
    weight, scale = graph.constant(dq.input[0]), graph.constant(dq.input[1])
    zero_point = graph.constant(dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
    if weight is None or scale is None or (len(dq.input) > 2 and dq.input[2] and zero_point is None):
        return "its weight, scale and zero point are not all constants"
    if weight.ndim != 2 or scale.ndim != 2 or (zero_point is not None and zero_point.ndim != 2):
        return "its weight, scale and zero point are not all of rank 2"
    blocks = (weight.shape[0] + block_size - 1) // block_size
    if scale.shape != (blocks, weight.shape[1]) or (zero_point is not None and zero_point.shape != scale.shape):
        return f"its scale and zero point are not of shape [{blocks}, {weight.shape[1]}]"
    return None
