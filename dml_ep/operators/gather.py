"""DML_OPERATOR_GATHER (Gather 1, 11, 13): desc, import, kernel.

DirectML documents ``output[..., j..., ...] = input[..., indices[j...], ...]``: the indices replace
the Axis coordinate; Input, Indices and Output of one DimensionCount; negative indices count from
the end of Axis from DML_FEATURE_LEVEL_3_0 (signed index types; 4-D UINT32 indices before).

Import, as DmlOperatorGather.cpp (L12-43): data, indices and output right-aligned to the largest
of their ranks (not to 4); Axis shifted by data's padding; IndexDimensions = rank(indices). Every
data type of the DML EP's row (bool as UINT8): an LLM's float16 embedding table stays float16, a
quantized one is int8/uint8 after onnxruntime's QDQ rules drop the DQ/Q around the Gather.

Kernel: out-of-range indices give DirectML's "wrong values but no error"; dml_ep refuses them with
a typed error, as onnxruntime's CPU kernel does, rather than invent values.

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
from .base import Operator, OperatorDesc, TensorDesc, rules
from .element_wise_identity import TYPES_BY_LEVEL, dims_of, dml_type, moved_type
from .importing import NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
INDEX_TYPES = frozenset({DT.INT64, DT.INT32, DT.UINT64, DT.UINT32})


@dataclasses.dataclass(frozen=True)
class DML_GATHER_OPERATOR_DESC(OperatorDesc):
    """GATHER: slices of the input along Axis picked by Indices, DML_FEATURE_LEVEL_1_0 and up."""

    InputTensor: TensorDesc
    IndicesTensor: TensorDesc
    OutputTensor: TensorDesc
    Axis: int
    IndexDimensions: int

    OPERATOR_TYPE = OP.GATHER
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({"InputTensor": (False, DIMS), "IndicesTensor": (False, DIMS), "OutputTensor": (False, DIMS)},
                         {"InputTensor": TYPES_BY_LEVEL, "IndicesTensor": {FL.FL_1_0: frozenset({DT.UINT32}), FL.FL_3_0: INDEX_TYPES},
                          "OutputTensor": TYPES_BY_LEVEL})
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        rank = self.OutputTensor.DimensionCount
        if self.InputTensor.DimensionCount != rank or self.IndicesTensor.DimensionCount != rank:
            self.fail("Input, Indices and Output must have one DimensionCount")
        if not 0 <= self.Axis < rank or not 0 <= self.IndexDimensions <= rank:
            self.fail(f"Axis {self.Axis} or IndexDimensions {self.IndexDimensions} is out of range for {rank} dimensions")


# --- import from ONNX ------------------------------------------------------------------------


def gather(ctx: NodeContext) -> DmlNode:
    dtype = dml_type(moved_type(ctx))
    shape, index_shape = ctx.shape(0), ctx.shape(1)
    axis = ctx.attr("axis", 0)
    if not shape or not -len(shape) <= axis < len(shape):
        raise ShapeError(f"axis {axis} is out of range for data of shape {list(shape)}", node=ctx.node)
    axis %= len(shape)
    out_shape = shape[:axis] + index_shape + shape[axis + 1:]
    rank = len(dims_of(ctx, max(shape, index_shape, out_shape, key=len)))
    desc = DML_GATHER_OPERATOR_DESC(
        InputTensor=tensor(dtype, left_pad(shape, rank)),
        IndicesTensor=tensor(ctx.info(1).dtype, left_pad(index_shape, rank)),
        OutputTensor=tensor(dtype, left_pad(out_shape, rank)),
        Axis=axis + rank - len(shape),
        IndexDimensions=len(index_shape),
    )
    return ctx.dml_node(desc, ("InputTensor", "IndicesTensor"), out_shape)


def cache_rows(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryCache, RotaryEmbedding's GATHER of a cos or sin cache [M, rd/2] by the positions
    [B, S] (DmlOperatorRotaryEmbedding.cpp L273-284): {1, 1, M, rd/2} on axis 2 by {1, 1, B, S} (IndexDimensions 2)
    into {1, B, S, rd/2}; the value [B, S, 1, 1, rd/2] ([B, S, 1, rd/2, 1] ``interleaved``) the MULTIPLY broadcasts."""
    dtype = dml_type(moved_type(ctx))
    (rows, half), (batch, sequence) = ctx.shape(0), ctx.shape(1)
    desc = DML_GATHER_OPERATOR_DESC(InputTensor=tensor(dtype, (1, 1, rows, half)), IndicesTensor=tensor(ctx.info(1).dtype, (1, 1, batch, sequence)),
                                    OutputTensor=tensor(dtype, (1, batch, sequence, half)), Axis=2, IndexDimensions=2)
    value = (batch, sequence, 1, half, 1) if ctx.attr("interleaved", 0) else (batch, sequence, 1, 1, half)
    return ctx.dml_node(desc, ("InputTensor", "IndicesTensor"), value)


# --- kernel ----------------------------------------------------------------------------------


def gather_kernel(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    x = view(tensors["InputTensor"], desc.InputTensor)
    rank = desc.OutputTensor.DimensionCount
    indices = view(tensors["IndicesTensor"], desc.IndicesTensor).reshape(desc.IndicesTensor.Sizes[rank - desc.IndexDimensions:])
    size = x.shape[desc.Axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise ShapeError(f"an index is outside [-{size}, {size - 1}]")
    out = np.take(x, indices.astype(np.int64), axis=desc.Axis)
    return out.reshape(desc.OutputTensor.Sizes)


OPERATORS = (Operator(desc=DML_GATHER_OPERATOR_DESC, kernel=gather_kernel, exact_value=None, exact_for_any_input=True),)
