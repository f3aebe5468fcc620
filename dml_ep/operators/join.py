"""DML_OPERATOR_JOIN (Concat; inside com.microsoft QLinearConcat): desc, import, kernel.

DirectML documents JOIN as the inverse of SPLIT: InputCount tensors that match Output in every
dimension but ``Axis``, whose Axis sizes add up to Output's; one data type and DimensionCount.

Import, as DmlOperatorConcat.cpp (L14-62; the EP drops empty inputs, which dml_ep leaves to the CPU EP
with every empty tensor): every tensor
right-aligned to at least 4 dimensions, and ``Axis`` the ONNX axis (negatives resolved) shifted
by the padding (``GetDmlAdjustedAxis``). Every type of the DML EP's row (bool as UINT8), and the
float32 join of QLinearConcat's DirectML graph (``qlinear_concat.py``).

No exact value: nothing is quantized.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import left_pad, view
from .base import Operator, OperatorDesc, TensorDesc, TensorDescArray, rules
from .element_wise_identity import dims_of, dml_type, moved_type
from .importing import NodeContext, bound, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (4, 5), FL.FL_3_1: (1, 8)}
TYPES = {FL.FL_1_0: frozenset({DT.FLOAT32, DT.FLOAT16, DT.INT32, DT.INT16, DT.UINT32, DT.UINT16}),
         FL.FL_2_1: frozenset({DT.INT8, DT.UINT8}), FL.FL_4_1: frozenset({DT.FLOAT64, DT.INT64, DT.UINT64})}


@dataclasses.dataclass(frozen=True)
class DML_JOIN_OPERATOR_DESC(OperatorDesc):
    """JOIN: the inputs laid end to end along ``Axis``, DML_FEATURE_LEVEL_1_0 and up."""

    InputCount: int
    InputTensors: TensorDescArray
    OutputTensor: TensorDesc
    Axis: int

    OPERATOR_TYPE = OP.JOIN
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({"OutputTensor": (False, DIMS)}, {"OutputTensor": TYPES})

    def validate_shapes(self, feature_level: FL) -> None:
        check_pieces(self, ("InputCount", self.InputCount), ("InputTensors", self.InputTensors), "OutputTensor", "inputs")


def check_pieces(desc: OperatorDesc, count: tuple[str, int], pieces: tuple[str, TensorDescArray], whole_field: str, noun: str) -> None:
    """JOIN's inputs or SPLIT's outputs against the one tensor they tile along ``Axis``: their count,
    each of its type and rank and of its sizes but on Axis (not 0 there), together its size on Axis."""
    (count_name, number), (pieces_name, tensors) = count, pieces
    axis, whole = getattr(desc, "Axis"), getattr(desc, whole_field)
    if number != len(tensors) or number < 1:
        desc.fail(f"{count_name} {number} must be the number of {pieces_name} ({len(tensors)}), at least 1")
    if not 0 <= axis < whole.DimensionCount:
        desc.fail(f"Axis {axis} is outside [0, {whole.DimensionCount})")
    total = 0
    for index, each in enumerate(tensors):
        field = f"{pieces_name}[{index}]"
        if each.DataType != whole.DataType or each.DimensionCount != whole.DimensionCount:
            desc.fail(f"{each.DataType.name} {each.DimensionCount}-D must match {whole_field}'s {whole.DataType.name} {whole.DimensionCount}-D", field)
        if any(a != b for i, (a, b) in enumerate(zip(each.Sizes, whole.Sizes)) if i != axis) or each.Sizes[axis] < 1:
            desc.fail(f"sizes {list(each.Sizes)} must match {whole_field}'s {list(whole.Sizes)} but on Axis {axis}, which must not be 0", field)
        total += each.Sizes[axis]
    if total != whole.Sizes[axis]:
        desc.fail(f"the {noun}' sizes on Axis {axis} add up to {total}, not {whole_field}'s {whole.Sizes[axis]}", whole_field)


# --- import from ONNX ------------------------------------------------------------------------


def concat(ctx: NodeContext) -> DmlNode:
    return joined(ctx, moved_type(ctx))


def float_join(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlJoin: the float32 JOIN of QLinearConcat's DirectML graph."""
    return joined(ctx, np.dtype(np.float32))


def joined(ctx: NodeContext, dtype) -> DmlNode:
    """A JOIN of the node's inputs (all of ``dtype``) along its ``axis``."""
    shapes = [ctx.shape(index) for index in range(len(ctx.node.input))]
    first, rank = shapes[0], len(shapes[0])
    axis = ctx.attr("axis")
    if axis is None or not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is missing or out of range for rank {rank}", node=ctx.node)
    axis %= rank
    for index, shape in enumerate(shapes):
        if ctx.info(index).dtype != dtype:
            raise ShapeError(f"input {index} is {ctx.info(index).dtype}, not {dtype} as input 0", node=ctx.node)
        if len(shape) != rank or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis):
            raise ShapeError(f"input shapes {[list(s) for s in shapes]} do not concatenate on axis {axis}", node=ctx.node)
    out_shape = tuple(sum(shape[axis] for shape in shapes) if d == axis else size for d, size in enumerate(first))
    padded = max(4, len(dims_of(ctx, out_shape)))
    dml = dml_type(dtype)
    inputs = tuple(tensor(dml, left_pad(shape, padded)) for shape in shapes)
    desc = DML_JOIN_OPERATOR_DESC(InputCount=len(inputs), InputTensors=inputs, OutputTensor=tensor(dml, left_pad(out_shape, padded)),
                                  Axis=axis + padded - rank)
    return bound(ctx.node, desc, {f"InputTensors[{index}]": index for index in range(len(shapes))}, (out_shape,), ctx.constants,
                 ctx.origin)


def rotary_join(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryJoin, RotaryEmbedding's last JOIN (DmlOperatorRotaryEmbedding.cpp L337-347): the
    rotated columns and the rest along the last axis, [B, S, N, H] or [B, N, S, H]; with ``merge_heads`` the node's
    3-D output [B, S, N * H], the same memory."""
    entry = joined(ctx, moved_type(ctx))
    if ctx.attr("merge_heads", 0):
        *outer, heads, head_size = entry.output_shape
        entry.output_shape = (*outer, heads * head_size)
    return entry


# --- kernel ----------------------------------------------------------------------------------


def join(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    parts = [view(tensors[f"InputTensors[{i}]"], each) for i, each in enumerate(desc.InputTensors)]
    return np.concatenate(parts, axis=desc.Axis)


OPERATORS = (Operator(desc=DML_JOIN_OPERATOR_DESC, kernel=join, exact_value=None, exact_for_any_input=True),)
