"""DML_OPERATOR_ELEMENT_WISE_IDENTITY (Transpose; Reshape, Flatten, Squeeze, Unsqueeze, Identity):
desc, import, kernel.

DirectML documents ``Output = Input`` (``Input * Scale + Bias`` with a ScaleBias): Input and Output
of one data type, DimensionCount and Sizes; their strides may differ, which is how a layout change
is expressed.

Import, as the DML EP does, for every element type its rows take (float16/32/64, the 8- to 64-bit
integers, and bool, which the DML EP describes to DirectML as UINT8: GetDmlDataTypeFromMlDataType):
- Transpose (DmlOperatorTranspose.cpp L14-55): Input's sizes are the permuted sizes, its strides
  the packed strides permuted alike; Output packed; both keep the ONNX rank (no 4-D padding).
- Reshape, Flatten, Squeeze, Unsqueeze, Identity (DmlOperatorCopy.cpp, REG_INFO_COPY rows): the
  data is unchanged, only the shape. The EP runs them as a resource copy (or an alias), and as
  IDENTITY with the Output desc for Input only inside a fused DirectML graph; dml_ep plans that
  IDENTITY (the operator a DxDispatch export can run) and its kernel returns a view: no copy. The
  shape inputs (Reshape's ``shape``, Squeeze's and Unsqueeze's ``axes`` from opset 13) are
  required CPU inputs: a constant, or a value computed on the CPU whose data the plan is made for.
- Expand 8, 13 (DmlOperatorExpand.cpp): the input broadcast to ONNX's shape of input and ``shape``
  (a required CPU input), both right-aligned to at least 4 dimensions, a stride of 0 on each
  broadcast dimension.

No exact value: nothing is quantized; every element is moved exactly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import packed_strides, view
from ..realep.placement import ON_CPU
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, broadcast, operand, tensor, within_dimensions
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

INTS_32 = frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8})
INTS_64 = frozenset({DT.FLOAT64, DT.INT64, DT.UINT64})
ALL_TYPES = FLOATS | INTS_32 | INTS_64
TYPES_BY_LEVEL = {FL.FL_1_0: FLOATS, FL.FL_2_1: INTS_32, FL.FL_4_1: INTS_64}  # JOIN, SLICE1, GATHER and IDENTITY share it
DIMS = {FL.FL_1_0: (4, 5), FL.FL_3_0: (1, 8)}
EIGHT_BIT = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})  # what dml_ep models of MaxPool
BOOL = np.dtype(np.bool_)
# The element types of the DML EP's data movement rows (the ONNX tensor types DirectML has a data type for, bool as UINT8).
MOVED = frozenset({np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                         np.int64, np.uint64, np.bool_)})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_IDENTITY: ``Output = Input`` read through Input's strides, DML_FEATURE_LEVEL_1_0 and up.

    ``ScaleBias`` is DirectML's optional DML_SCALE_BIAS, a (Scale, Bias) pair or None; the DML EP
    leaves it null for data movement."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    ScaleBias: Optional[tuple[float, float]] = None

    OPERATOR_TYPE = OP.ELEMENT_WISE_IDENTITY
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({"InputTensor": (False, DIMS), "OutputTensor": (False, DIMS)}, {"InputTensor": TYPES_BY_LEVEL, "OutputTensor": TYPES_BY_LEVEL})
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("InputTensor")
        if self.ScaleBias is not None and self.OutputTensor.DataType not in FLOATS:
            self.fail("a ScaleBias on an integer tensor is not documented", "ScaleBias")


# --- import from ONNX ------------------------------------------------------------------------


def moved_type(ctx: NodeContext, index: int = 0) -> np.dtype:
    """The element type of the tensor a data-movement node moves: one of the DML EP's row, else
    Fallback (the CPU EP's, as the real EP's kernel lookup leaves it)."""
    dtype = ctx.info(index).dtype
    if dtype not in MOVED:
        raise Fallback(f"{ctx.node.op_type} of {dtype} data: the DML EP's row takes no such type", ON_CPU)
    return dtype


def dml_type(dtype) -> np.dtype:
    """The numpy type of a tensor's DirectML data type: bool is UINT8 (the DML EP's bool tensors are
    bytes holding 0 or 1); the kernels move the arrays as they come, bool included."""
    return np.dtype(np.uint8) if np.dtype(dtype) == BOOL else np.dtype(dtype)


def dims_of(ctx: NodeContext, shape) -> tuple[int, ...]:
    """A tensor's DirectML sizes at its ONNX rank (a scalar as {1}); Fallback beyond 8 dimensions."""
    return tuple(within_dimensions(shape)) or (1,)


