"""DML_OPERATOR_MAX_POOLING and MAX_POOLING2 (ONNX MaxPool 8-12): descs, import, kernel.

Import, as DmlOperatorPooling.cpp does it: MAX_POOLING2 only when the Indices output is requested
or a dilation differs from 1, else the older MAX_POOLING. The input is 4-D {N,C,H,W} or 5-D
{N,C,D,H,W}; a 1-D pooling ([N, C, W]) gets a height of 1 (window, stride and dilation 1, no
padding). ``ceil_mode`` only changes the output size the EP computes (OperatorHelper.cpp
InitializeKernelOutputDimensions: one more where the division leaves a remainder); where that size
differs from onnxruntime's (which drops a last window starting past the input and its start
padding), dml_ep leaves the node to the CPU. ``storage_order`` 1 is declined (QueryMaxPool).

Indices: ONNX's are int64, and the EP describes them to DirectML as UINT64 (its Indices output is
forced unsigned): DirectML writes each maximum's offset in InputTensor viewed as one flat array,
the first of equal values found. onnxruntime's CPU kernel (pool_functors.h MaxPoolNDTask) writes
``c * x_step + h * W + w`` over the unpadded NCHW input, ``c`` counting batch and channel, the first
maximum in row-major window order, padding never taken: the same offsets. The kernel returns
them as the int64 tensor the real EP binds to that UINT64 buffer (the same bytes).

Kernel: the input padded with its type's lowest value (so padding never wins), the windows a
strided view, their maximum; no quantization, so no exact value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import InvalidAttributeError, ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ASSIGNED_TO_DML, ON_CPU, ON_DML
from .base import FLOATS, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode
from .windows import int_list, output_sizes, positive, resolve_padding

# --- descs -----------------------------------------------------------------------------------

# Both pages' tables: FLOAT32/16 from the operator's introduction, INT8/UINT8 from FL 3_0, the
# other integers from FL 5_0 (sdk-api ns-directml-dml_max_pooling_operator_desc.md @ 6721cae4,
# ns-directml-dml_max_pooling2_operator_desc.md @ b6ccb924).
_WIDE_INTEGERS = frozenset({DT.INT64, DT.INT32, DT.INT16, DT.UINT64, DT.UINT32, DT.UINT16})


def _data_types(introduced: FL) -> dict:
    return {introduced: FLOATS, FL.FL_3_0: QUANTIZED, FL.FL_5_0: _WIDE_INTEGERS}


_DIMS = {FL.FL_1_0: (4, 5)}


class PoolingDesc(OperatorDesc):
    """The size rules MAX_POOLING and MAX_POOLING2 share, over the fields both declare."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    WindowSize: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]

    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    @property
    def dilations(self) -> tuple[int, ...]:
        return getattr(self, "Dilations", (1,) * self.DimensionCount)

    def validate_shapes(self, feature_level: FL) -> None:
        dims = self.InputTensor.DimensionCount
        if self.DimensionCount != dims - 2:
            self.fail(f"{self.DimensionCount} must be InputTensor's DimensionCount - 2 = {dims - 2}", "DimensionCount")
        for name in ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations"):
            values = getattr(self, name, None)
            if values is None:
                continue
            if len(values) != self.DimensionCount:
                self.fail(f"has {len(values)} values, DimensionCount is {self.DimensionCount}", name)
            if 0 in values and not name.endswith("Padding"):  # a negative value breaks the UINT rule first
                self.fail(f"{list(values)} must be at least 1", name)
        for field, each in self.tensors().items():
            if each.DimensionCount != dims:
                self.fail(f"DimensionCount {each.DimensionCount} must equal InputTensor's {dims}", field)
        batch_channels, in_spatial = self.InputTensor.Sizes[:2], self.InputTensor.Sizes[2:]
        window = (self.WindowSize, self.Strides, self.dilations, self.StartPadding, self.EndPadding)
        try:
            floor = output_sizes(in_spatial, *window)
        except ValueError as exc:
            span, padded = exc.args
            self.fail(f"the (dilated) window ({span}) is larger than the padded input ({padded})", "WindowSize")
        # The page's formula; the DML EP's ceil_mode size (one more where the division leaves a
        # remainder) is accepted too: the page is silent on it, the EP builds such descs.
        allowed = {(*batch_channels, *floor), (*batch_channels, *output_sizes(in_spatial, *window, ceil=True))}
        for field in ("OutputTensor", "OutputIndicesTensor"):
            output = getattr(self, field, None)
            if output is not None and tuple(output.Sizes) not in allowed:
                self.fail(f"sizes {list(output.Sizes)} must be {list(min(allowed))} (or the ceil_mode size)", field)


