"""DML_OPERATOR_ELEMENT_WISE_SUBTRACT, _MULTIPLY and _DIVIDE on float tensors (Sub, Mul, Div): descs,
import, kernel.

Import, as DmlOperatorElementWise.cpp: every tensor right-aligned to at least 4 dimensions and read
with the output's sizes, ONNX broadcasting a stride of 0 (``binary``, which ELEMENT_WISE_ADD1's Add
shares). In the quantizer's QDQ output these are the float Mul and Div between a DequantizeLinear
and a QuantizeLinear that onnxruntime does not turn into QLinearMul for DML nodes: the real EP runs
them on DirectML in float.

Support per feature level (the DirectML pages): float32 and float16 from DML_FEATURE_LEVEL_1_0;
1 to 8 dimensions from 3_0 (4 before 2_0, 4 to 5 from 2_0, as ADD1's page). dml_ep models the float
types; the integer ones the real EP also registers are said by the fallback.

Kernel: the operation in float32, rounded once to the tensors' type. Each is one correctly rounded
IEEE operation, so DirectML and onnxruntime's CPU EP agree bit for bit; for float16, float32 holds a
product exactly and a quotient rounded in float32 then to float16 is the correctly rounded float16
quotient (24 >= 2 * 11 + 2 bits). Division by zero gives infinity or NaN, silently.

No exact value: these do not quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, broadcast, operand, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}
_FIELDS = ("ATensor", "BTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class BinaryDesc(OperatorDesc):
    """Common base of the float binary element-wise descs (and ELEMENT_WISE_ADD1's): ``f(A, B)``, all
    three the same sizes."""

    ATensor: TensorDesc
    BTensor: TensorDesc
    OutputTensor: TensorDesc

    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})
    SAME_TYPE = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        for field in ("ATensor", "BTensor"):
            sizes = getattr(self, field).Sizes
            if sizes != self.OutputTensor.Sizes:
                self.fail(f"sizes {list(sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", field)


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_SUBTRACT: ``A - B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_SUBTRACT


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_MULTIPLY: ``A * B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_MULTIPLY


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_DIVIDE: ``A / B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_DIVIDE


# --- import from ONNX ------------------------------------------------------------------------


def binary(ctx: NodeContext, desc_class, real_operator: str = "") -> DmlNode:
    """A two-input float element-wise node as ``desc_class``; ``real_operator``, the DirectML
    operator the real EP runs where it is another (for the fallback of the types dml_ep does not
    model)."""
    dtype = ctx.info(0).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):  # the others the real EP takes are integers
        name = desc_class.OPERATOR_TYPE.name
        raise Fallback(f"element type {dtype} is not supported by {name} (FLOAT32, FLOAT16)", ON_DML_AS.format(real_operator or name))
    if ctx.info(1).dtype != dtype:
        raise ShapeError(f"input types differ: {dtype} and {ctx.info(1).dtype}", node=ctx.node)
    a_shape, b_shape = ctx.info(0).shape, ctx.info(1).shape
    out_shape, sizes = broadcast(ctx, a_shape, b_shape)
    desc = desc_class(
        ATensor=operand(dtype, a_shape, sizes, ctx.input_name(0) in ctx.constants),
        BTensor=operand(dtype, b_shape, sizes, ctx.input_name(1) in ctx.constants),
        OutputTensor=tensor(dtype, sizes),
    )
    return ctx.dml_node(desc, ("ATensor", "BTensor"), out_shape)


def sub(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC)


def mul(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC)


def div(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC)


# --- kernel ----------------------------------------------------------------------------------

_UFUNCS = {
    DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC: np.subtract,
    DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC: np.multiply,
    DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC: np.divide,
}


def element_wise_binary(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE, silently (its callers run kernels under one np.errstate)."""
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    return _UFUNCS[type(desc)](a, b, dtype=np.float32).astype(a.dtype, copy=False)


OPERATORS = tuple(Operator(desc=desc, kernel=element_wise_binary, exact_value=None) for desc in _UFUNCS)
