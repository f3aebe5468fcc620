"""DML_OPERATOR_CONVOLUTION (ONNX Conv and ConvTranspose on float tensors): desc, import, kernel.

The real EP builds Conv, ConvTranspose and the DML EP's own DmlFusedConv and DmlFusedConvTranspose
(an activation folded in: ``passes/dml_fusion.py``) as one CONVOLUTION (DmlOperatorConvolution.cpp):
Mode CROSS_CORRELATION, Direction FORWARD (Conv) or BACKWARD (ConvTranspose). It is where the
quantizer's default output runs its convolutions on DirectML: with int8 activations onnxruntime
makes no QLinearConv for DML nodes (``session.qdqisint8allowed`` is "0" off ARM), so the real EP runs
ELEMENT_WISE_DEQUANTIZE_LINEAR -> a float CONVOLUTION -> ELEMENT_WISE_QUANTIZE_LINEAR.

Import, as DmlOperatorConvolution.cpp and ConvolutionHelperBase do it:
- tensors of 4 or 5 dimensions (2-D and 3-D convolution); a 1-D convolution ([N, C, W]) gets a
  height of 1 between C and W, its strides, dilations and pads padded at the front;
- Conv's filter {OC, C/G, k...}; ConvTranspose's {C, OC/G, k...} (FilterBatchCount the input
  channels), as ONNX lays them out;
- the bias, [OC], as {1, OC, 1, 1[, 1]};
- pads from ``pads`` or ``auto_pad`` (the pooling helper's rules, ``windows.resolve_padding``);
  ConvTranspose's ``output_padding`` sizes the output but reaches DirectML as 0 (the real EP zeroes
  OutputPadding "so that DML just ignores it"): the output's last rows are the transposed
  convolution's values there, the bias alone where it reaches none. A ConvTranspose with
  ``output_shape`` or ``auto_pad`` SAME_* is not modelled (its pads are the DML EP's helper's,
  which dml_ep has not checked against onnxruntime's).

Kernel. DirectML's page gives no summation order or accumulator width, nor does the real EP's
code. dml_ep's choice, in both arithmetics: float32 products summed in float32, in the order of
the host's BLAS (numpy's matmul): the window as im2col rows (channels last, K ordered kernel tap
then input channel) times the filter as a [K, OC/G] matrix per group, then the bias and the
fused activation in float32, rounded once to the output type (float16 tensors computed in float32,
as DirectML does without DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION). A transposed
convolution is the input times the filter, each kernel tap's product added into the output at its
stride (col2im), then cropped by the pads. onnxruntime's CPU EP computes a float Conv with MLAS's
NCHWc or im2col kernels in their own order, which dml_ep does not reproduce: compare puts the
differences down to "float summation order" where the reference lies within a float32 sum's
rounding bound of the exact value (:func:`exact_float`). No exact value: CONVOLUTION does not quantize.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional

import numpy as np

from ..core.enums import DML_CONVOLUTION_DIRECTION
from ..core.enums import DML_CONVOLUTION_MODE
from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import InvalidAttributeError, ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ASSIGNED_TO_DML, ON_DML
from .activation import ActivationDesc, apply_activation, fused_activation, validate_fused_activation
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode
from .windows import int_list, output_sizes, positive, resolve_padding

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_1_0: (4, 5)}  # 3-D tensors (1-D convolution) from later levels; the real EP's descs have 4 or 5
FIELDS = ("InputTensor", "FilterTensor", "BiasTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_CONVOLUTION_OPERATOR_DESC(OperatorDesc):
    """CONVOLUTION: ``FusedActivation(Convolve(Input, Filter) + Bias)``, DML_FEATURE_LEVEL_1_0 and up."""

    InputTensor: TensorDesc
    FilterTensor: TensorDesc
    BiasTensor: TensorDesc | None
    OutputTensor: TensorDesc
    Mode: DML_CONVOLUTION_MODE
    Direction: DML_CONVOLUTION_DIRECTION
    DimensionCount: int
    Strides: tuple[int, ...]
    Dilations: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    OutputPadding: tuple[int, ...]
    GroupCount: int
    FusedActivation: Optional[ActivationDesc] = None

    OPERATOR_TYPE = OP.CONVOLUTION
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({field: (field == "BiasTensor", DIMS) for field in FIELDS}, dict.fromkeys(FIELDS, FLOATS))
    SAME_TYPE = (FIELDS,)

    @property
    def backward(self) -> bool:
        return self.Direction == DML_CONVOLUTION_DIRECTION.BACKWARD

    def validate_shapes(self, feature_level: FL) -> None:
        """DimensionCount spatial dimensions in every tensor; the window fields of that length;
        the groups; the filter's channels; the output's sizes (a backward one may be larger by less
        than a stride, the ONNX output_padding the real EP leaves out of OutputPadding); the bias
        {1, OC, 1, ...}."""
        spatial = self.DimensionCount
        for field in FIELDS:
            tensor = getattr(self, field)
            if tensor is not None and tensor.DimensionCount != spatial + 2:
                self.fail(f"DimensionCount {tensor.DimensionCount} must be DimensionCount + 2 = {spatial + 2}", field)
        for name in ("Strides", "Dilations", "StartPadding", "EndPadding", "OutputPadding"):
            if len(getattr(self, name)) != spatial:
                self.fail(f"has {len(getattr(self, name))} values, DimensionCount is {spatial}", name)
        for name in ("Strides", "Dilations"):
            if 0 in getattr(self, name):
                self.fail(f"{list(getattr(self, name))} must be at least 1", name)
        batch, channels, *in_spatial = self.InputTensor.Sizes
        filter_batch, filter_channels, *kernel = self.FilterTensor.Sizes
        groups = self.GroupCount
        out_channels = filter_channels * groups if self.backward else filter_batch
        in_per_group = filter_batch if self.backward else filter_channels * groups
        if groups < 1 or channels % groups or out_channels % groups:
            self.fail(f"{groups} must divide the {channels} input and {out_channels} output channels", "GroupCount")
        if in_per_group != channels:
            what = "FilterBatchCount" if self.backward else "FilterChannelCount * GroupCount"
            self.fail(f"{what} {in_per_group} must equal the input's {channels} channels", "FilterTensor")
        expected, slack = self.output_spatial(in_spatial, kernel)
        out_batch, out_c, *out_spatial = self.OutputTensor.Sizes
        if (out_batch, out_c) != (batch, out_channels) or not all(e <= o < e + s for e, o, s in zip(expected, out_spatial, slack)):
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be {[batch, out_channels, *expected]}", "OutputTensor")
        if self.BiasTensor is not None and self.BiasTensor.Sizes != (1, out_channels) + (1,) * spatial:
            self.fail(f"sizes {list(self.BiasTensor.Sizes)} must be {[1, out_channels] + [1] * spatial}", "BiasTensor")
        validate_fused_activation(self, feature_level)

    def output_spatial(self, in_spatial, kernel) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The output's spatial sizes by DirectML's formula, and by how much each may exceed it (1:
        not at all; backward: up to the stride or dilation, less one)."""
        if not self.backward:
            try:
                return output_sizes(in_spatial, kernel, self.Strides, self.Dilations, self.StartPadding, self.EndPadding), (1,) * len(kernel)
            except ValueError as exc:
                span, padded = exc.args
                self.fail(f"the dilated filter ({span}) is larger than the padded input ({padded})", "FilterTensor")
        sizes = tuple((i - 1) * s + (k - 1) * d + 1 - p0 - p1 + o for i, k, s, d, p0, p1, o in
                      zip(in_spatial, kernel, self.Strides, self.Dilations, self.StartPadding, self.EndPadding, self.OutputPadding))
        if min(sizes) < 1:
            self.fail(f"the padding leaves an output of {list(sizes)}", "EndPadding")
        return sizes, tuple(max(s, d) for s, d in zip(self.Strides, self.Dilations))


