"""MatMulIntegerToFloatFusion: MatMulInteger -> Cast -> Mul(·, Mul(a_scale, b_scale)) [-> Add bias]
becomes com.microsoft MatMulIntegerToFloat, as onnxruntime's ``matmul_integer_to_float.cc`` does.

A Level-2 fusion, for CPU nodes in every release and for DML nodes from 1.18 (``Release``). The
pattern, as onnxruntime matches it: a Mul (7, 13, 14) with a Cast parent whose parent is a
MatMulInteger, and a Mul parent (the product of the scales); the Cast, the MatMulInteger and the
scales' Mul each have one reader and are not graph outputs. An Add that is the Mul's only reader,
whose other input is a constant bias of shape [N] or [1, ..., N] (N > 1), is taken too. float16
is fused for DML nodes only. From 1.21, for DML nodes, a MatMulInteger fed by a
DynamicQuantizeLinear whose A and B hold more than 4 GiB as floats (``CheckMatMulLargeTensors``,
symbolic sizes counting as 0) stays: DirectML's MatMulInteger metacommands cover it better.
"""

from __future__ import annotations

import numpy as np
import onnx

from ..core.releases import Release
from .editable import EditableGraph
from .qdq_actions import MS_DOMAIN
from .qdq_rules import DML

NAME = "MatMulIntegerToFloatFusion"
UINT32_MAX = 2**32 - 1


def matmul_integer_to_float_fusion(graph: EditableGraph, release: Release, provider: str, shapes: dict) -> bool:
    """Fuse every matching chain whose Mul ``provider`` runs; ``shapes`` gives the static shapes
    (None for an unknown dimension) that the large-tensor exception reads. True if any."""
    if (provider == DML and not release.matmul_integer_to_float_for_dml) or not graph.has_op("MatMulInteger"):
        return False
    changed = False
    for mul in list(graph.nodes):
        if mul not in graph or not _is(mul, "Mul") or (provider != DML and graph.dtype(mul.input[0]) == np.float16):
            continue
        chain = _chain(graph, mul)
        if chain is None:
            continue
        cast, matmul, scales = chain
        if _stays_integer(graph, release, provider, matmul, cast, shapes):
            graph.note(matmul, "MatMulIntegerToFloatFusion leaves a DynamicQuantizeLinear-fed MatMulInteger over 4 GiB "
                               "as floats to DirectML's MatMulInteger (1.21+)")
            continue
        _fuse(graph, mul, cast, matmul, scales)
        changed = True
    return changed


def _chain(graph: EditableGraph, mul: onnx.NodeProto) -> tuple[onnx.NodeProto, onnx.NodeProto, onnx.NodeProto] | None:
    """The Cast, MatMulInteger and scales' Mul above ``mul``, each with one reader and no graph
    output; None when the pattern is not there."""
    cast = _parent(graph, mul, "Cast")
    matmul = _parent(graph, cast, "MatMulInteger") if cast is not None else None
    scales = _parent(graph, mul, "Mul")
    if cast is None or matmul is None or scales is None or not all(_one_reader(graph, n) for n in (cast, matmul, scales)):
        return None
    return cast, matmul, scales


def _stays_integer(graph: EditableGraph, release: Release, provider: str, matmul: onnx.NodeProto, cast: onnx.NodeProto,
                   shapes: dict) -> bool:
    """The 1.21+ exception for DML nodes: a DynamicQuantizeLinear-fed MatMulInteger over 4 GiB as floats is not fused."""
    return (provider == DML and release.large_matmul_stays_integer and _parent(graph, matmul, "DynamicQuantizeLinear") is not None
            and _large(graph, matmul, cast, shapes))


def _fuse(graph: EditableGraph, mul: onnx.NodeProto, cast: onnx.NodeProto, matmul: onnx.NodeProto,
          scales: onnx.NodeProto) -> None:
    """Replace the chain (and a bias Add after ``mul``) by com.microsoft MatMulIntegerToFloat
    [A, B, a_scale, b_scale, a_zp, b_zp(, bias)], named after the MatMulInteger, writing the last node's output."""
    add, bias = _bias_add(graph, mul) or (None, None)
    zero_points = list(matmul.input[2:4]) + [""] * (4 - len(matmul.input))
    inputs = [matmul.input[0], matmul.input[1], scales.input[0], scales.input[1], *zero_points]
    if add is not None:
        inputs.append(bias)
    last = add if add is not None else mul
    fused = onnx.helper.make_node("MatMulIntegerToFloat", inputs, list(last.output), name=matmul.name, domain=MS_DOMAIN)
    graph.replace([n for n in (matmul, cast, scales, mul, add) if n is not None], fused, NAME, at=last)


def _is(node: onnx.NodeProto | None, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and node.domain in ("", "ai.onnx")


def _parent(graph: EditableGraph, node: onnx.NodeProto, op_type: str) -> onnx.NodeProto | None:
    """The first of ``node``'s inputs made by an ``op_type`` node (graph_utils::FirstParentByType)."""
    return next((p for p in (graph.producer(n) for n in node.input if n) if _is(p, op_type)), None)


def _one_reader(graph: EditableGraph, node: onnx.NodeProto) -> bool:
    """optimizer_utils::CheckOutputEdges(graph, node, 1): one edge out, and no graph output."""
    outputs = [n for n in node.output if n]
    return not any(n in graph.graph_outputs for n in outputs) and sum(len(graph.consumers(n)) for n in outputs) == 1


def _bias_add(graph: EditableGraph, mul: onnx.NodeProto) -> tuple[onnx.NodeProto, str] | None:
    """The Add after ``mul`` and its other input when that is a constant bias of shape [N] or
    [1, ..., N], N > 1 (onnxruntime 1.32 takes it on either side of the Add)."""
    if not _one_reader(graph, mul):
        return None
    add = graph.consumers(mul.output[0])[0]
    if not _is(add, "Add") or len(add.input) != 2:
        return None
    name = add.input[1] if add.input[0] == mul.output[0] else add.input[0]
    bias = graph.constant(name)
    if bias is None or bias.ndim < 1 or any(d != 1 for d in bias.shape[:-1]) or bias.shape[-1] <= 1:
        return None
    return add, name


def _large(graph: EditableGraph, matmul: onnx.NodeProto, cast: onnx.NodeProto, shapes: dict) -> bool:
    """CheckMatMulLargeTensors: (elements of A + elements of B, the lower-rank one counted over the
    other's leading dimensions) times the Cast's float size above UINT32_MAX."""
    a, b = (_dims(graph, name, shapes) for name in matmul.input[:2])
    if a is None or b is None:
        return False  # no shape at all: onnxruntime's check reads none either
    a_elements, b_elements = int(np.prod(a, dtype=np.uint64)), int(np.prod(b, dtype=np.uint64))
    if len(a) < len(b):
        a_elements *= int(np.prod(b[: len(b) - len(a)], dtype=np.uint64))
    elif len(b) < len(a):
        b_elements *= int(np.prod(a[: len(a) - len(b)], dtype=np.uint64))
    size = 2 if graph.dtype(cast.output[0]) == np.float16 else 4
    return (a_elements + b_elements) * size > UINT32_MAX


def _dims(graph: EditableGraph, name: str, shapes: dict) -> tuple[int, ...] | None:
    constant = graph.constant(name)
    if constant is not None:
        return constant.shape
    info = shapes.get(name)
    if info is None or info.shape is None:
        return None
    return tuple(0 if d is None else d for d in info.shape)
