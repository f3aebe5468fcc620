"""DML_OPERATOR_QUANTIZED_LINEAR_AVERAGE_POOLING (com.microsoft QLinearAveragePool and
QLinearGlobalAveragePool): desc, import, kernel, exact value.

Import, as DmlOperatorQLinearAveragePooling.cpp does it:

- X, x_scale, x_zero_point, y_scale, y_zero_point bind to DirectML's fields in the same order;
  the schema's scales and zero points are scalars, {1,1,1,1} (or {1,1,1,1,1} beside a 5-D input).
- The tensors are right-aligned to at least 4 dimensions (DmlOperator::Initialize), so a 1-D
  pooling input [N, C, W] becomes {1, N, C, W}, and the kernel arguments are shifted so that
  DimensionCount is the dimension count - 2: window {1, k}, strides {1, s}, padding {0, p}.
- ``channels_last=1``: the dimensions are permuted so that C comes second (NHWC -> {N, C, H, W}
  read through NHWC strides); the output likewise, so the output buffer is NHWC.
- ``count_include_pad`` is IncludePadding; QLinearGlobalAveragePool is the same operator with the
  window the whole image, strides 1 and no padding.
- ``ceil_mode`` only changes the output size the EP computes (OperatorHelper.cpp's
  InitializeKernelOutputDimensions); DirectML's desc has no ceiling field, so the output is one
  larger than the documented size formula where the division has a remainder. DirectML does not
  document that case; dml_ep accepts it and reads the windows past the end padding as padding.
  Where that last window would start past the input (and its start padding), onnxruntime's shape
  drops it and the DML EP's keeps it: such a node falls back (the real EP runs it, with an output
  shape onnxruntime's CPU EP does not give).

Kernel. DirectML: ``Output = Quantize(AveragePool(Dequantize(Input)))``; ``"directml"`` evaluates
``round(sum(x - zx) * sx / (count * sy))`` correctly rounded (float64 estimate, exact integers near
a half-integer). ``count`` is the window's elements inside the input, or with IncludePadding the
whole window (also where it runs past the end padding: undocumented, taken as onnxruntime does).
A window with no element inside the input (ceil mode, IncludePadding false) averages to 0.

``"onnxruntime"`` follows onnxruntime's CPU kernels (contrib_ops/cpu/quantization/qlinear_pool.cc
and qlinear_global_average_pool.cc with MLAS's qlgavgpool.cpp), which take two different routes:

- pooling: every input element dequantized in float32, ``sx * float(x - zx)``; each window summed
  in float32 in row-major tap order, divided by ``float(count)``; then ``nearbyintf(y / sy + zy)``
  (float32 division and addition, ties to even), converted to int32 (NaN and values beyond int32
  give INT_MIN, as cvttss2si does) and clamped.
- global (QLinearGlobalAveragePool, and a QLinearAveragePool whose kernel is the whole image with
  no padding): MLAS's exact int32 ``acc = sum(x) - zx * N``, then ``float(acc) * scale`` with the
  float32 ``scale = sx / (sy * float(N))``, clamped to ``[Min - zy, Max - zy]``, rounded half to
  even, plus ``zy``. (MLAS refuses scales outside [2^-32, 256) and images of 2^24 elements or
  more; dml_ep computes them all the same.)

Both round the float32 value, not the exact one, so they differ from DirectML's definition by one
step where the exact value lies within their float32 error of a half-integer, exact ties included
(tests/operators/test_quantized_linear_average_pooling.py pins such cases). Which route onnxruntime takes depends on the ONNX
node (a 1-D node's desc has a leading dummy dimension), so the importer notes it in the node's
``imported``; without it (a desc from elsewhere) the global route is taken when every window is the whole
image with no padding.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import InvalidAttributeError, ShapeError
from ..core.tensor_desc import left_pad, packed_strides, view
from ..numerics.kernels import quantize
from ..numerics.kernels.parameters import checked_scale, scalar
from ..realep.placement import ASSIGNED_TO_DML, ON_DML
from .base import FLOAT32, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, check_scale, check_zero_point, output_type, quantized_type, tensor
from .kernel_state import KernelState
from .nodes import DmlNode, Imported
from .windows import int_list, output_sizes

# --- desc ------------------------------------------------------------------------------------

FIELDS = ("InputTensor", "InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor", "OutputTensor")
WINDOW_FIELDS = ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations")


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZED_LINEAR_AVERAGE_POOLING_OPERATOR_DESC(OperatorDesc):
    """QUANTIZED_LINEAR_AVERAGE_POOLING (com.microsoft QLinearAveragePool, QLinearGlobalAveragePool),
    DML_FEATURE_LEVEL_6_2 and up. IncludePadding is a BOOL (0 or 1)."""

    InputTensor: TensorDesc
    InputScaleTensor: TensorDesc
    InputZeroPointTensor: TensorDesc | None
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    WindowSize: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    Dilations: tuple[int, ...]
    IncludePadding: int

    OPERATOR_TYPE = OP.QUANTIZED_LINEAR_AVERAGE_POOLING
    INTRODUCED = FL.FL_6_2
    TENSOR_RULES = rules(
        {
            "InputTensor": (False, {FL.FL_6_2: (4, 5)}),
            "InputScaleTensor": (False, {FL.FL_6_2: (1, 5)}),
            "InputZeroPointTensor": (True, {FL.FL_6_2: (1, 5)}),
            "OutputScaleTensor": (False, {FL.FL_6_2: (1, 5)}),
            "OutputZeroPointTensor": (True, {FL.FL_6_2: (1, 5)}),
            "OutputTensor": (False, {FL.FL_6_2: (4, 5)}),
        },
        {field: (FLOAT32 if "Scale" in field else QUANTIZED) for field in FIELDS},
    )
    SAME_TYPE = (("InputTensor", "InputZeroPointTensor"), ("OutputTensor", "OutputZeroPointTensor"))

    def validate_shapes(self, feature_level: FL) -> None:
        dims = self.InputTensor.DimensionCount
        if self.OutputTensor.DimensionCount != dims:
            self.fail(f"DimensionCount {self.OutputTensor.DimensionCount} must equal InputTensor's {dims}", "OutputTensor")
        if self.DimensionCount != dims - 2:
            self.fail(f"{self.DimensionCount} must be InputTensor's DimensionCount - 2 = {dims - 2}", "DimensionCount")
        for name in WINDOW_FIELDS:
            values = getattr(self, name)
            if len(values) != self.DimensionCount:
                self.fail(f"has {len(values)} values, DimensionCount is {self.DimensionCount}", name)
            if 0 in values and not name.endswith("Padding"):  # a negative value breaks the UINT rule first
                self.fail(f"{list(values)} must be at least 1", name)
        if self.IncludePadding not in (0, 1):
            self.fail(f"{self.IncludePadding} is not a BOOL (0 or 1)", "IncludePadding")
        batch, channels, *in_spatial = self.InputTensor.Sizes
        channels_only = (1, channels) + (1,) * (dims - 2)
        for field in FIELDS[1:5]:
            tensor = getattr(self, field)
            if tensor is not None and left_pad(tensor.Sizes, dims) not in ((1,) * dims, channels_only):
                self.fail(f"sizes {list(tensor.Sizes)} must hold 1 element or one per channel {list(channels_only)}", field)
        args = (in_spatial, self.WindowSize, self.Strides, self.Dilations, self.StartPadding, self.EndPadding)
        try:
            floor = output_sizes(*args)
        except ValueError as exc:
            span, padded = exc.args
            self.fail(f"the window ({span}) is larger than the padded input ({padded})", "WindowSize")
        allowed = {(batch, channels, *floor), (batch, channels, *output_sizes(*args, ceil=True))}
        if tuple(self.OutputTensor.Sizes) not in allowed:
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be {list(min(allowed))}"
                      + (f" (or {list(max(allowed))}, the DML EP's ceil_mode)" if len(allowed) > 1 else ""), "OutputTensor")


# --- import from ONNX ------------------------------------------------------------------------

X, X_SCALE, X_ZP, Y_SCALE, Y_ZP = range(5)
GLOBAL, POOL = "global", "pool"  # onnxruntime's routes (see the module docstring), as the importer notes them (Imported.onnxruntime)


def qlinear_average_pool(ctx: NodeContext) -> DmlNode:
    """com.microsoft QLinearAveragePool (nhwc_schema_defs.cc): auto_pad, ceil_mode, channels_last,
    count_include_pad, kernel_shape, pads, strides."""
    return _import(ctx, global_pooling=False)


def qlinear_global_average_pool(ctx: NodeContext) -> DmlNode:
    """com.microsoft QLinearGlobalAveragePool: channels_last."""
    return _import(ctx, global_pooling=True)


def _window(ctx: NodeContext, spatial: tuple[int, ...]) -> tuple[list, list, list, list, bool]:
    """kernel_shape, strides, start and end padding and ceil_mode of a QLinearAveragePool node,
    auto_pad resolved as onnxruntime's PoolAttributes (and the DML EP's KernelArgs) resolve it."""
    rank = len(spatial)
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise InvalidAttributeError("kernel_shape is required", node=ctx.node)
    kernel = int_list(ctx, "kernel_shape", [], rank)
    strides = int_list(ctx, "strides", [1] * rank, rank)
    pads = int_list(ctx, "pads", [0] * 2 * rank, 2 * rank)
    if any(k < 1 for k in kernel) or any(s < 1 for s in strides):
        raise InvalidAttributeError(f"kernel_shape {kernel} and strides {strides} must be positive", node=ctx.node)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        start, end = [0] * rank, [0] * rank
        if auto_pad != "VALID":
            for i, (size, k, s) in enumerate(zip(spatial, kernel, strides)):
                needed = max(0, (math.ceil(size / s) - 1) * s + k - size)
                start[i] = needed // 2 if auto_pad == "SAME_UPPER" else (needed + 1) // 2
                end[i] = needed - start[i]
    elif auto_pad == "NOTSET":
        start, end = pads[:rank], pads[rank:]
    else:
        raise InvalidAttributeError(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", node=ctx.node)
    if any(p < 0 for p in start + end):
        raise InvalidAttributeError(f"pads {start + end} must not be negative", node=ctx.node)
    if any(p >= k for p, k in zip(start, kernel)) or any(p >= k for p, k in zip(end, kernel)):
        raise InvalidAttributeError(f"pads {start + end} must be smaller than kernel_shape {kernel} (onnxruntime's PoolAttributes)",
                                    node=ctx.node)
    return kernel, strides, start, end, bool(ctx.attr("ceil_mode", 0))


def _import(ctx: NodeContext, global_pooling: bool) -> DmlNode:
    x_type = quantized_type(ctx, X, "input")
    shape = ctx.shape(X)
    rank = len(shape)
    if rank < 3:
        raise ShapeError(f"input has {rank} dimensions; pooling needs at least 3 ([N, C, D1, ...])", node=ctx.node, tensor=ctx.input_name(X))
    if rank > 5:
        raise Fallback(f"{rank - 2}-D pooling is not supported (DirectML pools 1 to 3 spatial dimensions)", ASSIGNED_TO_DML)
    channels_last = bool(ctx.attr("channels_last", 0))
    nchw = (shape[0], shape[-1], *shape[1:-1]) if channels_last else shape
    spatial = nchw[2:]
    if global_pooling:
        kernel, strides, start, end, ceiling = list(spatial), [1] * len(spatial), [0] * len(spatial), [0] * len(spatial), False
    else:
        kernel, strides, start, end, ceiling = _window(ctx, spatial)
    try:
        out_spatial = output_sizes(spatial, kernel, strides, [1] * len(spatial), start, end, ceiling)
    except ValueError as exc:
        span, padded = exc.args  # onnxruntime's size formula truncates toward zero (one output); DirectML's is negative here
        raise Fallback(f"the kernel spans {span} but the padded input is only {padded}: DirectML's output size would be below 1",
                       "the real EP assigns it to DirectML, whose behaviour for it is undocumented") from None
    past = [i for i, (out, size, s, p0) in enumerate(zip(out_spatial, spatial, strides, start)) if (out - 1) * s >= size + p0]
    if ceiling and past:  # onnxruntime (and ONNX) drop a last window that starts past the input; the DML EP keeps it
        raise Fallback(f"ceil_mode makes a last window start past the input on spatial axis {past[0]}: the DML EP's output is one "
                       "larger there than onnxruntime's, and DirectML's value for it is undocumented", ON_DML)

    check_scale(ctx, X_SCALE, ctx.parameter(X_SCALE))
    check_scale(ctx, Y_SCALE, ctx.parameter(Y_SCALE))
    check_zero_point(ctx, X_ZP, ctx.parameter(X_ZP), x_type)
    y_type = output_type(ctx)
    check_zero_point(ctx, Y_ZP, ctx.parameter(Y_ZP), y_type)

    out_nchw = (*nchw[:2], *out_spatial)
    output_shape = (out_nchw[0], *out_spatial, out_nchw[1]) if channels_last else out_nchw
    dims = max(4, rank)
    shift = dims - rank  # 1-D pooling: a leading 1, and the kernel arguments shifted (one more pooled dimension)

    def placed(dtype, onnx_shape):
        """A tensor right-aligned to ``dims``, its channel moved second when it lies last."""
        sizes = left_pad(onnx_shape, dims)
        if not channels_last:
            return tensor(dtype, sizes)
        order = [0, dims - 1, *range(1, dims - 1)]
        strides = packed_strides(sizes)
        return tensor(dtype, [sizes[i] for i in order], [strides[i] for i in order])

    ones = (1,) * dims
    desc = DML_QUANTIZED_LINEAR_AVERAGE_POOLING_OPERATOR_DESC(
        InputTensor=placed(x_type, shape),
        InputScaleTensor=tensor(np.float32, ones),
        InputZeroPointTensor=tensor(x_type, ones) if ctx.input_name(X_ZP) else None,
        OutputScaleTensor=tensor(np.float32, ones),
        OutputZeroPointTensor=tensor(y_type, ones) if ctx.input_name(Y_ZP) else None,
        OutputTensor=placed(y_type, output_shape),
        DimensionCount=dims - 2,
        Strides=(1,) * shift + tuple(strides),
        WindowSize=(1,) * shift + tuple(kernel),
        StartPadding=(0,) * shift + tuple(start),
        EndPadding=(0,) * shift + tuple(end),
        Dilations=(1,) * (dims - 2),
        IncludePadding=int(bool(ctx.attr("count_include_pad", 0))) if not global_pooling else 0,
    )
    entry = ctx.dml_node(desc, FIELDS[:5], output_shape)
    whole_image = list(kernel) == list(spatial) and not any(start) and not any(end)
    entry.imported = Imported(GLOBAL if global_pooling or whole_image else POOL)
    return entry


# --- kernel ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Windows:
    """The pooling windows of a desc over its last DimensionCount dimensions: each tap's slice of
    the padded input, and the element count each output averages over."""

    pad_width: tuple
    taps: tuple  # per tap, in row-major tap order, the slices selecting it for every output
    count: np.ndarray  # broadcastable to the output's logical sizes, at least 1 element
    whole: int = 0  # the number of spatial dimensions when one window covers the unpadded input (global pooling), else 0

    @staticmethod
    def of(desc) -> "Windows":
        dims = desc.DimensionCount
        in_spatial = desc.InputTensor.Sizes[-dims:]
        out_spatial = desc.OutputTensor.Sizes[-dims:]
        pad_width, per_dim_taps, counts = [(0, 0)] * (len(desc.InputTensor.Sizes) - dims), [], []
        for size, out, k, s, d, p0 in zip(in_spatial, out_spatial, desc.WindowSize, desc.Strides, desc.Dilations, desc.StartPadding):
            reach = (out - 1) * s + (k - 1) * d + 1  # the padded extent the windows read
            pad_width.append((p0, max(0, reach - p0 - size)))
            per_dim_taps.append([slice(j * d, j * d + (out - 1) * s + 1, s) for j in range(k)])
            positions = np.arange(out)[:, None] * s - p0 + np.arange(k)[None, :] * d
            inside = np.count_nonzero((positions >= 0) & (positions < size), axis=1)
            counts.append(np.full(out, k) if desc.IncludePadding else inside)
        count = np.ones((), dtype=np.int64)
        for per_dim in counts:
            count = np.multiply.outer(count, per_dim)
        count = count.reshape((1,) * (len(desc.OutputTensor.Sizes) - dims) + count.shape)
        lead = (slice(None),) * (len(desc.InputTensor.Sizes) - dims)
        taps = tuple(lead + combo for combo in itertools.product(*per_dim_taps))
        whole = tuple(desc.WindowSize) == tuple(in_spatial) and set(out_spatial) == {1} and not any(w for pair in pad_width for w in pair)
        return Windows(tuple(pad_width), taps, count, dims if whole else 0)

    def sums(self, values: np.ndarray, dtype) -> np.ndarray:
        """Each window's sum of ``values`` (padding reads 0), tap by tap in row-major order in ``dtype``;
        an integer sum over one whole-input window in one reduction (its order cannot matter)."""
        if self.whole and np.dtype(dtype).kind in "iu":
            return values.sum(axis=tuple(range(values.ndim - self.whole, values.ndim)), dtype=dtype, keepdims=True)
        padded = np.pad(values.astype(dtype, copy=False), self.pad_width)
        total = np.zeros(padded[self.taps[0]].shape, dtype=dtype)
        for tap in self.taps:
            total += padded[tap]
        return total


def _windows(desc, state: KernelState) -> Windows:
    made = state.derived.get("windows")
    if made is None or made[0] is not desc:
        made = state.derived["windows"] = (desc, Windows.of(desc))
    return made[1]


def _parameters(desc, tensors: dict) -> tuple:
    sx, sy = (np.float32(scalar(tensors, desc, f)) for f in ("InputScaleTensor", "OutputScaleTensor"))
    for field, scale in (("InputScaleTensor", sx), ("OutputScaleTensor", sy)):
        checked_scale(scale, tensor=field)
    zx, zy = (int(scalar(tensors, desc, f)) for f in ("InputZeroPointTensor", "OutputZeroPointTensor"))
    return sx, zx, sy, zy


def to_buffer(values: np.ndarray, desc) -> np.ndarray:
    """``values`` (of the desc's sizes) written through the desc's strides: the buffer whose
    row-major elements are the tensor's memory (NHWC for a channels-last output)."""
    if desc.Strides is None:
        return values
    buffer = np.zeros(desc.elements_spanned, dtype=values.dtype)
    as_strided(buffer, shape=desc.Sizes, strides=tuple(s * buffer.itemsize for s in desc.element_strides))[...] = values
    return buffer


def global_route(desc, state: KernelState) -> bool:
    """Whether onnxruntime computes this node with MLAS's global average pool (module docstring)."""
    route = state.imported.onnxruntime
    if route is not None:
        return route == GLOBAL
    dims = desc.DimensionCount
    return tuple(desc.WindowSize) == tuple(desc.InputTensor.Sizes[-dims:]) and not any(desc.StartPadding) and not any(desc.EndPadding)


def quantized_linear_average_pooling(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    x = view(tensors["InputTensor"], desc.InputTensor)
    sx, zx, sy, zy = _parameters(desc, tensors)
    windows = _windows(desc, state)
    out_dtype = desc.OutputTensor.DataType.numpy()
    if not arithmetic.onnxruntime:
        result = _directml(windows.sums(x.astype(np.int64) - zx, np.int64), windows.count, sx, sy, zy, out_dtype)
    elif global_route(desc, state):
        acc = windows.sums(x, np.int64) - zx * windows.count  # MLAS's int32 sum, biased by -zx * N
        with np.errstate(over="ignore", divide="ignore"):
            scale = sx / (sy * np.float32(windows.count.reshape(-1)[0]))
        result = quantize.requantize_onnxruntime(acc.astype(np.float32), scale, zy, out_dtype)
    else:
        result = _onnxruntime_pool(x, windows, sx, zx, sy, zy, out_dtype)
    return to_buffer(result, desc.OutputTensor)


def _onnxruntime_pool(x, windows: Windows, sx, zx, sy, zy, out_dtype) -> np.ndarray:
    """qlinear_pool.cc in float32: dequantize, sum the window in tap order, divide, quantize_value."""
    dequantized = sx * (x.astype(np.int32) - np.int32(zx)).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        y = windows.sums(dequantized, np.float32) / windows.count.astype(np.float32)
        q = y / sy + np.float32(zy)
    rounded = np.rint(q.astype(np.float64))
    lo, hi = quantize.quant_range(out_dtype)
    rounded[~((rounded >= -(2.0**31)) & (rounded < 2.0**31))] = lo  # cvttss2si: INT_MIN for NaN and beyond int32
    return np.clip(rounded, lo, hi).astype(out_dtype)


def _directml(sums: np.ndarray, count: np.ndarray, sx, sy, zy, out_dtype) -> np.ndarray:
    """``round(sums * sx / (count * sy))`` correctly rounded, saturated after ``zy``; an empty window gives 0."""
    count = np.broadcast_to(np.maximum(count, 1), sums.shape)
    estimate = sums * (float(sx) / float(sy)) / count
    (px, qx), (py, qy) = quantize.ratio(sx), quantize.ratio(sy)

    def compare_with_half(index, twice_half):
        where = np.unravel_index(index, estimate.shape)
        exact_sum, exact_count = quantize.to_object(sums[where]), quantize.to_object(count[where])
        # (2 * value - twice_half) times count * qx * py, with value = sum * px * qy / (qx * count * py)
        return 2 * exact_sum * px * qy - twice_half * exact_count * qx * py

    return quantize.saturate(quantize.round_half_even_exact(estimate, compare_with_half), zy, out_dtype)


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``sum(x - zx) * sx / (count * sy)`` per output element, in the output buffer's order."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    zx = int(scalar(tensors, desc, "InputZeroPointTensor"))
    windows = Windows.of(desc)
    sums = windows.sums(x.astype(np.int64) - zx, np.int64)
    count = np.broadcast_to(np.maximum(windows.count, 1), sums.shape)
    buffer_sums, buffer_count = to_buffer(sums, desc.OutputTensor), to_buffer(np.ascontiguousarray(count), desc.OutputTensor)
    output_scale = buffer_count.astype(np.float64) * scalar(tensors, desc, "OutputScaleTensor")  # exact: a float32 times an integer < 2^29
    return [(buffer_sums, scalar(tensors, desc, "InputScaleTensor"))], output_scale


OPERATORS = (
    Operator(desc=DML_QUANTIZED_LINEAR_AVERAGE_POOLING_OPERATOR_DESC, kernel=quantized_linear_average_pooling, exact_value=exact_value),
)