# --- import from ONNX ------------------------------------------------------------------------

X, W, B = 0, 1, 2


def conv(ctx: NodeContext) -> DmlNode:
    """Conv (and DmlFusedConv, its activation as FusedActivation) as a forward CONVOLUTION."""
    return _convolution(ctx, backward=False)


def conv_transpose(ctx: NodeContext) -> DmlNode:
    """ConvTranspose (and DmlFusedConvTranspose) as a backward CONVOLUTION."""
    return _convolution(ctx, backward=True)


def _convolution(ctx: NodeContext, backward: bool) -> DmlNode:
    dtype = ctx.info(X).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"element type {dtype} is not supported by CONVOLUTION (FLOAT32, FLOAT16)", ON_DML)
    x_shape, w_shape = ctx.shape(X), ctx.shape(W)
    rank = len(x_shape)
    if rank not in (3, 4, 5):
        raise Fallback(f"{rank - 2}-D convolution is not supported (DirectML's CONVOLUTION is 1-D to 3-D)", ASSIGNED_TO_DML)
    if len(w_shape) != rank:
        raise ShapeError(f"filter has {len(w_shape)} dimensions, input has {rank}", node=ctx.node, tensor=ctx.input_name(W))
    spatial = rank - 2
    batch, channels, *in_spatial = x_shape
    kernel = list(w_shape[2:])
    if list(ctx.attr("kernel_shape", kernel)) != kernel:
        raise InvalidAttributeError(f"kernel_shape {list(ctx.attr('kernel_shape'))} does not match the filter's {kernel}", node=ctx.node)
    strides, dilations = positive(ctx, "strides", spatial), positive(ctx, "dilations", spatial)
    group = ctx.attr("group", 1)
    filter_in = w_shape[0] if backward else w_shape[1] * group
    out_channels = w_shape[1] * group if backward else w_shape[0]
    if group < 1 or channels % group or out_channels % group:
        raise InvalidAttributeError(f"group {group} must divide the input ({channels}) and output ({out_channels}) channels", node=ctx.node)
    if filter_in != channels:
        raise ShapeError(f"the filter {list(w_shape)} takes {filter_in} input channels, the input has {channels}", node=ctx.node,
                         tensor=ctx.input_name(W))
    start, end, out_spatial = (_backward_sizes if backward else _forward_sizes)(ctx, in_spatial, kernel, strides, dilations)
    pad1 = (1,) * (spatial == 1)  # a 1-D convolution as 2-D: a height of 1 between C and W
    zero1 = (0,) * (spatial == 1)
    bias = _bias(ctx, dtype, out_channels, len(pad1) + spatial)
    desc = DML_CONVOLUTION_OPERATOR_DESC(
        InputTensor=tensor(dtype, (batch, channels, *pad1, *in_spatial)),
        FilterTensor=tensor(dtype, (*w_shape[:2], *pad1, *kernel), owned=ctx.input_name(W) in ctx.constants),
        BiasTensor=bias,
        OutputTensor=tensor(dtype, (batch, out_channels, *pad1, *out_spatial)),
        Mode=DML_CONVOLUTION_MODE.CROSS_CORRELATION,
        Direction=DML_CONVOLUTION_DIRECTION.BACKWARD if backward else DML_CONVOLUTION_DIRECTION.FORWARD,
        DimensionCount=len(pad1) + spatial, Strides=pad1 + tuple(strides), Dilations=pad1 + tuple(dilations),
        StartPadding=zero1 + tuple(start), EndPadding=zero1 + tuple(end), OutputPadding=(0,) * (len(pad1) + spatial), GroupCount=group,
        FusedActivation=fused_activation(ctx) if ctx.attr("fused_activation") else None,
    )
    return ctx.dml_node(desc, ("InputTensor", "FilterTensor", "BiasTensor"), (batch, out_channels, *out_spatial))


