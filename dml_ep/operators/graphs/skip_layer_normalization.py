"""com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization are, in the DML EP
(DmlOperatorSkipLayerNormalization.cpp, one class, ``simplified`` for the RMS form), a DirectML graph:
ELEMENT_WISE_ADD (input, skip) -> [ELEMENT_WISE_ADD of the bias, input 4] -> MEAN_VARIANCE_NORMALIZATION2
over the hidden axis, ``UseMean`` = not simplified, Scale = gamma (input 2), Bias = input 3. Output 3
(input + skip + bias) is the last ADD's output; outputs 1 and 2 (mean, inv_std_var) are refused by
QuerySkipLayerNormalization. dml_ep plans it as those parts: ai.onnx Add nodes (ELEMENT_WISE_ADD1
without an activation: ELEMENT_WISE_ADD's math) and a com.microsoft.dml ``DmlMeanVarianceNormalization``.

The bias mismatch: the class reads its inputs by SkipLayerNormalization's positions (input, skip,
gamma, beta, bias). SkipSimplifiedLayerNormalization's input 3 is its ``bias``, which onnxruntime's CPU
kernel adds before normalizing (and into output 3); the DML EP feeds it to MVN2's post-normalization
Bias. So with a bias the real EP computes ``rms_norm(input + skip) * gamma + bias`` and output 3 is
``input + skip``: dml_ep does the same, and differs from onnxruntime there by design
(:func:`post_normalization_bias` names it).

The "onnxruntime" arithmetic runs each part as its own kernel: float32 parts are onnxruntime's
float32 loop bit for bit (an IEEE add, then the normalization). For float16 the graph's ADD rounds the
sum to float16 before the MVN2, where onnxruntime's CPU kernel (skip_layer_norm.cc) normalizes the
float32 sum: the MVN2 also binds the ADD's operands (input, skip, [input 4]) and, in the "onnxruntime"
arithmetic, normalizes their float32 sum, bit for bit; the "directml" arithmetic keeps the float16
rounding, which compare names (the cause "graph", ``conformance.causes.SKIP_SUM_ROUNDING``). Output 3 is the ADD's float16 sum in both.
Residual: with input 4 (a float16 SkipLayerNormalization's bias) the graph's output 3 rounds twice
(input + skip, then + bias), onnxruntime's once.
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

RULE, SIMPLIFIED_RULE = "DmlOperatorSkipLayerNormalization<false>", "DmlOperatorSkipLayerNormalization<true>"  # its template argument
NORMALIZATION = "DmlMeanVarianceNormalization"
DIRECTML_OPERATORS = ("ELEMENT_WISE_ADD", "ELEMENT_WISE_ADD", "MEAN_VARIANCE_NORMALIZATION2")
SUM_OUTPUT = 3

# The graph's parts run as DirectML OPERATORS of other modules (element_wise_add1's ADD1, mean_variance_normalization's MVN2).
OPERATORS: tuple = ()


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if len(node.input) > index else ""


def post_normalization_bias(node: onnx.NodeProto) -> str:
    """The input the DML EP adds after normalizing (MVN2's Bias): input 3, for SkipSimplifiedLayerNormalization its
    ``bias``, which onnxruntime adds before; "" where there is none."""
    return _input(node, 3)


def _splittable(node: onnx.NodeProto, static: dict):
    """The input's ValueInfo where the split applies (2-D or 3-D, skip of its shape, no statistics used), else None."""
    if any(len(node.output) > index and node.output[index] for index in (1, 2)):
        return None
    source, skip = static.get(node.input[0]), static.get(node.input[1])
    if source is None or skip is None or source.shape is None or len(source.shape) not in (2, 3) or skip.shape != source.shape:
        return None
    return source


def _adds(graph: EditableGraph, node: onnx.NodeProto, dtype, bias: str) -> tuple[list, str, dict]:
    """The ADD (input, skip) and ADD of the bias, the value the last makes (output 3 where used), the values they make."""
    total = node.output[SUM_OUTPUT] if len(node.output) > SUM_OUTPUT else ""
    first = total if total and not bias else graph.unique_name(f"{node.output[0]}.input_skip")
    made = {} if first == total else {first: (node.input[0], dtype, True)}
    name = node.name
    adds = [onnx.helper.make_node("Add", [node.input[0], node.input[1]], [first], name=f"{name}.add" if name else "")]
    if not bias:
        return adds, first, made
    summed = total or graph.unique_name(f"{node.output[0]}.input_skip_bias")
    made.update({} if total else {summed: (node.input[0], dtype, True)})
    adds.append(onnx.helper.make_node("Add", [first, bias], [summed], name=f"{name}.add_bias" if name else ""))
    return adds, summed, made


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """ADD (input, skip), ADD of input 4, MVN2, where all run on DirectML: a 2-D or 3-D input whose skip
    has its shape (the DML EP reads skip at the input's sizes), and neither mean nor inv_std_var used."""
    source = _splittable(node, static)
    if source is None:
        return None
    simplified = node.op_type == "SkipSimplifiedLayerNormalization"
    epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
    adds, summed, made = _adds(graph, node, source.dtype, "" if simplified else _input(node, 4))
    post_bias = post_normalization_bias(node)
    # A float16 sum is rounded by the ADD; onnxruntime's CPU kernel normalizes it unrounded: the MVN2 binds the sum's
    # operands too, for the "onnxruntime" arithmetic (mean_variance_normalization.SKIP_SUM_FIELDS).
    operands = [node.input[0], node.input[1], "" if simplified else _input(node, 4)] if source.dtype == np.float16 else []
    normalization = onnx.helper.make_node(NORMALIZATION, [summed, node.input[2], post_bias, *operands] if post_bias or operands
                                          else [summed, node.input[2]], [node.output[0]],
                                          name=node.name, domain=DML_DOMAIN, epsilon=epsilon, simplified=int(simplified))
    infos = derived_infos(made, static)
    if not all(on_dml(part, infos) for part in (*adds, normalization)):
        return None
    return (*adds, normalization), made


def unsplit(ctx: NodeContext) -> DmlNode:
    """A SkipLayerNormalization the planner did not split: on DirectML in the real EP, modelled only as the split."""
    raise Fallback(f"{ctx.node.op_type} is a graph of DirectML operators ({', '.join(DIRECTML_OPERATORS)}); dml_ep plans it as those "
                   "only for a 2-D or 3-D input of known shape with a skip of the same shape", ON_DML)
