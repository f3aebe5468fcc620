"""DML_OPERATOR_SPLIT: desc and kernel (the inverse of JOIN).

DirectML's page (DML_SPLIT_OPERATOR_DESC): the input cut along ``Axis`` into ``OutputCount``
outputs laid end to end; every output of the input's DimensionCount and sizes but on Axis, whose
sizes add up to the input's. One output is a copy. The DML EP builds it in RotaryEmbedding's graph
(DmlOperatorRotaryEmbedding.cpp: the halves, or the pairs when interleaved, and the part past
``rotary_embedding_dim``) and for ONNX Split (DmlOperatorSplit.cpp), which dml_ep does not import.

Support per feature level: as JOIN's table (SPLIT's page, the inverse operator, lists the same
rows): 4 dimensions from DML_FEATURE_LEVEL_1_0, 4 to 5 from 3_0, 1 to 8 from 3_1; float32, float16,
(u)int32, (u)int16 from 1_0, (u)int8 from 2_1, 64-bit types from 4_1.

Kernel: the input read through its desc, cut, each part packed: data movement, the same bits in
every arithmetic.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import ShapeError
from ..core.tensor_desc import left_pad, view
from .base import Operator, OperatorDesc, TensorDesc, TensorDescArray, rules
from .element_wise_identity import dims_of, dml_type, moved_type
from .importing import NodeContext, bound, tensor
from .join import DIMS, TYPES, check_pieces
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_SPLIT_OPERATOR_DESC(OperatorDesc):
    """SPLIT: the input cut along ``Axis`` into the outputs, DML_FEATURE_LEVEL_1_0 and up."""

    InputTensor: TensorDesc
    OutputCount: int
    OutputTensors: TensorDescArray
    Axis: int

    OPERATOR_TYPE = OP.SPLIT
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({"InputTensor": (False, DIMS)}, {"InputTensor": TYPES})

    @property
    def OUTPUT_FIELDS(self) -> tuple[str, ...]:  # noqa: N802 (DxDispatch's name for the fields a dispatch writes)
        return tuple(f"OutputTensors[{index}]" for index in range(len(self.OutputTensors)))

    def validate_shapes(self, feature_level: FL) -> None:
        check_pieces(self, ("OutputCount", self.OutputCount), ("OutputTensors", self.OutputTensors), "InputTensor", "outputs")


# --- import from ONNX ------------------------------------------------------------------------


def split_node(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlSplit (RotaryEmbedding's graph): input 0 cut along ``axis`` into ``split`` sizes, one
    output each; with ``num_heads``, a 3-D input's last dimension read as [num_heads, head size] first (the EP's
    [B, S, N, H] of [B, S, hidden])."""
    dtype = dml_type(moved_type(ctx))
    shape = tuple(ctx.shape(0))
    heads = ctx.attr("num_heads", 0)
    if heads:
        shape = (*shape[:-1], heads, shape[-1] // heads)
    rank, axis, sizes = len(shape), ctx.attr("axis", 0), list(ctx.attr("split", []))
    if not -rank <= axis < rank or sum(sizes) != shape[axis % rank] or len(sizes) != len(ctx.node.output):
        raise ShapeError(f"split {sizes} along axis {axis} does not cut a tensor of shape {list(shape)} into {len(ctx.node.output)}",
                         node=ctx.node)
    axis %= rank
    outputs = [tuple(size if d == axis else n for d, n in enumerate(shape)) for size in sizes]
    padded = max(4, len(dims_of(ctx, shape)))
    desc = DML_SPLIT_OPERATOR_DESC(InputTensor=tensor(dtype, left_pad(shape, padded)), OutputCount=len(outputs),
                                   OutputTensors=tuple(tensor(dtype, left_pad(each, padded)) for each in outputs), Axis=axis + padded - rank)
    first, *more = outputs
    return bound(ctx.node, desc, {"InputTensor": 0}, (first, *more), ctx.constants, ctx.origin)


# --- kernel ----------------------------------------------------------------------------------


def split(desc: DML_SPLIT_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> tuple[np.ndarray, ...]:
    """The outputs in order, each packed (a copy: DirectML writes each to a buffer of its own)."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    ends = np.cumsum([each.Sizes[desc.Axis] for each in desc.OutputTensors])[:-1]
    return tuple(np.ascontiguousarray(part) for part in np.split(source, ends, axis=desc.Axis))


OPERATORS = (Operator(desc=DML_SPLIT_OPERATOR_DESC, kernel=split, exact_value=None, exact_for_any_input=True),)