def transpose(ctx: NodeContext) -> DmlNode:
    dtype = dml_type(moved_type(ctx))
    shape = ctx.shape(0)
    perm = ctx.attr("perm")
    perm = list(range(len(shape)))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(len(shape))):
        raise ShapeError(f"perm {perm} is not a permutation of the {len(shape)} axes of {list(shape)}", node=ctx.node)
    out_shape = tuple(shape[p] for p in perm)
    sizes = dims_of(ctx, out_shape)
    strides = packed_strides(shape)
    desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(
        InputTensor=tensor(dtype, sizes, tuple(strides[p] for p in perm) or (1,)),
        OutputTensor=tensor(dtype, sizes),
    )
    return ctx.dml_node(desc, ("InputTensor",), out_shape)


def copy(ctx: NodeContext) -> DmlNode:
    """Reshape, Flatten, Squeeze, Unsqueeze and Identity: the input read with the output's sizes."""
    dtype = dml_type(moved_type(ctx))
    shape = ctx.shape(0)
    out_shape = RESHAPED[ctx.node.op_type](ctx, shape)
    if math.prod(out_shape) != math.prod(shape):
        raise ShapeError(f"{ctx.node.op_type} of {list(shape)} to {list(out_shape)} changes the element count", node=ctx.node)
    sizes = dims_of(ctx, out_shape)
    desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes))
    return ctx.dml_node(desc, ("InputTensor",), out_shape)


