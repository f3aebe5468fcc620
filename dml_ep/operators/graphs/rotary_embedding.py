"""com.microsoft RotaryEmbedding is, in the DML EP (DmlOperatorRotaryEmbedding.cpp, onnxruntime 1.17+, partial
rotation since #22417), a DirectML graph, all of it in the input's type (float16 or float32, no cast):

- [SPLIT of the input, viewed [B, S, N, H] (3-D) or [B, N, S, H] (4-D), into the rotated ``rd`` columns and the rest,
  where ``rotary_embedding_dim`` rd < H];
- ELEMENT_WISE_IDENTITY (ScaleBias 1, 0) of the rotated columns into [B, S, N, rd] (4-D: read through strides);
- SPLIT of that, viewed [B, S, N, 2, rd/2] (or [B, S, N, rd/2, 2] ``interleaved``), into its halves (pairs), and
  JOIN of them swapped;
- [1-D position ids, an offset: FILL_VALUE_SEQUENCE 0 .. S-1 (INT64) and ELEMENT_WISE_ADD of the offset, broadcast to
  [1, 1, B, S]]; GATHER of the cos and of the sin cache by the positions (axis 2, IndexDimensions 2);
- FILL_VALUE_SEQUENCE of the signs {-1, 1} (start -1, delta 2) in the input's type;
- ELEMENT_WISE_MULTIPLY (x, cos), (swapped, sin), (that, signs), ELEMENT_WISE_ADD of the two products;
- [JOIN of the sum and the columns past rd, along the last axis].

dml_ep plans the node as those operators (``parts``): com.microsoft.dml nodes of the rows of split.py, element_wise_identity.py,
join.py, fill_value_sequence.py, element_wise_arithmetic.py and gather.py, and ai.onnx Concat (the swap) and Mul, all
standing for the node. Differences of desc only, the same operation: the last ELEMENT_WISE_ADD of a 4-D input writes
[B, N, S, rd] packed and reads its operands through strides (the EP writes through strides); dml_ep's GATHER of a 1-D
position id reads the sum of that ADD, as the EP's does.

Arithmetic, "directml": each MULTIPLY and the ADD round once in the input's type, as the documented operators do
(float16 stays float16 between them). Whether DirectML's graph compiler fuses the element-wise chain into one shader
with float32 intermediates is not documented (DML_FLOAT_OPS.md, open question 6); it does compile the graph as one
(the EP's comment: the IDENTITY "will disappear during DML's graph compilation"), so a device may round once where
dml_ep rounds three times: within the MULTIPLYs' and the ADD's device precision. "onnxruntime": the last ADD computes
onnxruntime's CPU RotaryEmbedding (``numerics/kernels/rotary_embedding.py``: float32, one FMA on AVX2 hosts, rounded
once) from the copied input and the gathered caches it also binds, bit for bit; the parts before it are exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import onnx

from ...core.errors import RealEpError
from ...core.graph import ValueInfo
from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...realep.placement import ON_DML
from ..dml_graph import derived_infos
from ..importing import Fallback, NodeContext
from ..nodes import DmlNode

RULE = "DmlOperatorRotaryEmbedding"
DIRECTML_OPERATORS = ("SPLIT", "ELEMENT_WISE_IDENTITY", "JOIN", "FILL_VALUE_SEQUENCE", "ELEMENT_WISE_ADD", "GATHER", "ELEMENT_WISE_MULTIPLY")
SPLIT, COPY, SIGNS, RANGE, POSITIONS, CACHE, ADD, TAIL = (
    "DmlSplit", "DmlRotaryCopy", "DmlRotarySigns", "DmlRotaryRange", "DmlRotaryPositions", "DmlRotaryCache", "DmlRotaryAdd", "DmlRotaryJoin")

# The graph's parts run as DirectML OPERATORS of other modules.
OPERATORS: tuple = ()


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the EP reads of the node: heads N, head size H, rotated columns rd, interleaved, 4-D ([B, N, S, H])."""

    heads: int
    head_size: int
    rotary: int
    interleaved: bool
    transposed: bool

    def paired(self, shape) -> tuple:
        """[B, S, N, 2, rd/2] ([B, S, N, rd/2, 2] interleaved) of an input-shaped value: the rotated columns."""
        b, s = batch_sequence(shape, self.transposed)
        half = self.rotary // 2
        return (b, s, self.heads, half, 2) if self.interleaved else (b, s, self.heads, 2, half)

    def half(self, shape) -> tuple:
        b, s = batch_sequence(shape, self.transposed)
        half = self.rotary // 2
        return (b, s, self.heads, half, 1) if self.interleaved else (b, s, self.heads, 1, half)

    def cache(self, shape) -> tuple:
        """A gathered cos or sin, [B, S, 1, 1, rd/2] ([B, S, 1, rd/2, 1]): broadcast over heads and the two halves."""
        b, s = batch_sequence(shape, self.transposed)
        half = self.rotary // 2
        return (b, s, 1, half, 1) if self.interleaved else (b, s, 1, 1, half)

    def columns(self, shape, width: int) -> tuple:
        """The input's heads cut to ``width`` columns: [B, S, N, width] ([B, N, S, width] 4-D)."""
        b, s = batch_sequence(shape, self.transposed)
        return (b, self.heads, s, width) if self.transposed else (b, s, self.heads, width)

    def attributes(self) -> dict:
        return {"num_heads": self.heads, "interleaved": int(self.interleaved), "transposed": int(self.transposed)}