def _forward_sizes(ctx: NodeContext, in_spatial: list[int], kernel: list[int], strides: list[int],
                   dilations: list[int]) -> tuple[list[int], list[int], tuple[int, ...]]:
    """Conv's start and end padding, and its output's spatial sizes."""
    start, end = resolve_padding(ctx, in_spatial, kernel, strides, dilations)
    try:
        return start, end, output_sizes(in_spatial, kernel, strides, dilations, start, end)
    except ValueError as exc:
        span, padded = exc.args
        raise ShapeError(f"the (dilated) kernel spans {span} but the padded input is only {padded}", node=ctx.node) from None


def _backward_sizes(ctx: NodeContext, in_spatial: list[int], kernel: list[int], strides: list[int],
                    dilations: list[int]) -> tuple[list[int], list[int], tuple[int, ...]]:
    """ConvTranspose's start and end padding, and its output's spatial sizes (with ``output_padding``)."""
    if ctx.attr("output_shape") or ctx.attr("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        raise Fallback("ConvTranspose with output_shape or auto_pad SAME_* (pads the DML EP's helper derives) is not modelled by dml_ep",
                       ON_DML)
    output_padding = int_list(ctx, "output_padding", [0] * len(in_spatial), len(in_spatial))
    start, end = resolve_padding(ctx, in_spatial, kernel, strides, dilations)
    out_spatial = tuple((i - 1) * s + (k - 1) * d + 1 - p0 - p1 + o
                        for i, k, s, d, p0, p1, o in zip(in_spatial, kernel, strides, dilations, start, end, output_padding))
    if min(out_spatial) < 1:
        raise ShapeError(f"the pads leave an output of {list(out_spatial)}", node=ctx.node)
    return start, end, out_spatial


def _bias(ctx: NodeContext, dtype: np.dtype, out_channels: int, dimensions: int) -> TensorDesc | None:
    """The bias, where given: DirectML's [1, C, 1, ...] of ``dimensions`` spatial dimensions."""
    if not ctx.input_name(B):
        return None
    if ctx.shape(B) != (out_channels,):
        raise ShapeError(f"bias must have shape [{out_channels}], not {list(ctx.shape(B))}", node=ctx.node, tensor=ctx.input_name(B))
    return tensor(dtype, (1, out_channels, *(1,) * dimensions), owned=ctx.input_name(B) in ctx.constants)


# --- kernel ----------------------------------------------------------------------------------


def convolution(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """``FusedActivation(Convolve(Input, Filter) + Bias)`` in float32, rounded once to the output
    type; a 4-D output returned as an NCHW view of channels-last memory (``output_channels_last``)."""
    out = _channels_last(desc, tensors, np.float32, state.derived)
    if desc.FusedActivation is not None:
        out = apply_activation(desc.FusedActivation, out)
    return np.moveaxis(out.astype(desc.OutputTensor.DataType.numpy(), copy=False), -1, 1)


def exact_float(desc, tensors: dict) -> tuple[np.ndarray, np.ndarray, int]:
    """The convolution in float64 (products of float32 or float16 values exact, their sums within
    float64 rounding), its sum of magnitudes, and the most products an output sums: what compare's
    causes hold a reference's float32 convolution against. A fused activation is applied to the
    value (the activations change an error by at most about their slope, 1 or less but for Selu's 1.05)."""
    value = _channels_last(desc, tensors, np.float64, {})
    magnitude = _channels_last(desc, tensors, np.float64, {}, magnitudes=True)
    if desc.FusedActivation is not None:
        value = apply_activation(desc.FusedActivation, value.astype(np.float32)).astype(np.float64)  # the activation of the float32 value
    products = int(np.prod(desc.FilterTensor.Sizes[1:])) if not desc.backward else \
        int(np.prod(desc.FilterTensor.Sizes[2:])) * desc.InputTensor.Sizes[1] // desc.GroupCount
    return np.moveaxis(value, -1, 1), np.moveaxis(magnitude, -1, 1), products + 1  # + 1: the bias


def _channels_last(desc, tensors: dict, dtype, cache: dict, magnitudes: bool = False) -> np.ndarray:
    """The convolution plus the bias, channels last ([N, *spatial, OC]), in ``dtype``; of the
    magnitudes of the operands with ``magnitudes`` (compare's rounding bound)."""
    x = view(tensors["InputTensor"], desc.InputTensor).astype(dtype, copy=False)
    x = np.moveaxis(np.abs(x) if magnitudes else x, 1, -1)
    weights = _filter(desc, tensors, dtype, cache, magnitudes)
    out = _backward(desc, x, weights) if desc.backward else _forward(desc, x, weights)
    if desc.BiasTensor is not None:
        bias = view(tensors["BiasTensor"], desc.BiasTensor).reshape(-1).astype(dtype)
        out += np.abs(bias) if magnitudes else bias
    return out


def _filter(desc, tensors: dict, dtype, cache: dict, magnitudes: bool) -> np.ndarray:
    """The filter as one GEMM operand per group: forward [G, taps * C/G, OC/G] (K ordered kernel tap,
    then input channel, as the im2col rows); backward [G, C/G, taps * OC/G]. Made once per buffer
    (a constant filter's, or the output the executor keeps of a DequantizeLinear of constants) and type."""
    buffer = tensors["FilterTensor"]
    key = ("filter", np.dtype(dtype).str, magnitudes, id(buffer))  # the nodes of one signature share ``cache``, each its own filter
    made = cache.get(key)
    if made is not None and made[0] is buffer:
        return made[1]
    w = view(buffer, desc.FilterTensor).astype(dtype)
    w = np.abs(w) if magnitudes else w
    groups = desc.GroupCount
    first, second = w.shape[:2]
    taps = int(np.prod(w.shape[2:]))
    if desc.backward:  # {C, OC/G, k...} -> [G, C/G, taps, OC/G]
        matrix = w.reshape(groups, first // groups, second, taps).transpose(0, 1, 3, 2).reshape(groups, first // groups, taps * second)
    else:  # {OC, C/G, k...} -> [G, taps, C/G, OC/G]
        matrix = w.reshape(groups, first // groups, second, taps).transpose(0, 3, 2, 1).reshape(groups, taps * second, first // groups)
    matrix = np.ascontiguousarray(matrix)
    cache[key] = (buffer, matrix)
    return matrix


def _forward(desc, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """im2col rows of ``x`` ([N, *spatial, C]) times the filter, per group: [N, *out, OC]. A
    depthwise convolution (one input channel per group) is a multiply-add per kernel tap instead,
    in tap order: the same sum, without a matrix product per channel."""
    groups, k, per_group = weights.shape
    kernel = desc.FilterTensor.Sizes[2:]
    taps = int(np.prod(kernel))
    out_spatial = desc.OutputTensor.Sizes[2:]
    windows = _windows(x, desc, kernel, out_spatial)
    if k == taps and groups > 1:
        out = np.zeros((x.shape[0], *out_spatial, groups, per_group), x.dtype)
        for tap, at in enumerate(itertools.product(*(range(size) for size in kernel))):
            out += windows[(slice(None),) * (1 + len(kernel)) + at][..., None] * weights[:, tap, :]
        return out.reshape(x.shape[0], *out_spatial, groups * per_group)
    columns = windows.reshape(-1, taps, groups, k // taps)
    if groups == 1:
        out = columns.reshape(-1, k) @ weights[0]
    else:
        out = np.matmul(columns.transpose(2, 0, 1, 3).reshape(groups, -1, k), weights).transpose(1, 0, 2)
    return np.ascontiguousarray(out).reshape(x.shape[0], *out_spatial, groups * per_group)


def _windows(x: np.ndarray, desc, kernel, out_spatial) -> np.ndarray:
    """[N, *out, *kernel, C]: the input each window position reads, padding reading 0: a strided
    view of the input, bordered with its pads where they are at most the dilated kernel's span (a
    real model's); else gathered from it with one zero appended along each spatial axis, which every
    position in the padding reads (the padded input itself is never made, whatever the pads)."""
    spatial = len(kernel)
    sizes = x.shape[1:-1]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, desc.Dilations)]
    if all(p0 <= span and p1 <= span for p0, p1, span in zip(desc.StartPadding, desc.EndPadding, spans)):
        if any(desc.StartPadding + desc.EndPadding):
            padded = np.zeros((x.shape[0], *(s + p0 + p1 for s, p0, p1 in zip(sizes, desc.StartPadding, desc.EndPadding)), x.shape[-1]), x.dtype)
            padded[(slice(None),) + tuple(slice(p0, p0 + s) for s, p0 in zip(sizes, desc.StartPadding))] = x
            x = padded
        x = np.ascontiguousarray(x)
        step = x.strides
        shape = (x.shape[0], *out_spatial, *kernel, x.shape[-1])
        strides = (step[0], *(step[1 + i] * desc.Strides[i] for i in range(spatial)),
                   *(step[1 + i] * desc.Dilations[i] for i in range(spatial)), step[-1])
        return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)
    bordered = np.zeros((x.shape[0], *(s + 1 for s in sizes), x.shape[-1]), x.dtype)
    bordered[(slice(None),) + tuple(slice(0, s) for s in sizes)] = x
    index: tuple = (slice(None),)
    for axis in range(spatial):
        reads = _reads(out_spatial[axis], kernel[axis], desc.Strides[axis], desc.Dilations[axis], desc.StartPadding[axis], sizes[axis])
        broadcast = [1] * (2 * spatial)
        broadcast[axis], broadcast[spatial + axis] = reads.shape
        index += (reads.reshape(broadcast),)
    return bordered[index]


def _reads(outputs: int, taps: int, stride: int, dilation: int, start: int, size: int) -> np.ndarray:
    """[outputs, taps]: the input index each window position reads along one axis; ``size`` (the
    appended zero) where it reads the padding."""
    index = np.arange(outputs, dtype=np.int64)[:, None] * stride + np.arange(taps, dtype=np.int64) * dilation - start
    return np.where((index >= 0) & (index < size), index, size)


def _backward(desc, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The transposed convolution of ``x`` ([N, *spatial, C]): each input position's product with
    the filter added into the output at its stride, tap by tap (col2im), then cropped by the pads."""
    groups, per_group, k = weights.shape
    kernel = desc.FilterTensor.Sizes[2:]
    taps = int(np.prod(kernel))
    out_per_group = k // taps
    batch, *in_spatial, channels = x.shape
    rows = x.reshape(-1, groups, per_group).transpose(1, 0, 2)
    products = np.matmul(rows, weights).reshape(groups, batch, *in_spatial, taps, out_per_group)
    products = np.moveaxis(products, 0, -2).reshape(batch, *in_spatial, taps, groups * out_per_group)
    out_spatial = desc.OutputTensor.Sizes[2:]
    full = [max((i - 1) * s + (kk - 1) * d + 1, p + o) for i, kk, s, d, p, o in
            zip(in_spatial, kernel, desc.Strides, desc.Dilations, desc.StartPadding, out_spatial)]
    out = np.zeros((batch, *full, groups * out_per_group), x.dtype)
    for tap, offsets in enumerate(itertools.product(*(range(kk) for kk in kernel))):
        at = tuple(slice(o * d, o * d + (i - 1) * s + 1, s) for o, d, i, s in zip(offsets, desc.Dilations, in_spatial, desc.Strides))
        out[(slice(None),) + at] += products[(slice(None),) * (1 + len(kernel)) + (tap,)]
    return np.ascontiguousarray(out[(slice(None),) + tuple(slice(p, p + o) for p, o in zip(desc.StartPadding, out_spatial))])


OPERATORS = (Operator(desc=DML_CONVOLUTION_OPERATOR_DESC, kernel=convolution, exact_value=None, exact_float=exact_float, output_channels_last=True),)