@dataclasses.dataclass(frozen=True)
class DML_MAX_POOLING_OPERATOR_DESC(PoolingDesc):
    """MAX_POOLING (ONNX MaxPool without Indices or dilations), DML_FEATURE_LEVEL_1_0 and up."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    WindowSize: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]

    OPERATOR_TYPE = OP.MAX_POOLING
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({"InputTensor": (False, _DIMS), "OutputTensor": (False, _DIMS)},
                         {"InputTensor": _data_types(FL.FL_1_0), "OutputTensor": _data_types(FL.FL_1_0)})


@dataclasses.dataclass(frozen=True)
class DML_MAX_POOLING2_OPERATOR_DESC(PoolingDesc):
    """MAX_POOLING2 (ONNX MaxPool with Indices or dilations), DML_FEATURE_LEVEL_2_1 and up;
    OutputIndicesTensor UINT32, or UINT64 from DML_FEATURE_LEVEL_5_0."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    OutputIndicesTensor: TensorDesc | None
    DimensionCount: int
    Strides: tuple[int, ...]
    WindowSize: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    Dilations: tuple[int, ...]

    OPERATOR_TYPE = OP.MAX_POOLING2
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = rules(
        {"InputTensor": (False, _DIMS), "OutputTensor": (False, _DIMS), "OutputIndicesTensor": (True, _DIMS)},
        {"InputTensor": _data_types(FL.FL_2_1), "OutputTensor": _data_types(FL.FL_2_1),
         "OutputIndicesTensor": {FL.FL_2_1: frozenset({DT.UINT32}), FL.FL_5_0: frozenset({DT.UINT64})}},
    )

    @property
    def OUTPUT_FIELDS(self) -> tuple[str, ...]:
        """The node's outputs, in order: the indices where requested."""
        return ("OutputTensor",) if self.OutputIndicesTensor is None else ("OutputTensor", "OutputIndicesTensor")


# --- import from ONNX ------------------------------------------------------------------------


def storage_order(ctx: NodeContext) -> None:
    """QueryMaxPool: the DML EP declines ``storage_order != 0``."""
    order = ctx.attr("storage_order", 0)
    if order != 0:
        raise Fallback(f"storage_order {order}: QueryMaxPool declines storage_order != 0", ON_CPU)


