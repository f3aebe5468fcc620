"""DML_OPERATOR_ELEMENT_WISE_IF (Where 9, 16): desc, import, kernel.

DirectML documents ``Output = Condition != 0 ? A : B``: Condition UINT8, A, B and Output of one data
type, all four of one DimensionCount and Sizes.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseIf`` (created for Where, L700-715 of
the file): condition, X and Y right-aligned to at least 4 dimensions and read with the output's
sizes, ONNX broadcasting a stride of 0; the bool condition (and bool X, Y) as UINT8. In an LLM it
masks attention scores and selects positions (float16, int64).

Support per feature level (the page): from DML_FEATURE_LEVEL_2_0, FLOAT16 only and 4 dimensions;
FLOAT32 and the 8- to 32-bit integers with 1 to 8 dimensions from 3_0; FLOAT64, INT64 and UINT64
from 5_0.

Kernel: a selection, every element moved exactly (float bit patterns kept): exact in every
arithmetic. No exact value: nothing is quantized.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import broadcast_shapes, view
from .base import Operator, OperatorDesc, TensorDesc, rules
from .element_wise_identity import dml_type, moved_type
from .importing import NodeContext, operand, padded_sizes, parameter_shape, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_FIELDS = ("ConditionTensor", "ATensor", "BTensor", "OutputTensor")
_DIMS = {FL.FL_2_0: (4, 4), FL.FL_3_0: (1, 8)}
_TYPES = {FL.FL_2_0: frozenset({DT.FLOAT16}),
          FL.FL_3_0: frozenset({DT.FLOAT32, DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8}),
          FL.FL_5_0: frozenset({DT.FLOAT64, DT.INT64, DT.UINT64})}


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_IF_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_IF: ``Condition != 0 ? A : B``, DML_FEATURE_LEVEL_2_0 and up."""

    ConditionTensor: TensorDesc
    ATensor: TensorDesc
    BTensor: TensorDesc
    OutputTensor: TensorDesc

    OPERATOR_TYPE = OP.ELEMENT_WISE_IF
    INTRODUCED = FL.FL_2_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS},
                         {"ConditionTensor": frozenset({DT.UINT8}), "ATensor": _TYPES, "BTensor": _TYPES, "OutputTensor": _TYPES})
    SAME_TYPE = (("ATensor", "BTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes(*_FIELDS[:3])


# --- import from ONNX ------------------------------------------------------------------------


def where(ctx: NodeContext) -> DmlNode:
    """ONNX Where: the condition and both values broadcast to the output."""
    dtype = dml_type(moved_type(ctx, 1))
    if ctx.info(2).dtype != ctx.info(1).dtype or ctx.info(0).dtype != np.dtype(np.bool_):
        raise ShapeError(f"Where takes a bool condition and two values of one type, not {[str(ctx.info(i).dtype) for i in range(3)]}",
                         node=ctx.node)
    shapes = [tuple(parameter_shape(ctx, index)) for index in range(3)]  # a constant's from its value
    try:
        out_shape = broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"input shapes {[list(s) for s in shapes]} do not broadcast", node=ctx.node) from None
    sizes = padded_sizes(out_shape)
    owned = [ctx.input_name(index) in ctx.constants for index in range(3)]
    desc = DML_ELEMENT_WISE_IF_OPERATOR_DESC(
        ConditionTensor=operand(np.uint8, shapes[0], sizes, owned[0]),
        ATensor=operand(dtype, shapes[1], sizes, owned[1]),
        BTensor=operand(dtype, shapes[2], sizes, owned[2]),
        OutputTensor=tensor(dtype, sizes),
    )
    return ctx.dml_node(desc, ("ConditionTensor", "ATensor", "BTensor"), out_shape)


# --- kernel ----------------------------------------------------------------------------------


def element_wise_if(desc: DML_ELEMENT_WISE_IF_OPERATOR_DESC, tensors: dict, options, state: KernelState) -> np.ndarray:
    """A where the condition is nonzero, else B: a selection, no arithmetic."""
    condition = view(tensors["ConditionTensor"], desc.ConditionTensor)
    return np.where(condition != 0, view(tensors["ATensor"], desc.ATensor), view(tensors["BTensor"], desc.BTensor))


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_IF_OPERATOR_DESC, kernel=element_wise_if, exact_value=None, exact_for_any_input=True),)
