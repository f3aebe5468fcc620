"""DML_OPERATOR_ELEMENT_WISE_ADD, _SUBTRACT, _MULTIPLY and _DIVIDE (Add of integers, Sub, Mul, Div):
descs, import, kernel.

Import, as DmlOperatorElementWise.cpp: every tensor right-aligned to at least 4 dimensions and read
with the output's sizes, ONNX broadcasting a stride of 0 (``binary``, which ELEMENT_WISE_ADD1's Add
shares). In a QDQ model these are the float Mul and Div between a DequantizeLinear and a
QuantizeLinear; in an LLM the float16 Mul of SiLU and the int64 Sub of the attention-mask subgraph
(sequence lengths). The DML EP's rows take float16/32 and the 8- to 64-bit integers, all of them
here: the float Add is ELEMENT_WISE_ADD1's (``element_wise_add1.py``), the integer Add the real EP's
plain ELEMENT_WISE_ADD.

Support per feature level (the DirectML pages): float32 and float16 from DML_FEATURE_LEVEL_1_0,
INT32/UINT32 from 2_1 (DIVIDE from 3_0), INT64/UINT64 from 4_1 (DIVIDE 6_0), the 8- and 16-bit
integers from 5_1; 4 dimensions, 4 to 5 from 2_0, 1 to 8 from 3_0.

Kernel, floats: the operation in float32, rounded once to the tensors' type. Each is one correctly
rounded IEEE operation, so DirectML's point value and onnxruntime's CPU EP agree bit for bit; for
float16, float32 holds a product exactly and a quotient rounded in float32 then to float16 is the
correctly rounded float16 quotient (24 >= 2 * 11 + 2 bits). Division by zero gives infinity or NaN,
silently. A device may differ (``device_precision``): Direct3D's add, sub and mul are within 0.5
ULP, its division may be a 1 ULP reciprocal times the dividend.

Kernel, integers: two's complement, wrapping on overflow (DirectML's pages are silent; onnxruntime's
Eigen kernels wrap on x86-64, and so does every GPU's integer ALU); Div truncates toward zero
(DIVIDE's page: "for integer division, the result is truncated"; onnxruntime's C++ ``/`` too). An
integer division by zero raises: onnxruntime's CPU EP dies of it (SIGFPE) and DirectML does not
say. Exact in both arithmetics.

No exact value: these do not quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import NodeError, ShapeError
from ..core.tensor_desc import view
from ..numerics.kernels.rotary_embedding import host_rotary_fused, mlas_rotary
from ..realep.placement import ON_DML_AS
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, bound, broadcast, operand, tensor
from .kernel_state import KernelState
from .nodes import DmlNode, Imported

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}
_FIELDS = ("ATensor", "BTensor", "OutputTensor")
_INTS_32, _INTS_64 = frozenset({DT.INT32, DT.UINT32}), frozenset({DT.INT64, DT.UINT64})
_INTS_SMALL = frozenset({DT.INT16, DT.INT8, DT.UINT16, DT.UINT8})
# ADD, SUBTRACT and MULTIPLY's types per feature level (their pages); DIVIDE's come later.
_TYPES = {FL.FL_1_0: FLOATS, FL.FL_2_1: _INTS_32, FL.FL_4_1: _INTS_64, FL.FL_5_1: _INTS_SMALL}
_DIVIDE_TYPES = {FL.FL_1_0: FLOATS, FL.FL_3_0: _INTS_32, FL.FL_5_1: _INTS_SMALL, FL.FL_6_0: _INTS_64}
INTEGERS = frozenset(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64))
FLOAT_TYPES = frozenset({np.dtype(np.float32), np.dtype(np.float16)})


@dataclasses.dataclass(frozen=True)
class BinaryDesc(OperatorDesc):
    """Common base of the binary element-wise descs (and ELEMENT_WISE_ADD1's): ``f(A, B)``, all
    three the same sizes and type."""

    ATensor: TensorDesc
    BTensor: TensorDesc
    OutputTensor: TensorDesc

    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})
    SAME_TYPE = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("ATensor", "BTensor")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_ADD_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_ADD: ``A + B`` (the DML EP's Add with nothing fused; dml_ep plans its integer Add)."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_ADD
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_SUBTRACT: ``A - B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_SUBTRACT
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_MULTIPLY: ``A * B``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_MULTIPLY
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_DIVIDE: ``A / B``, an integer quotient truncated."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_DIVIDE
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _DIVIDE_TYPES for f in _FIELDS})


# --- import from ONNX ------------------------------------------------------------------------


def binary(ctx: NodeContext, desc_class, real_operator: str = "", types=FLOAT_TYPES | INTEGERS) -> DmlNode:
    """A two-input element-wise node of ``types`` as ``desc_class``; ``real_operator``, the
    DirectML operator the real EP runs where it is another (for the fallback of the types dml_ep
    does not model)."""
    dtype = ctx.info(0).dtype
    if dtype not in types:
        name = desc_class.OPERATOR_TYPE.name
        allowed = ", ".join(sorted(DT.from_numpy(t).name for t in types))
        raise Fallback(f"element type {dtype} is not supported by {name} ({allowed})", ON_DML_AS.format(real_operator or name))
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


def integer_add(ctx: NodeContext) -> DmlNode:
    """An integer Add: ELEMENT_WISE_ADD, as the real EP builds every Add with nothing fused."""
    return binary(ctx, DML_ELEMENT_WISE_ADD_OPERATOR_DESC, types=INTEGERS)


def rotary_add(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryAdd, RotaryEmbedding's ADD of its two products [B, S, N, 2, rd/2] (or pairs)
    (DmlOperatorRotaryEmbedding.cpp L320-325) as [B, S, N, rd]; the 4-D input's [B, N, S, rd] written packed with the
    operands read through strides (the EP writes through the output's strides: the same operation). The value: the
    node's output shape where ``whole`` (rd = H), else the rotated columns the last JOIN reads."""
    dtype = ctx.info(0).dtype
    batch, sequence, heads, *pair = ctx.shape(0)
    rotary, transposed = pair[0] * pair[1], ctx.attr("transposed", 0)
    if transposed:
        sizes, strides = (batch, heads, sequence, rotary), (sequence * heads * rotary, rotary, heads * rotary, 1)
    else:
        sizes, strides = (batch, sequence, heads, rotary), None
    desc = DML_ELEMENT_WISE_ADD_OPERATOR_DESC(ATensor=tensor(dtype, sizes, strides), BTensor=tensor(dtype, sizes, strides),
                                              OutputTensor=tensor(dtype, sizes))
    whole_3d = ctx.attr("whole", 0) and not transposed
    fields = ("ATensor", "BTensor", "RotaryInput", "RotaryCos", "RotarySin")[:len(ctx.node.input)]
    entry = bound(ctx.node, desc, {field: index for index, field in enumerate(fields)},
                  ((batch, sequence, heads * rotary) if whole_3d else sizes,), ctx.constants, ctx.origin)
    if len(fields) == 5:  # the "onnxruntime" arithmetic's CPU RotaryEmbedding reads the copied input and the gathered caches
        entry.imported = Imported(ROTARY_INTERLEAVED if ctx.attr("interleaved", 0) else ROTARY)
    return entry


# onnxruntime's CPU kernel of the RotaryEmbedding whose last ADD this is (``rotary_add``), halves or interleaved pairs.
ROTARY, ROTARY_INTERLEAVED = "MlasRotaryEmbedOneRow", "MlasRotaryEmbedOneRow interleaved"


def offset_positions(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryPositions, RotaryEmbedding's ADD of 1-D position ids (an offset) to 0 .. S-1
    (DmlOperatorRotaryEmbedding.cpp L249-271): both broadcast to {1, 1, B, S}, B the batch of input 2 (the node's x).
    INT64, exact."""
    sequence, batch = ctx.shape(0)[-1], ctx.shape(2)[0]
    sizes = (1, 1, batch, sequence)
    desc = DML_ELEMENT_WISE_ADD_OPERATOR_DESC(ATensor=tensor(np.int64, sizes, (0, 0, 0, 1)), BTensor=tensor(np.int64, sizes, (0, 0, 0, 0)),
                                              OutputTensor=tensor(np.int64, sizes))
    return ctx.dml_node(desc, ("ATensor", "BTensor"), (batch, sequence))


def sub(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC)


def mul(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC)


def div(ctx: NodeContext) -> DmlNode:
    return binary(ctx, DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC)


# --- kernel ----------------------------------------------------------------------------------

_UFUNCS = {
    DML_ELEMENT_WISE_ADD_OPERATOR_DESC: np.add,
    DML_ELEMENT_WISE_SUBTRACT_OPERATOR_DESC: np.subtract,
    DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC: np.multiply,
    DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC: np.divide,
}


def element_wise_binary(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE, silently (its callers run kernels under one np.errstate); integers wrap. RotaryEmbedding's last ADD in
    the "onnxruntime" arithmetic: onnxruntime's CPU RotaryEmbedding of the inputs it binds (``rotary_add``)."""
    if state.imported.onnxruntime in (ROTARY, ROTARY_INTERLEAVED) and options.onnxruntime:
        rotated = mlas_rotary(tensors["RotaryInput"], tensors["RotaryCos"], tensors["RotarySin"],
                              state.imported.onnxruntime == ROTARY_INTERLEAVED, host_rotary_fused())
        return view(rotated, desc.ATensor)
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    if a.dtype.kind in "iu":
        return truncated_quotient(a, b) if isinstance(desc, DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC) else _UFUNCS[type(desc)](a, b)
    return _UFUNCS[type(desc)](a, b, dtype=np.float32).astype(a.dtype, copy=False)


def truncated_quotient(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a / b`` of integers, truncated toward zero (numpy's ``//`` floors); a zero divisor raises.
    INT_MIN / -1 wraps to INT_MIN (onnxruntime's x86 division traps on it)."""
    if not np.all(b):
        raise NodeError("an integer division by zero (onnxruntime's CPU EP traps on it; DirectML does not say what it gives)", tensor="BTensor")
    quotient = np.floor_divide(a, b)
    inexact = (quotient * b != a) & ((a < 0) != (b < 0))
    return np.where(inexact, quotient + 1, quotient).astype(a.dtype, copy=False)


def is_integer(desc) -> bool:
    """Integer tensors: the same output in every arithmetic."""
    return desc.OutputTensor.DataType not in FLOATS


def device_precision(desc) -> DevicePrecision | None:
    """How far a Direct3D 12 device may put a float output from the correctly rounded one; None for integers."""
    if is_integer(desc):
        return None
    if isinstance(desc, DML_ELEMENT_WISE_DIVIDE_OPERATOR_DESC):
        return DIVISION
    return ROUNDED


ROUNDED = DevicePrecision("D3D11.3 §3.1.3.1: fp32 add, sub, mul within 0.5 ULP (tie rule unstated), fp16 §3.1.5 round to nearest even; "
                          "WebNN's conformance tolerance for add, sub, mul: 1 ULP", ulp32=1, ulp16=1)
DIVISION = DevicePrecision("D3D11.3 §3.1.3.2: x / y may be x * (1 / y), a 1 ULP reciprocal and a 0.5 ULP multiply; "
                           "WebNN's conformance tolerance for div: 2 ULP", ulp32=2, ulp16=2)

OPERATORS = tuple(Operator(desc=desc, kernel=element_wise_binary, exact_value=None, exact_for_any_input=is_integer,
                           device_precision=device_precision) for desc in _UFUNCS)