def scale(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlScale, QuickGelu's first part (graphs/quick_gelu.py): the float input times
    ``alpha``, as a ScaleBias {alpha, 0}."""
    dtype = ctx.info(0).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"element type {dtype} is not supported with a ScaleBias (FLOAT32, FLOAT16)", ON_CPU)
    shape = ctx.shape(0)
    sizes = dims_of(ctx, shape)
    desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes),
                                                   ScaleBias=(float(np.float32(ctx.attr("alpha"))), 0.0))
    return ctx.dml_node(desc, ("InputTensor",), shape)


def expand(ctx: NodeContext) -> DmlNode:
    """Expand: the input read with the broadcast output's sizes, zero strides where it repeats."""
    dtype = dml_type(moved_type(ctx))
    shape = ctx.shape(0)
    target = tuple(int(d) for d in ctx.constants[ctx.input_name(1)].reshape(-1))
    out_shape, sizes = broadcast(ctx, shape, target)
    desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(InputTensor=operand(dtype, shape, sizes), OutputTensor=tensor(dtype, sizes))
    return ctx.dml_node(desc, ("InputTensor",), out_shape)


def _given_axes(ctx: NodeContext) -> list[int] | None:
    """Squeeze's or Unsqueeze's axes as given: the attribute (before opset 13) or input 1; None when absent."""
    axes = ctx.attr("axes")
    if axes is None and ctx.input_name(1):
        axes = ctx.constants[ctx.input_name(1)].reshape(-1).tolist()
    return axes


def _axes(ctx: NodeContext, axes: list[int], rank: int) -> list[int]:
    """``axes`` normalised to ``[0, rank)``, checked."""
    normalised = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    if any(not 0 <= a < rank for a in normalised) or len(set(normalised)) != len(normalised):
        raise ShapeError(f"axes {list(axes)} are out of range or repeated for rank {rank}", node=ctx.node)
    return normalised


def _reshape(ctx: NodeContext, shape) -> tuple[int, ...]:
    target = [int(d) for d in ctx.constants[ctx.input_name(1)].reshape(-1)]
    allow_zero = ctx.attr("allowzero", 0)
    out = [shape[i] if d == 0 and not allow_zero and i < len(shape) else d for i, d in enumerate(target)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ShapeError(f"shape {target} is not a valid Reshape target", node=ctx.node)
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or math.prod(shape) % known:
            raise ShapeError(f"cannot reshape {list(shape)} to {target}", node=ctx.node)
        out[out.index(-1)] = math.prod(shape) // known
    return tuple(out)


def _flatten(ctx: NodeContext, shape) -> tuple[int, ...]:
    axis = ctx.attr("axis", 1)
    if not -len(shape) <= axis <= len(shape):
        raise ShapeError(f"axis {axis} is out of range for rank {len(shape)}", node=ctx.node)
    axis += len(shape) if axis < 0 else 0
    return math.prod(shape[:axis]), math.prod(shape[axis:])


def _squeeze(ctx: NodeContext, shape) -> tuple[int, ...]:
    given = _given_axes(ctx)
    if given is None:
        return tuple(d for d in shape if d != 1)
    axes = _axes(ctx, given, len(shape))
    if any(shape[a] != 1 for a in axes):
        raise ShapeError(f"Squeeze axes {axes} of {list(shape)} are not all of size 1", node=ctx.node)
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _unsqueeze(ctx: NodeContext, shape) -> tuple[int, ...]:
    given = _given_axes(ctx)
    if given is None:
        raise ShapeError("Unsqueeze needs axes", node=ctx.node)
    rank = len(shape) + len(given)
    axes = _axes(ctx, given, rank)
    rest = iter(shape)
    return tuple(1 if i in axes else next(rest) for i in range(rank))


RESHAPED = {"Reshape": _reshape, "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Identity": lambda ctx, shape: shape}


def rotary_copy(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryCopy, the copy of RotaryEmbedding's rotated columns (DmlOperatorRotaryEmbedding.cpp
    L170-195): [B, S, N, rd] from the input ([B, S, hidden], or the 4-D [B, N, S, rd] through strides), ScaleBias
    {1, 0} as the EP sets it; the value [B, S, N, 2, rd/2] ([B, S, N, rd/2, 2] ``interleaved``) the graph's SPLIT reads."""
    dtype = dml_type(moved_type(ctx))
    shape, heads, transposed = ctx.shape(0), ctx.attr("num_heads"), ctx.attr("transposed", 0)
    batch, sequence = shape[0], shape[2] if transposed else shape[1]
    rotary = shape[-1] if len(shape) == 4 else shape[-1] // heads
    sizes = (batch, sequence, heads, rotary)
    strides = (rotary * heads * sequence, rotary, sequence * rotary, 1) if transposed else None
    desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(InputTensor=tensor(dtype, sizes, strides), OutputTensor=tensor(dtype, sizes), ScaleBias=(1.0, 0.0))
    half = rotary // 2
    paired = (batch, sequence, heads, half, 2) if ctx.attr("interleaved", 0) else (batch, sequence, heads, 2, half)
    return ctx.dml_node(desc, ("InputTensor",), paired)


# --- kernel ----------------------------------------------------------------------------------


def identity(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """Input read through its desc; packed like the output: a view where Input's strides are
    packed, else one copy. A ScaleBias other than {1, 0} is ``x * Scale + Bias`` in float32, rounded
    once to the tensor's type; {1, 0} (the DML EP's for RotaryEmbedding's copy) is taken as the move it
    means, every bit kept (dml_ep's choice: IEEE's -0 * 1 + 0 would be +0)."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    if desc.ScaleBias is None or tuple(desc.ScaleBias) == (1.0, 0.0):
        return np.ascontiguousarray(x)
    scale, bias = (np.float32(v) for v in desc.ScaleBias)
    return (x.astype(np.float32) * scale + bias).astype(x.dtype)


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC, kernel=identity, exact_value=None, exact_for_any_input=True),)