def batch_sequence(shape, transposed: bool) -> tuple:
    """B and S of the input's shape (3-D [B, S, hidden], 4-D [B, N, S, H]) or of a value cut from it."""
    return shape[0], shape[2] if transposed else shape[1]


def layout(x_shape, cache_shape, attributes: dict) -> Layout | str:
    """The Layout the EP makes of the node (DmlOperatorRotaryEmbedding.cpp L98-125), or why the EP's kernel fails."""
    heads, rotary = attributes.get("num_heads", 0), attributes.get("rotary_embedding_dim", 0)
    transposed = len(x_shape) == 4
    hidden = x_shape[1] * x_shape[3] if transposed else x_shape[-1]
    if rotary > 0 and heads == 0:
        return "num_heads must be provided if rotary_embedding_dim is specified (ORT_ENFORCE)"
    if transposed and heads not in (0, x_shape[1]):
        return f"num_heads {heads} must be 0 or the input's second dimension {x_shape[1]} (ORT_ENFORCE)"
    head_size = 2 * cache_shape[-1] if heads == 0 else hidden // heads
    rotary = rotary or head_size
    if head_size <= 0 or hidden % head_size or rotary > head_size or rotary % 2 or cache_shape[-1] != rotary // 2:
        return (f"a head of {head_size} columns, {rotary} rotated, of a hidden size {hidden}, with caches of {cache_shape[-1]} "
                "columns: DirectML's GATHER and SPLIT descs are invalid")
    return Layout(hidden // head_size, head_size, rotary, bool(attributes.get("interleaved", 0)), transposed)


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """The EP's operators (module docstring) where its kernel is made (4 inputs, ranks and the caches' width known, a
    Layout) and every part runs on DirectML (``on_dml(part, infos)``); the values made, functions of x's shape."""
    known = _known(graph, node, static)
    if known is None:
        return None
    infos, found = known
    build = _Builder(graph, node, found, infos[0].dtype)
    copied, tail = build.rotated_columns()
    swapped = build.swapped(copied)
    cos_rows, sin_rows = build.gathered(len(infos[1].shape or ()) == 1)
    by_cos, signed = build.products(copied, swapped, cos_rows, sin_rows)
    build.output(by_cos, signed, [copied, cos_rows, sin_rows], tail)
    part_infos = {**derived_infos(build.made, static), **dict(zip(node.input, infos))}
    if not all(on_dml(each, part_infos) for each in build.nodes):
        return None
    return tuple(build.nodes), build.made


def _known(graph: EditableGraph, node: onnx.NodeProto, static: dict) -> tuple[list, Layout] | None:
    """The inputs' infos and the Layout, where the EP makes its kernel and dml_ep knows enough before a run."""
    infos = _input_infos(graph, node, static)
    if infos is None:
        return None
    x_shape, ids_shape, cos_shape = (tuple(info.shape or ()) for info in infos[:3])
    if len(x_shape) not in (3, 4) or len(ids_shape) not in (1, 2) or len(cos_shape) != 2 or None in (cos_shape[-1], x_shape[-1]):
        return None
    attributes = {a.name: a.i for a in node.attribute}
    found = layout(x_shape, cos_shape, attributes)
    if isinstance(found, str):
        return None
    sequence, rows = batch_sequence(x_shape, found.transposed)[1], cos_shape[0]
    if not attributes.get("is_packed_batching", 0) and None not in (sequence, rows) and sequence > rows:
        return None  # the EP's ORT_NOT_IMPLEMENTED: ``unsplit`` says so
    return infos, found


def _input_infos(graph: EditableGraph, node: onnx.NodeProto, static: dict) -> list[ValueInfo] | None:
    """The four inputs' infos (a constant's from its array), each of known type and rank; else None."""
    if len(node.input) != 4 or not all(node.input):
        return None
    found = [static.get(name) if (constant := graph.constant(name)) is None else _constant_info(constant) for name in node.input]
    infos: list[ValueInfo] = [info for info in found if info is not None and info.shape is not None and info.dtype is not None]
    return infos if len(infos) == 4 else None


class _Builder:
    """The parts of one node, in order, and the values they make (functions of x's shape)."""

    def __init__(self, graph: EditableGraph, node: onnx.NodeProto, found: Layout, dtype: np.dtype):
        self.graph, self.node, self.found, self.dtype = graph, node, found, dtype
        self.made: dict = {}
        self.nodes: list[onnx.NodeProto] = []
        self.attributes: dict[str, Any] = found.attributes()

    def value(self, part: str, shape_of: Callable, element=None) -> str:
        name = self.graph.unique_name(f"{self.node.output[0]}.{part}")
        self.made[name] = (self.node.input[0], np.dtype(element or self.dtype), shape_of)
        return name

    def part(self, op_type: str, inputs: list, outputs: list, name: str | None, domain: str = DML_DOMAIN, **attributes) -> None:
        """A part; ``name`` None: the node's own name (its last part)."""
        prefix = self.node.name or self.node.output[0]
        self.nodes.append(onnx.helper.make_node(op_type, inputs, outputs, name=self.node.name if name is None else f"{prefix}.{name}",
                                                domain=domain, **attributes))

    def rotated_columns(self) -> tuple[str, str | None]:
        """[SPLIT off the rest] and the IDENTITY copy of the rotated columns; the copy and the rest (or None)."""
        found, x = self.found, self.node.input[0]
        source, tail = x, None
        if found.rotary < found.head_size:
            rest = found.head_size - found.rotary
            source = self.value("rotated_input", lambda s: found.columns(s, found.rotary))
            tail = self.value("rest", lambda s: found.columns(s, rest))
            heads: dict[str, Any] = {} if found.transposed else {"num_heads": found.heads}  # 3-D: viewed [B, S, N, H]
            self.part(SPLIT, [x], [source, tail], "split_rest", axis=-1, split=[found.rotary, rest], **heads)
        copied = self.value("copied", found.paired)
        self.part(COPY, [source], [copied], "copy", **self.attributes)
        return copied, tail

    def swapped(self, copied: str) -> str:
        """SPLIT of the copy into halves (pairs) and JOIN of them swapped."""
        found, axis = self.found, 4 if self.found.interleaved else 3
        first, second, swapped = self.value("first", found.half), self.value("second", found.half), self.value("swapped", found.paired)
        self.part(SPLIT, [copied], [first, second], "split_halves", axis=axis, split=[1, 1])
        self.part("Concat", [second, first], [swapped], "join_swapped", domain="", axis=axis)
        return swapped

    def gathered(self, offset: bool) -> tuple[str, str]:
        """[FILL_VALUE_SEQUENCE and ADD of a 1-D offset], GATHER of the cos and the sin cache."""
        found = self.found
        x, positions, cos, sin = self.node.input
        if offset:
            sequence = self.value("range", lambda s: (1, batch_sequence(s, found.transposed)[1]), np.int64)
            offsets = self.value("positions", lambda s: batch_sequence(s, found.transposed), np.int64)
            self.part(RANGE, [x], [sequence], "range", transposed=self.attributes["transposed"])
            self.part(POSITIONS, [sequence, positions, x], [offsets], "positions")
            positions = offsets
        rows = self.value("cos", found.cache), self.value("sin", found.cache)
        for cache, gathered, name in zip((cos, sin), rows, ("gather_cos", "gather_sin")):
            self.part(CACHE, [cache, positions], [gathered], name, interleaved=self.attributes["interleaved"])
        return rows

    def products(self, copied: str, swapped: str, cos_rows: str, sin_rows: str) -> tuple[str, str]:
        """The signs' FILL_VALUE_SEQUENCE and the three MULTIPLYs: x * cos, and swapped * sin * signs."""
        found = self.found
        signs = self.value("signs", lambda s: (2,) if found.interleaved else (2, 1))
        self.part(SIGNS, [], [signs], "signs", to=onnx.helper.np_dtype_to_tensor_dtype(self.dtype), interleaved=self.attributes["interleaved"])
        by_cos, by_sin, signed = (self.value(name, found.paired) for name in ("x_cos", "swapped_sin", "signed_sin"))
        self.part("Mul", [copied, cos_rows], [by_cos], "mul_cos", domain="")
        self.part("Mul", [swapped, sin_rows], [by_sin], "mul_sin", domain="")
        self.part("Mul", [by_sin, signs], [signed], "mul_sign", domain="")
        return by_cos, signed

    def output(self, by_cos: str, signed: str, sources: list, tail: str | None) -> None:
        """The ADD (also binding the copy and the gathered caches: the "onnxruntime" arithmetic's), [JOIN of the rest]."""
        found, outputs = self.found, list(self.node.output)
        if tail is None:
            self.part(ADD, [by_cos, signed, *sources], outputs, None, whole=1, **self.attributes)
            return
        rotated = self.value("rotated", lambda s: found.columns(s, found.rotary))
        self.part(ADD, [by_cos, signed, *sources], [rotated], "add", whole=0, **self.attributes)
        self.part(TAIL, [rotated, tail], outputs, None, axis=-1, merge_heads=int(not found.transposed))


def _constant_info(array: np.ndarray) -> ValueInfo:
    return ValueInfo("", array.dtype, array.shape)


def unsplit(ctx: NodeContext) -> DmlNode:
    """A RotaryEmbedding the planner did not split: where the EP's kernel fails (its ORT_ENFORCEs, a sequence longer
    than the caches without ``is_packed_batching``, descs DirectML refuses) a RealEpError; otherwise on DirectML in the
    real EP, which dml_ep models only as the split."""
    if len(ctx.node.input) != 4:
        raise RealEpError(f"the DML EP's RotaryEmbedding takes exactly 4 inputs, not {len(ctx.node.input)} (ML_CHECK_VALID_ARGUMENT)",
                          node=ctx.node)
    x, cos = ctx.info(0), ctx.info(2)
    if x.shape is not None and cos.shape is not None and len(x.shape) in (3, 4) and len(cos.shape) == 2:
        found = layout(x.shape, cos.shape, {a.name: a.i for a in ctx.node.attribute})
        if isinstance(found, str):
            raise RealEpError(f"the DML EP's RotaryEmbedding kernel fails: {found}", node=ctx.node)
        sequence = batch_sequence(x.shape, found.transposed)[1]
        if not ctx.attr("is_packed_batching", 0) and sequence > cos.shape[0]:
            raise RealEpError(f"a sequence of {sequence} is longer than the caches' {cos.shape[0]} rows: \"Updating cos_cache and sin_cache "
                              "in RotaryEmbedding is not currently supported\" (ORT_NOT_IMPLEMENTED)", node=ctx.node)
    raise Fallback(f"RotaryEmbedding is a graph of DirectML operators ({', '.join(DIRECTML_OPERATORS)}); dml_ep plans it as those "
                   "only where its input ranks, the position ids' rank and the caches' width are known before a run", ON_DML)