def onnxruntime_output_sizes(in_spatial, kernel, strides, dilations, start, end, ceil: bool) -> tuple[int, ...]:
    """onnxruntime's output size (pool_attributes.h ComputeOutputSize): with ``ceil``, rounded up,
    less a last window that would start past the input and its start padding."""
    sizes = []
    for size, k, s, d, p0, p1 in zip(in_spatial, kernel, strides, dilations, start, end):
        room = size + p0 + p1 - (k - 1) * d - 1
        out = (-(-room // s) if ceil else room // s) + 1
        if ceil and (out - 1) * s >= size + p0:
            out -= 1
        sizes.append(out)
    return tuple(sizes)


def max_pool(ctx: NodeContext) -> DmlNode:
    x = ctx.info(0)
    if x.dtype in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"float MaxPool (input {x.dtype}) is a float operator", ON_DML)
    if x.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise Fallback(f"input type {x.dtype} is not supported (the DML EP registers float16, float32, int8, uint8)", ON_CPU)
    shape = ctx.shape(0)
    rank = len(shape)
    if rank < 3:
        raise ShapeError(f"input has {rank} dimensions; MaxPool needs at least 3 (N, C and a spatial one)", node=ctx.node)
    if rank > 5:
        raise Fallback(f"{rank - 2}-D pooling (DirectML pools 4-D and 5-D tensors)", ASSIGNED_TO_DML)
    spatial = rank - 2
    batch, channels, *in_spatial = shape
    if ctx.attr("kernel_shape") is None:
        raise InvalidAttributeError("kernel_shape is required", node=ctx.node)
    kernel = int_list(ctx, "kernel_shape", [], spatial)
    if any(k < 1 for k in kernel):
        raise InvalidAttributeError(f"kernel_shape {kernel} must be positive", node=ctx.node)
    strides, dilations = positive(ctx, "strides", spatial), positive(ctx, "dilations", spatial)
    start, end = resolve_padding(ctx, in_spatial, kernel, strides, dilations)
    ceil = bool(ctx.attr("ceil_mode", 0))
    window = (kernel, strides, dilations, start, end)
    try:
        out_spatial = output_sizes(in_spatial, *window, ceil=ceil)
    except ValueError as exc:
        span, padded = exc.args
        raise ShapeError(f"the (dilated) kernel spans {span} but the padded input is only {padded}", node=ctx.node) from None
    theirs = onnxruntime_output_sizes(in_spatial, *window, ceil)
    if out_spatial != theirs:
        raise Fallback(f"ceil_mode output size {list(out_spatial)}: the DML EP keeps a last window starting past the input, "
                       f"onnxruntime's size is {list(theirs)}", ON_DML)
    pad1, zero1 = (1,) * (spatial == 1), (0,) * (spatial == 1)  # 1-D: a height of 1 in front
    fields: dict[str, Any] = dict(DimensionCount=len(pad1) + spatial, Strides=pad1 + tuple(strides), WindowSize=pad1 + tuple(kernel),
                  StartPadding=zero1 + tuple(start), EndPadding=zero1 + tuple(end))
    in_sizes, out_sizes = (batch, channels, *pad1, *in_spatial), (batch, channels, *pad1, *out_spatial)
    indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    out_shape = (batch, channels, *out_spatial)
    desc: PoolingDesc
    if indices or any(d != 1 for d in dilations):
        desc = DML_MAX_POOLING2_OPERATOR_DESC(
            InputTensor=tensor(x.dtype, in_sizes), OutputTensor=tensor(x.dtype, out_sizes),
            OutputIndicesTensor=tensor(np.uint64, out_sizes) if indices else None, Dilations=pad1 + tuple(dilations), **fields)
    else:
        desc = DML_MAX_POOLING_OPERATOR_DESC(InputTensor=tensor(x.dtype, in_sizes), OutputTensor=tensor(x.dtype, out_sizes), **fields)
    return ctx.dml_node(desc, ("InputTensor",), out_shape, more_output_shapes=(out_shape,) if indices else ())


# --- kernel ----------------------------------------------------------------------------------


def _lowest(dtype: np.dtype):
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _windows(desc, padded: np.ndarray, out_spatial) -> np.ndarray:
    """The windows of ``padded`` (its last DimensionCount axes spatial) each output reads, as a
    strided view [..., *out, *window]."""
    nd = desc.DimensionCount
    spans = [(k - 1) * d + 1 for k, d in zip(desc.WindowSize, desc.dilations)]
    windows = sliding_window_view(padded, spans, axis=tuple(range(padded.ndim - nd, padded.ndim)))
    picks = (*(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_spatial, desc.Strides)), *(slice(None, None, d) for d in desc.dilations))
    return windows[(Ellipsis,) + picks]


