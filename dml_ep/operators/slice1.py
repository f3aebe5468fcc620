"""DML_OPERATOR_SLICE1 (Slice 1, 10, 11, 13): desc, import, kernel.

DirectML documents, per dimension, a window of the input (InputWindowOffsets, InputWindowSizes)
walked with InputWindowStrides (signed: DirectML.h types them INT, the page UINT); a negative
stride starts from the window's end. Output has the same data type and DimensionCount.

Import, as DmlOperatorSlice.cpp (L12-41) and ``SliceHelper::Initialize`` (OperatorHelper.cpp
L1005-1097): starts, ends, axes and steps are required CPU inputs (attributes at Slice-1);
negative starts and ends add the dimension's size; for a negative step the window [end + 1,
start + 1) is walked backwards; both clamped to [0, size]; the output size is ceil(window /
|step|). Tensors keep the ONNX rank (at least 1). Every type of the DML EP's row (bool as UINT8).

No exact value: nothing is quantized.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ON_CPU
from .base import FLOATS, Operator, OperatorDesc, SignedIntegers, TensorDesc, rules
from .element_wise_identity import INTS_32, INTS_64, dims_of, dml_type, moved_type
from .importing import Fallback, NodeContext, as_int32, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_2_1: (4, 5), FL.FL_3_0: (1, 8)}


@dataclasses.dataclass(frozen=True)
class DML_SLICE1_OPERATOR_DESC(OperatorDesc):
    """SLICE1: a strided window of the input, DML_FEATURE_LEVEL_2_1 and up."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    DimensionCount: int
    InputWindowOffsets: tuple[int, ...]
    InputWindowSizes: tuple[int, ...]
    InputWindowStrides: SignedIntegers

    OPERATOR_TYPE = OP.SLICE1
    INTRODUCED = FL.FL_2_1
    TYPES = {FL.FL_2_1: FLOATS | INTS_32, FL.FL_4_1: INTS_64}
    TENSOR_RULES = rules({"InputTensor": (False, DIMS), "OutputTensor": (False, DIMS)}, {"InputTensor": TYPES, "OutputTensor": TYPES})
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        window = (self.InputWindowOffsets, self.InputWindowSizes, self.InputWindowStrides)
        if any(len(values) != self.DimensionCount for values in window) or self.InputTensor.DimensionCount != self.DimensionCount:
            self.fail(f"DimensionCount {self.DimensionCount} must be the tensors' and the window arrays' length")
        for axis, (size, offset, length, stride, out) in enumerate(zip(self.InputTensor.Sizes, *window, self.OutputTensor.Sizes)):
            if stride == 0 or length < 1 or offset + length > size:
                self.fail(f"dimension {axis}: window [{offset}, {offset + length}) stride {stride} must be non-empty, inside {size}, stride non-zero")
            if not 1 <= out <= 1 + (length - 1) // abs(stride):
                self.fail(f"dimension {axis}: output size {out} is outside [1, {1 + (length - 1) // abs(stride)}]", "OutputTensor")


# --- import from ONNX ------------------------------------------------------------------------


def slice_(ctx: NodeContext) -> DmlNode:
    dtype = dml_type(moved_type(ctx))
    shape = ctx.shape(0)
    rank = len(shape)
    if ctx.opset < 10:  # Slice-1: attributes
        starts, ends, axes, steps = ctx.attr("starts", []), ctx.attr("ends", []), ctx.attr("axes"), None
    else:
        starts, ends, axes, steps = (_ints(ctx, i) for i in range(1, 5))
    if starts is None or ends is None or len(starts) != len(ends):
        raise ShapeError("starts and ends must be given, of one length", node=ctx.node)
    axes = list(range(len(starts))) if axes is None else [a + rank if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != len(starts) or len(steps) != len(starts) or len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise ShapeError(f"axes {axes} and steps {steps} must match starts, be distinct and in range for rank {rank}", node=ctx.node)
    if 0 in steps:
        raise ShapeError("a step is 0", node=ctx.node)
    offsets, lengths, strides = [0] * rank, list(shape), [1] * rank
    out_shape = list(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        offsets[axis], lengths[axis], out_shape[axis] = _window(shape[axis], start, end, step)
        strides[axis] = step
    if 0 in out_shape:
        raise Fallback("an empty output: the DML EP makes no operator for it", ON_CPU)
    if not shape:
        raise ShapeError("Slice of a scalar", node=ctx.node)
    sizes = dims_of(ctx, shape)
    desc = DML_SLICE1_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, tuple(out_shape)), DimensionCount=len(sizes),
                                    InputWindowOffsets=tuple(offsets), InputWindowSizes=tuple(lengths), InputWindowStrides=tuple(strides))
    return ctx.dml_node(desc, ("InputTensor",), tuple(out_shape))


def _ints(ctx: NodeContext, index: int) -> list[int] | None:
    name = ctx.input_name(index)
    return None if not name else as_int32(ctx.constants[name].reshape(-1))


def _window(size: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """(offset, window size, output size) of one sliced dimension, as SliceHelper computes them."""
    start, end = (v + size if v < 0 else v for v in (start, end))
    if step < 0:  # walk [end + 1, start + 1) backwards
        start, end = end + 1, start + 1
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    length = max(end - start, 0)
    return start, length, -(-length // abs(step))


# --- kernel ----------------------------------------------------------------------------------


def slice1(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """``Output[c] = Input[start + stride * c]``, start at the window's end for a negative stride."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    index = tuple(slice(offset + length - 1 if stride < 0 else offset, None, stride)
                  for offset, length, stride in zip(desc.InputWindowOffsets, desc.InputWindowSizes, desc.InputWindowStrides))
    out = x[index]
    return np.ascontiguousarray(out[tuple(slice(0, n) for n in desc.OutputTensor.Sizes)])


OPERATORS = (Operator(desc=DML_SLICE1_OPERATOR_DESC, kernel=slice1, exact_value=None, exact_for_any_input=True),)
