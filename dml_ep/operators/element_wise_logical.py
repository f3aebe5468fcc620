"""DML_OPERATOR_ELEMENT_WISE_LOGICAL_* (Equal, Greater, GreaterOrEqual, Less, LessOrEqual; Not,
And, Or, Xor): descs, import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseBinary`` / ``Unary`` (one DirectML
operator per ONNX op, its creation functions L700-735 of the file): every tensor right-aligned to at
least 4 dimensions and read with the output's sizes, ONNX broadcasting a stride of 0. The output is
ONNX bool, which the DML EP describes to DirectML as UINT8 holding 1 or 0; so are Not's, And's, Or's
and Xor's inputs. In an LLM these build the attention mask and the position ids (Equal, Greater,
Less of int64 sequence lengths).

Support per feature level (the DirectML pages): comparisons of FLOAT32/FLOAT16 from
DML_FEATURE_LEVEL_1_0 (output UINT32 only; UINT8 from 2_0), the 8- to 32-bit integers from 2_1,
INT64/UINT64 from 4_1; GREATER_THAN_OR_EQUAL and LESS_THAN_OR_EQUAL from 3_0; NOT, AND, OR, XOR on
UINT32 from 1_0 and UINT8 from 2_0; 4 dimensions, 1 to 8 from 3_0.

Kernel: the comparison in the tensors' own type (IEEE for floats: NaN compares false, -0 equals +0),
or the logic of nonzero bytes; exact in every arithmetic. A Direct3D device may flush float32
denormals to zero before it compares (D3D11.3 §3.1.3.2; whether DirectML's shaders do is not
documented), which dml_ep's point value does not.

No exact value: nothing is quantized.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ON_CPU
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .element_wise_arithmetic import FLOAT_TYPES, INTEGERS
from .importing import Fallback, NodeContext, broadcast, operand, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
_COMPARED = {FL.FL_1_0: FLOATS, FL.FL_2_1: frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8}),
             FL.FL_4_1: frozenset({DT.INT64, DT.UINT64})}
_BOOLEAN = {FL.FL_1_0: frozenset({DT.UINT32}), FL.FL_2_0: frozenset({DT.UINT8})}
_BINARY = ("ATensor", "BTensor", "OutputTensor")
BOOL = np.dtype(np.bool_)


@dataclasses.dataclass(frozen=True)
class LogicalDesc(OperatorDesc):
    """``f(A, B)`` of two tensors of one type into 1 or 0, all three of the output's sizes."""

    ATensor: TensorDesc
    BTensor: TensorDesc
    OutputTensor: TensorDesc

    TENSOR_RULES = rules({f: (False, _DIMS) for f in _BINARY}, {"ATensor": _COMPARED, "BTensor": _COMPARED, "OutputTensor": _BOOLEAN})
    SAME_TYPE: ClassVar[tuple[tuple[str, ...], ...]] = (("ATensor", "BTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("ATensor", "BTensor")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_EQUALS_OPERATOR_DESC(LogicalDesc):
    """ELEMENT_WISE_LOGICAL_EQUALS: ``A == B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_EQUALS


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OPERATOR_DESC(LogicalDesc):
    """ELEMENT_WISE_LOGICAL_GREATER_THAN: ``A > B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_GREATER_THAN


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OPERATOR_DESC(LogicalDesc):
    """ELEMENT_WISE_LOGICAL_LESS_THAN: ``A < B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_LESS_THAN


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL_OPERATOR_DESC(LogicalDesc):
    """ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL: ``A >= B``, DML_FEATURE_LEVEL_3_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL
    INTRODUCED = FL.FL_3_0


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL_OPERATOR_DESC(LogicalDesc):
    """ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL: ``A <= B``, DML_FEATURE_LEVEL_3_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL
    INTRODUCED = FL.FL_3_0


@dataclasses.dataclass(frozen=True)
class BooleanDesc(LogicalDesc):
    """``f(A, B)`` of UINT8 (or UINT32) truth values: nonzero is true."""

    TENSOR_RULES = rules({f: (False, _DIMS) for f in _BINARY}, {f: _BOOLEAN for f in _BINARY})
    SAME_TYPE = (_BINARY,)


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_AND_OPERATOR_DESC(BooleanDesc):
    """ELEMENT_WISE_LOGICAL_AND: ``A && B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_AND


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_OR_OPERATOR_DESC(BooleanDesc):
    """ELEMENT_WISE_LOGICAL_OR: ``A || B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_OR


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_XOR_OPERATOR_DESC(BooleanDesc):
    """ELEMENT_WISE_LOGICAL_XOR: ``(A != 0) != (B != 0)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_XOR


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOGICAL_NOT_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_LOGICAL_NOT: ``!Input``."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOGICAL_NOT
    TENSOR_RULES = rules({f: (False, _DIMS) for f in ("InputTensor", "OutputTensor")}, {"InputTensor": _BOOLEAN, "OutputTensor": _BOOLEAN})
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("InputTensor")


# --- import from ONNX ------------------------------------------------------------------------


def _binary(ctx: NodeContext, desc_class, types) -> DmlNode:
    """Two inputs of one of ``types`` (bool as UINT8) broadcast to the output, a bool output."""
    dtype = ctx.info(0).dtype
    if dtype not in types:
        raise Fallback(f"{ctx.node.op_type} of {dtype}: the DML EP's row takes no such type", ON_CPU)
    if ctx.info(1).dtype != dtype:
        raise ShapeError(f"input types differ: {dtype} and {ctx.info(1).dtype}", node=ctx.node)
    moved = np.dtype(np.uint8) if dtype == BOOL else dtype
    a_shape, b_shape = ctx.info(0).shape, ctx.info(1).shape
    out_shape, sizes = broadcast(ctx, a_shape, b_shape)
    desc = desc_class(
        ATensor=operand(moved, a_shape, sizes, ctx.input_name(0) in ctx.constants),
        BTensor=operand(moved, b_shape, sizes, ctx.input_name(1) in ctx.constants),
        OutputTensor=tensor(np.uint8, sizes),
    )
    return ctx.dml_node(desc, ("ATensor", "BTensor"), out_shape)


def _comparison(desc_class):
    def importer(ctx: NodeContext) -> DmlNode:
        return _binary(ctx, desc_class, FLOAT_TYPES | INTEGERS)
    importer.__doc__ = f"ONNX {desc_class.__doc__.split(':')[0]}'s op, on float16/32 or 8- to 64-bit integers."
    return importer


def _boolean(desc_class):
    def importer(ctx: NodeContext) -> DmlNode:
        return _binary(ctx, desc_class, frozenset({BOOL}))
    importer.__doc__ = f"ONNX {desc_class.__doc__.split(':')[0]}'s op, on bool."
    return importer


equal = _comparison(DML_ELEMENT_WISE_LOGICAL_EQUALS_OPERATOR_DESC)
greater = _comparison(DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OPERATOR_DESC)
less = _comparison(DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OPERATOR_DESC)
greater_or_equal = _comparison(DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL_OPERATOR_DESC)
less_or_equal = _comparison(DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL_OPERATOR_DESC)
and_ = _boolean(DML_ELEMENT_WISE_LOGICAL_AND_OPERATOR_DESC)
or_ = _boolean(DML_ELEMENT_WISE_LOGICAL_OR_OPERATOR_DESC)
xor = _boolean(DML_ELEMENT_WISE_LOGICAL_XOR_OPERATOR_DESC)


def not_(ctx: NodeContext) -> DmlNode:
    """ONNX Not, on bool."""
    if ctx.info(0).dtype != BOOL:
        raise Fallback(f"Not of {ctx.info(0).dtype}: the DML EP's row takes bool", ON_CPU)
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = DML_ELEMENT_WISE_LOGICAL_NOT_OPERATOR_DESC(InputTensor=tensor(np.uint8, sizes), OutputTensor=tensor(np.uint8, sizes))
    return ctx.dml_node(desc, ("InputTensor",), shape)


# --- kernel ----------------------------------------------------------------------------------

_UFUNCS = {
    DML_ELEMENT_WISE_LOGICAL_EQUALS_OPERATOR_DESC: np.equal,
    DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OPERATOR_DESC: np.greater,
    DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OPERATOR_DESC: np.less,
    DML_ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL_OPERATOR_DESC: np.greater_equal,
    DML_ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL_OPERATOR_DESC: np.less_equal,
    DML_ELEMENT_WISE_LOGICAL_AND_OPERATOR_DESC: np.logical_and,
    DML_ELEMENT_WISE_LOGICAL_OR_OPERATOR_DESC: np.logical_or,
    DML_ELEMENT_WISE_LOGICAL_XOR_OPERATOR_DESC: np.logical_xor,
}


def element_wise_logical(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """1 or 0 as ONNX bool (the bytes the DML EP's UINT8 output holds)."""
    if isinstance(desc, DML_ELEMENT_WISE_LOGICAL_NOT_OPERATOR_DESC):
        return np.logical_not(view(tensors["InputTensor"], desc.InputTensor))
    return _UFUNCS[type(desc)](view(tensors["ATensor"], desc.ATensor), view(tensors["BTensor"], desc.BTensor))


OPERATORS = tuple(Operator(desc=desc, kernel=element_wise_logical, exact_value=None, exact_for_any_input=True)
                  for desc in (*_UFUNCS, DML_ELEMENT_WISE_LOGICAL_NOT_OPERATOR_DESC))