def max_pooling(desc, tensors: dict, arithmetic, state: KernelState):
    """``Output[n, c, o] = max over the window of Input`` (padding at the type's lowest value), and
    for MAX_POOLING2 with OutputIndicesTensor the flat offset in Input of the first maximum."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    out_spatial = tuple(desc.OutputTensor.Sizes[2:])
    # enough end padding for every window the output reads (the ceil_mode size may read past EndPadding)
    ends = [max(p1, (o - 1) * s + (k - 1) * d + 1 - n - p0) for o, s, k, d, n, p0, p1 in
            zip(out_spatial, desc.Strides, desc.WindowSize, desc.dilations, x.shape[2:], desc.StartPadding, desc.EndPadding)]
    pads = [(0, 0), (0, 0), *zip(desc.StartPadding, ends)]
    values = _window_max(desc, x, pads, out_spatial)
    if getattr(desc, "OutputIndicesTensor", None) is None:
        return values
    windows = _windows(desc, np.pad(x, pads, constant_values=_lowest(x.dtype)), out_spatial)  # [N, C, *out, *window]
    return values, _indices(desc, x, windows, pads)


def _window_max(desc, x: np.ndarray, pads, out_spatial) -> np.ndarray:
    """The window maxima, one ``np.maximum`` per window tap over strided views, in the input's
    memory order (a channels-last input stays channels last: its channels are the contiguous run)."""
    nd = desc.DimensionCount
    order = [0, *range(2, 2 + nd), 1] if x.transpose(0, *range(2, 2 + nd), 1).flags.c_contiguous else list(range(2 + nd))
    padded = np.pad(x.transpose(order), [pads[axis] for axis in order], constant_values=_lowest(x.dtype))
    spatial = [order.index(axis) for axis in range(2, 2 + nd)]
    values: np.ndarray | None = None
    for tap in np.ndindex(*desc.WindowSize):
        index = [slice(None)] * padded.ndim
        for axis, t, d, o, s in zip(spatial, tap, desc.dilations, out_spatial, desc.Strides):
            index[axis] = slice(t * d, t * d + (o - 1) * s + 1, s)
        window = padded[tuple(index)]
        values = window.copy() if values is None else np.maximum(values, window, out=values)
    assert values is not None  # a window has at least one tap: WindowSize is validated positive
    return values.transpose(np.argsort(order))


def _indices(desc, x: np.ndarray, windows: np.ndarray, pads) -> np.ndarray:
    """The flat offset in Input of each window's first maximum, padding never taken."""
    nd = desc.DimensionCount
    out_spatial: tuple[int, ...] = windows.shape[2:2 + nd]
    flat = windows.reshape(*windows.shape[:2 + nd], -1).astype(np.float64 if x.dtype.kind == "f" else np.int64)
    valid = _windows(desc, np.pad(np.ones(x.shape[2:], bool), pads[2:]), out_spatial).reshape(*out_spatial, -1)
    flat = np.where(valid, flat, -np.inf if x.dtype.kind == "f" else np.iinfo(np.int64).min)
    offsets = np.unravel_index(flat.argmax(axis=-1), desc.WindowSize)  # the first maximum, row-major window order
    grid = np.indices(out_spatial, sparse=True)
    coords = [o * s - p0 + offset * d for o, s, p0, offset, d in zip(grid, desc.Strides, desc.StartPadding, offsets, desc.dilations)]
    batch_channels: tuple[int, ...] = x.shape[:2]
    batch, channels = np.indices(batch_channels, sparse=True)
    position = (batch * x.shape[1] + channels).reshape(*batch_channels, *(1,) * nd)
    for size, coord in zip(x.shape[2:], coords):
        position = position * size + coord
    indices = position.astype(desc.OutputIndicesTensor.DataType.numpy())
    return indices.view(np.int64) if indices.dtype == np.uint64 else indices  # the ONNX int64 tensor the EP binds to it


OPERATORS = (
    Operator(desc=DML_MAX_POOLING_OPERATOR_DESC, kernel=max_pooling, exact_value=None, exact_for_any_input=True),
    Operator(desc=DML_MAX_POOLING2_OPERATOR_DESC, kernel=max_pooling, exact_value=None, exact_for_any_input=True),
)
