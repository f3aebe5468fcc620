"""com.microsoft MatMulNBits is, in the DML EP (DmlOperatorMatMulNBits.cpp, since onnxruntime 1.18),
a DirectML graph of two operators: DML_OPERATOR_DEQUANTIZE of the weight (SCALE_ZERO_POINT with zero
points, else SCALE, whose unsigned midpoint 8 or 128 is MatMulNBits' own default), then
DML_OPERATOR_GEMM of A and the dequantized weight, TransB TRANSPOSE. dml_ep plans the node as those
two: com.microsoft.dml ``DmlDequantize`` (B, scales[, zero points]) writing the {N, K} weight, then
``DmlGemm`` (A, that weight) writing the node's output; both stand for the user's node.

What the real EP reads: N, K and bits (4 or 8) always, block_size in its support query (which
placement replays: ``support_queries``); ``accuracy_level`` never, so DirectML computes every level
alike (onnxruntime's CPU quantizes A to int8 per block at level 4: compare names that cause). Its
kernel refuses g_idx and bias (inputs 4 and 5) after the query took the node: the real EP's session
fails there, and so does dml_ep (:func:`unsplit`). The weight's bytes are read as UINT4/UINT8
{N, K}: the layout MatMulNBits packs ([N, blocks, block_size * bits / 8], low nibble first) is the
same memory, since the query takes only K that are whole blocks.

The split is made where both parts run on DirectML; otherwise the node stays whole and says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import onnx

from ...core.errors import RealEpError
from ...numerics.kernels.matmul_nbits import dequantized_weight, host_runs_sqnbit_int8, int8_blocks
from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...realep.placement import ON_DML
from ..dequantize import misread_zero_points
from ..dml_graph import FloatProducts, derived_infos
from ..importing import Fallback, NodeContext
from ..nodes import DmlNode

if TYPE_CHECKING:
    from ...numerics.arithmetic import Arithmetic

RULE = "DmlOperatorMatMulNBits"
DEQUANTIZE, GEMM = "DmlDequantize", "DmlGemm"
DIRECTML_OPERATORS = ("DEQUANTIZE", "GEMM")
G_IDX, BIAS = 4, 5

# The graph's parts run as DirectML OPERATORS of other modules (dequantize's DEQUANTIZE, gemm's GEMM).
OPERATORS: tuple = ()


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """DEQUANTIZE of the weight, GEMM of A and it, where both run on DirectML (``on_dml(part, infos)``):
    the weight, its scales and zero points constants, no g_idx or bias; the value made is the {N, K} weight."""
    weight_inputs = [name for name in node.input[1:4] if name]  # B, scales, the zero points if given
    if any(len(node.input) > i and node.input[i] for i in (G_IDX, BIAS)) or not all(n in graph.constants for n in weight_inputs):
        return None
    scales = graph.constants[node.input[2]]
    attributes = {a.name: a.i for a in node.attribute}
    n, k = attributes.get("N"), attributes.get("K")
    if n is None or k is None:
        return None
    weight = graph.unique_name(f"{node.output[0]}.weight")
    made = {weight: (node.input[0], np.dtype(scales.dtype), (int(n), int(k)))}
    dequantize = onnx.helper.make_node(DEQUANTIZE, weight_inputs, [weight], name=f"{node.name}.dequantize" if node.name else "", domain=DML_DOMAIN,
                                       N=n, K=k, bits=attributes.get("bits", 4))
    gemm = onnx.helper.make_node(GEMM, [node.input[0], weight], list(node.output), name=node.name, domain=DML_DOMAIN,
                                 bits=attributes.get("bits", 4), accuracy_level=attributes.get("accuracy_level", 0),
                                 block_size=attributes.get("block_size", 0))  # for the onnxruntime arithmetic
    infos = derived_infos(made, static)
    a = static.get(node.input[0])
    if a is not None and a.shape and a.shape[-1] is None:  # A's last dimension is K (MatMulNBits' schema), also where a run computes it
        infos[node.input[0]] = a._replace(shape=(*a.shape[:-1], int(k)))
    if not (on_dml(dequantize, infos) and on_dml(gemm, infos)):
        return None
    return (dequantize, gemm), made


def unsplit(ctx: NodeContext) -> DmlNode:
    """A MatMulNBits the planner did not split: with g_idx or bias the real EP's kernel fails
    (DmlOperatorMatMulNBits.cpp: ``!IsInputValid(4) && !IsInputValid(5)``); otherwise it runs on
    DirectML, which dml_ep models only as the split."""
    if any(ctx.input_name(index) for index in (G_IDX, BIAS)):
        raise RealEpError("the DML EP's MatMulNBits takes no g_idx or bias (inputs 4 and 5); its support query does not "
                          "look at them, so the real EP assigns the node and fails creating its kernel", node=ctx.node)
    attributes = {a.name: a.i for a in ctx.node.attribute}
    scales = ctx.constants.get(ctx.input_name(2))
    if ctx.input_name(3) and scales is not None and attributes.get("N"):
        misread = misread_zero_points(attributes.get("bits", 4), scales.size // attributes["N"])
        if misread:
            raise Fallback(misread, ON_DML)
    raise Fallback(f"MatMulNBits is a graph of two DirectML operators ({', '.join(DIRECTML_OPERATORS)}); dml_ep plans it as "
                   "those only where its weight, scales and zero points are constants and both run on DirectML before a run", ON_DML)


def exact_products(node: onnx.NodeProto, constants: dict, values: dict, output_dtype: np.dtype, arithmetic: Arithmetic) -> FloatProducts:
    """The products compare holds onnxruntime's CPU kernel's value to, at the node's accuracy level,
    from the reference's A (``values``): the exact product; at level 4 also the CPU's, of A quantized
    to int8 per block (CompInt8), which DirectML never computes; for a float16 output DirectML's
    product of float16 weights (float32 on the CPU). Where ``arithmetic`` quantizes A as the CPU does
    (the "onnxruntime" arithmetic on a host with CompInt8), the CPU's product is the one both sum."""
    attributes = {attr.name: attr.i for attr in node.attribute}
    n, k, bits, block_size = attributes["N"], attributes["K"], attributes.get("bits", 4), attributes["block_size"]
    zero_points = constants.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
    weight = dequantized_weight(constants[node.input[1]], constants[node.input[2]], zero_points, n, k, bits, block_size).T
    a = values[node.input[0]]
    a64 = np.asarray(a, np.float64)
    cpu_a = int8_blocks(a, block_size) if attributes.get("accuracy_level", 0) == 4 else None
    cpu = None if cpu_a is None else (cpu_a @ weight, np.abs(cpu_a) @ np.abs(weight))
    on_dml = a64 @ weight.astype(np.float16).astype(np.float64) if output_dtype == np.float16 else None
    if cpu is not None and arithmetic.onnxruntime and host_runs_sqnbit_int8():
        return FloatProducts(cpu, k, None, on_dml)
    return FloatProducts((a64 @ weight, np.abs(a64) @ np.abs(weight)), k, cpu, on_dml)
