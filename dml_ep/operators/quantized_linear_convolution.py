"""DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION (ONNX QLinearConv): desc, import, kernel, exact value.

Import, as DmlOperatorQLinearConv.cpp does it:

- 2-D convolution on 4-D tensors; a 1-D convolution ([N, C, W]) becomes 2-D with a height of 1:
  the DML EP inserts the 1 between C and W and pads 1-D strides/dilations/pads at the front.
- Filter scale/zero point per tensor {1,1,1,1} or per output channel {1,OC,1,1}; bias {1,OC,1,1}.
- auto_pad SAME_UPPER/SAME_LOWER/VALID resolve to explicit start/end padding (ConvolutionHelper).

Kernel. DirectML: ``Output = Quantize(Convolve(Dequantize(Input), Dequantize(Filter)) + Bias * InputScale *
FilterScale, OutputScale, OutputZeroPoint)``; since the bias is int32 in units of
``InputScale * FilterScale``, this is ``round((acc + Bias) * InputScale * FilterScale / OutputScale)``
with ``acc = sum((x - zx) * (w - zw))`` over the window, padding reading as the input zero point.

The integer core computes ``acc`` exactly, channels last: im2col of the input codes in NHWC order
(``dml_ep.numerics.kernels.im2col``), times the filter as a [KH*KW*C/G, OC/G] matrix per group, on the
session's integer engine (``dml_ep.numerics.engines``). The filter is prepared once per engine. Then the
shared requantize step (``kernels.quantized_product``). The output is written channels last and
returned as an NCHW view of that memory: a DirectML tensor is sizes plus strides, so the next
convolution reads it without a transpose.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_FLAGS
from ..core.errors import InvalidAttributeError, ShapeError
from ..numerics.kernels import compiled as native
from ..numerics.kernels import u8s8
from ..numerics.kernels.im2col import im2col
from ..numerics.kernels.parameters import parameter4d, read4d, scalar
from ..numerics.kernels.quantized_product import PreparedQuantizedProduct
from ..realep.placement import ASSIGNED_TO_DML
from .base import FLOAT32, INT32, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, check_scale, check_zero_point, optional_parameter, output_type, placed_parameter, quantized_type, tensor
from .nodes import DmlNode
from .windows import output_sizes, positive, resolve_padding

# --- desc ------------------------------------------------------------------------------------


def validate_convolution(desc, same_dims: tuple[str, ...]) -> int:
    """The size rules a convolution desc shares (QUANTIZED_LINEAR_CONVOLUTION, CONVOLUTION_INTEGER):
    DimensionCount 2, the window fields, ``same_dims`` with InputTensor's DimensionCount, the
    groups and the output sizes. Returns the output channel count."""
    if desc.DimensionCount != 2:
        desc.fail(f"{desc.DimensionCount} is not supported (only 2 spatial dimensions)", "DimensionCount")
    for name in ("Strides", "Dilations", "StartPadding", "EndPadding"):
        values = getattr(desc, name)
        if len(values) != desc.DimensionCount:
            desc.fail(f"has {len(values)} values, DimensionCount is {desc.DimensionCount}", name)
        if 0 in values and not name.endswith("Padding"):  # a negative value breaks the UINT rule first
            desc.fail(f"{list(values)} must be at least 1", name)
    dims = desc.InputTensor.DimensionCount
    for field in same_dims:
        tensor = getattr(desc, field)
        if tensor is not None and tensor.DimensionCount != dims:
            desc.fail(f"DimensionCount {tensor.DimensionCount} must equal InputTensor's {dims}", field)
    batch, channels, *in_spatial = desc.sizes4("InputTensor")
    out_channels, filter_channels, *kernel = desc.sizes4("FilterTensor")
    groups = desc.GroupCount
    if groups < 1 or channels % groups or out_channels % groups:
        desc.fail(f"{groups} must divide the {channels} input and {out_channels} output channels", "GroupCount")
    if filter_channels * groups != channels:
        desc.fail(
            f"FilterChannelCount {filter_channels} must be input channels / GroupCount = {channels // groups}",
            "FilterTensor",
        )
    try:
        out_spatial = output_sizes(in_spatial, kernel, desc.Strides, desc.Dilations, desc.StartPadding, desc.EndPadding)
    except ValueError as exc:
        span, padded = exc.args
        desc.fail(f"the dilated filter ({span}) is larger than the padded input ({padded})", "FilterTensor")
    expected = (batch, out_channels, *out_spatial)
    if desc.sizes4("OutputTensor") != expected:
        desc.fail(f"sizes {list(desc.OutputTensor.Sizes)} must be {list(expected)}", "OutputTensor")
    return out_channels


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC(OperatorDesc):
    """QUANTIZED_LINEAR_CONVOLUTION (ONNX QLinearConv), DML_FEATURE_LEVEL_2_1 and up."""

    InputTensor: TensorDesc
    InputScaleTensor: TensorDesc
    InputZeroPointTensor: TensorDesc | None
    FilterTensor: TensorDesc
    FilterScaleTensor: TensorDesc
    FilterZeroPointTensor: TensorDesc | None
    BiasTensor: TensorDesc | None
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    Dilations: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    GroupCount: int

    OPERATOR_TYPE = OP.QUANTIZED_LINEAR_CONVOLUTION
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = rules(
        {
            "InputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "InputScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "InputZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "FilterTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "FilterScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4), FL.FL_5_2: (1, 4)}),
            "FilterZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "BiasTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "OutputScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "OutputZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "OutputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
        },
        {
            "InputTensor": QUANTIZED,
            "InputScaleTensor": FLOAT32,
            "InputZeroPointTensor": QUANTIZED,
            "FilterTensor": QUANTIZED,
            "FilterScaleTensor": FLOAT32,
            "FilterZeroPointTensor": QUANTIZED,
            "BiasTensor": INT32,
            "OutputScaleTensor": FLOAT32,
            "OutputZeroPointTensor": QUANTIZED,
            "OutputTensor": QUANTIZED,
        },
    )
    SAME_TYPE = (
        ("OutputTensor", "OutputZeroPointTensor"),
        ("InputTensor", "InputZeroPointTensor"),
        ("FilterTensor", "FilterZeroPointTensor"),
    )

    def validate_shapes(self, feature_level: FL) -> None:
        out_channels = validate_convolution(self, ("FilterTensor", "BiasTensor", "OutputTensor"))
        scalar = [(1, 1, 1, 1)]
        per_channel = scalar + [(1, out_channels, 1, 1)]
        for field in ("InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"):
            self.check_sizes(field, scalar, "{1,1,1,1} (per tensor)")
        for field in ("FilterScaleTensor", "FilterZeroPointTensor"):
            self.check_sizes(field, per_channel, f"{{1,1,1,1}} or {{1,{out_channels},1,1}} (per output channel)")
        self.check_sizes("BiasTensor", [(1, out_channels, 1, 1)], f"{{1,{out_channels},1,1}}")


# --- import from ONNX ------------------------------------------------------------------------

X, X_SCALE, X_ZP, W, W_SCALE, W_ZP, Y_SCALE, Y_ZP, BIAS = range(9)
# The desc field each QLinearConv input binds to, in input order (the bias is input 8, field 7).
FIELDS_BY_INPUT = (
    "InputTensor",
    "InputScaleTensor",
    "InputZeroPointTensor",
    "FilterTensor",
    "FilterScaleTensor",
    "FilterZeroPointTensor",
    "OutputScaleTensor",
    "OutputZeroPointTensor",
    "BiasTensor",
)


@dataclasses.dataclass(frozen=True)
class ConvolutionGeometry:
    """A convolution node's shapes and attributes, read as DmlOperatorQLinearConv.cpp and
    DmlOperatorConvInteger.cpp read them, and as the 4-D desc fields they become: a 1-D
    convolution ([N, C, W]) gets a height of 1 between C and W, its strides/dilations/pads padded
    at the front (KernelArgs)."""

    batch: int
    channels: int
    out_channels: int
    filter_channels: int
    in_spatial: tuple
    kernel: tuple
    out_spatial: tuple
    strides: tuple
    dilations: tuple
    start: tuple
    end: tuple
    group: int

    @property
    def _pad1(self) -> tuple:
        return (1,) * (2 - len(self.in_spatial))

    @property
    def in4(self) -> tuple:
        return (self.batch, self.channels, *self._pad1, *self.in_spatial)

    @property
    def w4(self) -> tuple:
        return (self.out_channels, self.filter_channels, *self._pad1, *self.kernel)

    @property
    def out4(self) -> tuple:
        return (self.batch, self.out_channels, *self._pad1, *self.out_spatial)

    @property
    def output_shape(self) -> tuple:
        return (self.batch, self.out_channels, *self.out_spatial)

    def fields(self) -> dict:
        """DimensionCount, Strides, Dilations, StartPadding, EndPadding and GroupCount, 2-D."""
        zero1 = (0,) * len(self._pad1)
        return dict(DimensionCount=2, Strides=self._pad1 + self.strides, Dilations=self._pad1 + self.dilations,
                    StartPadding=zero1 + self.start, EndPadding=zero1 + self.end, GroupCount=self.group)


def convolution_geometry(ctx: NodeContext, x: int, w: int, operator: str) -> ConvolutionGeometry:
    """The input ``x`` and filter ``w`` shapes and the attributes (auto_pad, dilations, group,
    kernel_shape, pads, strides) of a convolution node; a 3-D one (5-D tensors) falls back, assigned
    to DML (the DML EP has no support query for it and fails at kernel creation)."""
    x_shape, w_shape = ctx.shape(x), ctx.shape(w)
    rank = len(x_shape)
    if rank not in (3, 4):
        raise Fallback(f"{rank - 2}-D convolution is not supported (DirectML's {operator} is 1-D or 2-D)", ASSIGNED_TO_DML)
    if len(w_shape) != rank:
        raise ShapeError(f"filter has {len(w_shape)} dimensions, input has {rank}", node=ctx.node, tensor=ctx.input_name(w))
    spatial = rank - 2
    batch, channels, *in_spatial = x_shape
    out_channels, filter_channels, *kernel = w_shape
    kernel_shape = list(ctx.attr("kernel_shape", kernel))
    if kernel_shape != kernel:
        raise InvalidAttributeError(f"kernel_shape {kernel_shape} does not match the filter's {kernel}", node=ctx.node)
    strides = positive(ctx, "strides", spatial)
    dilations = positive(ctx, "dilations", spatial)
    group = ctx.attr("group", 1)
    if group < 1 or channels % group or out_channels % group:
        raise InvalidAttributeError(
            f"group {group} must divide the input channels ({channels}) and output channels ({out_channels})", node=ctx.node
        )
    if filter_channels * group != channels:
        raise ShapeError(
            f"filter has {filter_channels} channels per group, input needs {channels // group} ({channels} / group {group})",
            node=ctx.node,
            tensor=ctx.input_name(w),
        )
    start, end = resolve_padding(ctx, in_spatial, kernel, strides, dilations)
    try:
        out_spatial = output_sizes(in_spatial, kernel, strides, dilations, start, end)
    except ValueError as exc:
        span, padded = exc.args
        raise ShapeError(f"the (dilated) kernel spans {span} but the padded input is only {padded}", node=ctx.node) from None
    return ConvolutionGeometry(batch, channels, out_channels, filter_channels, tuple(in_spatial), tuple(kernel), out_spatial,
                               tuple(strides), tuple(dilations), tuple(start), tuple(end), group)


def qlinear_conv(ctx: NodeContext) -> DmlNode:
    x_type = quantized_type(ctx, X, "input")
    w_type = quantized_type(ctx, W, "filter")
    geometry = convolution_geometry(ctx, X, W, "QUANTIZED_LINEAR_CONVOLUTION")
    out_channels = geometry.out_channels

    check_scale(ctx, X_SCALE, ctx.parameter(X_SCALE))
    w_scale = check_scale(ctx, W_SCALE, ctx.parameter(W_SCALE), (1, out_channels))
    check_scale(ctx, Y_SCALE, ctx.parameter(Y_SCALE))
    check_zero_point(ctx, X_ZP, ctx.parameter(X_ZP), x_type)
    w_zp = check_zero_point(ctx, W_ZP, ctx.parameter(W_ZP), w_type, (1, out_channels))
    y_type = output_type(ctx)
    check_zero_point(ctx, Y_ZP, ctx.parameter(Y_ZP), y_type)
    if ctx.input_name(BIAS):
        bias_type, bias_shape = ctx.info(BIAS).dtype, ctx.shape(BIAS)
        if bias_type != np.int32 or bias_shape != (out_channels,):
            raise ShapeError(f"bias must be int32 of shape [{out_channels}], not {bias_type} {list(bias_shape)}", node=ctx.node, tensor=ctx.input_name(BIAS))

    scalar4 = (1, 1, 1, 1)
    channel4 = (1, out_channels, 1, 1)


    desc = DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC(
        InputTensor=tensor(x_type, geometry.in4),
        InputScaleTensor=tensor(np.float32, scalar4),
        InputZeroPointTensor=tensor(x_type, scalar4) if ctx.input_name(X_ZP) else None,
        FilterTensor=tensor(w_type, geometry.w4, owned=ctx.input_name(W) in ctx.constants),
        FilterScaleTensor=placed_parameter(ctx, W_SCALE, w_scale, channel4, own=False),  # not OWNED_BY_DML: exported as before
        FilterZeroPointTensor=optional_parameter(ctx, W_ZP, w_zp, channel4, own=False),
        BiasTensor=None if not ctx.input_name(BIAS) else tensor(np.int32, channel4, owned=ctx.input_name(BIAS) in ctx.constants),
        OutputScaleTensor=tensor(np.float32, scalar4),
        OutputZeroPointTensor=tensor(y_type, scalar4) if ctx.input_name(Y_ZP) else None,
        OutputTensor=tensor(y_type, geometry.out4),
        **geometry.fields(),
    )
    return ctx.dml_node(desc, FIELDS_BY_INPUT, geometry.output_shape)

# --- kernel ----------------------------------------------------------------------------------


def filter_matrix(desc, tensors) -> tuple[np.ndarray, np.ndarray]:
    """The filter codes as the GEMM's B, [K, OC] (or [G, K, OC/G] for grouped convolutions) with
    K ordered (kernel row, kernel column, input channel) as the NHWC columns are; and its zero
    points per output column."""
    w = read4d(tensors, desc, "FilterTensor")
    out_channels, group_channels, kh, kw = w.shape
    groups = desc.GroupCount
    b = w.reshape(groups, out_channels // groups, group_channels, kh, kw).transpose(0, 3, 4, 2, 1)
    b = b.reshape(groups, kh * kw * group_channels, out_channels // groups)
    zero_point = parameter4d(tensors, desc, "FilterZeroPointTensor")
    zero_point = np.broadcast_to(zero_point.reshape(-1), (out_channels,)).reshape(groups, -1).astype(np.int64)
    if groups == 1:
        return b[0], zero_point[0]
    return b, zero_point


# Grouped convolutions with at most this many input channels per group run as direct loops
# (kernels.compiled.direct_convolution) where the engine runs compiled kernels: im2col and one
# GEMM per group cost more there. 1x64x56x56 3x3, whole node: 2 channels per group 3.5 ms direct
# against 6.0 ms through im2col, 4 channels 6.8 against 3.9; depthwise 1x96x112x112 2.8 against 70.
DIRECT_CHANNELS_PER_GROUP = 2

# Where the engine runs compiled kernels, a convolution whose int32 sums exceed this many bytes
# makes and requantizes them in blocks of rows of at most this size, each while it is in L2
# (measured on a 2-core Xeon, 2 MiB of L2 per core, GEMM and requantize step: 12544x16x96 606 us
# whole, 443 us in blocks of 2048 rows; 3136x24x144 190 and 165; smaller outputs gain nothing
# and lose a call per block).
SUMS_BLOCK_BYTES = 1 << 20


class PreparedConvolution(PreparedQuantizedProduct):
    """A convolution desc prepared: its scalar parameters, the filter as the engine's product, and
    the requantize step, which adds the bias. A is the input as im2col rows; sums come channels
    last, [N, OH, OW, OC].

    A grouped convolution with few channels per group (``direct``) computes its sums with the
    compiled direct loops instead, from the input channels last; the im2col and GEMM path is
    their twin, which the numpy engine runs. On the compiled kernels, the direct loops also run
    MLAS's requantize step on each output row (``requantized_rows``), and sums beyond
    ``SUMS_BLOCK_BYTES`` are made and requantized in blocks of rows (``block_rows``); both give
    the bits of the one-piece path."""

    A_FIELD, B_FIELD = "InputTensor", "FilterTensor"
    REQUANTIZE_FIELDS: tuple[str, ...] = ("InputScaleTensor", "FilterScaleTensor", "OutputScaleTensor", "OutputZeroPointTensor")
    direct: bool
    block_rows: int | None  # the rows of each block of sums (:meth:`_block_rows`); None: in one piece
    requantized_rows: tuple | None  # MLAS's requantize step along an output row, for the direct loops

    def __init__(self, desc, tensors: dict, arithmetic, engine, products: dict):
        super().__init__(desc, tensors, arithmetic, engine, products)
        requantize = self.requantize
        compiled_step = requantize is not None and requantize.compiled and not self.corrects_u8s8
        self.block_rows = self.block_rows if compiled_step else None
        self.requantized_rows = None  # MLAS's step in the direct loops, on each output row while it is in cache
        if requantize is not None and compiled_step and self.direct and requantize.onnxruntime:
            out_w, out_channels = desc.OutputTensor.Sizes[-1], desc.OutputTensor.Sizes[1]
            self.requantized_rows = requantize.along_columns(out_channels, out_w)

    def __call__(self, tensors: dict) -> np.ndarray:
        if self.requantized_rows is not None:
            return self.output(self._direct(tensors, self.operand(tensors), self.requantized_rows))
        requantize = self.requantize
        if self.block_rows is None or requantize is None:
            return super().__call__(tensors)
        columns, product, bias = self.operand(tensors), self._product(tensors), self.bias_of(tensors)
        codes = np.empty((columns.shape[0], self.desc.OutputTensor.Sizes[1]), self.desc.OutputTensor.DataType.numpy())
        for start in range(0, len(columns), self.block_rows):
            rows = slice(start, start + self.block_rows)
            requantize(product(columns[rows], self.zero_point), bias, out=codes[rows])
        return self.output(self._channels_last(codes))

    def saturates(self, arithmetic, tensors: dict) -> bool:
        """Depthwise convolutions never saturate (MLAS's depthwise kernels are exact), nor does a
        constant filter none of whose pairs of codes can (then the direct loops stay open)."""
        filter_sizes = self.desc.FilterTensor.Sizes
        if filter_sizes[1] == 1 and filter_sizes[0] == self.desc.GroupCount or not super().saturates(arithmetic, tensors):
            return False
        return "FilterTensor" not in tensors or u8s8.can_saturate(filter_matrix(self.desc, tensors)[0])

    def prepare(self, tensors: dict) -> None:
        """``tensors`` holds the buffers bound at initialization: a zero point not among them comes
        with each run (the input's is read in :meth:`operand`; the filter's makes one engine
        product per value met). The direct loops' sums are exact: saturating sums come from the GEMM."""
        desc = self.desc
        self.kernel = tuple(desc.FilterTensor.Sizes[-2:])
        self.rows = int(np.prod(desc.OutputTensor.Sizes)) // desc.OutputTensor.Sizes[1]  # N * OH * OW
        self.runtime_zero_point = self.bound_at_run_time("InputZeroPointTensor")
        self.constant = self.constant and not self.bound_at_run_time("FilterZeroPointTensor")
        self._input_zero_point(tensors if not self.runtime_zero_point else {})
        bias_constant = desc.BiasTensor is not None and bool(desc.BiasTensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
        self.bias = np.ascontiguousarray(channels_last(tensors, desc, "BiasTensor"), np.int32) if bias_constant else None
        self.direct = (self.engine.compiled_kernels and native.direct_convolution is not None and desc.GroupCount > 1
                       and desc.FilterTensor.Sizes[1] <= DIRECT_CHANNELS_PER_GROUP and not self.saturates_u8s8)
        self.direct_filter = centred_filter(desc, tensors) if self.direct and self.constant else None
        self.block_rows = self._block_rows()
        if self.constant and not self.direct:
            self._product(tensors)

    def _block_rows(self) -> int | None:
        """The rows of each block of sums (``SUMS_BLOCK_BYTES``), for a constant filter of one
        group on the compiled kernels; None: the sums in one piece. Equal blocks, rounded up to
        a multiple of 64 rows (the requantize step folds rows in powers of two)."""
        if not (self.REQUANTIZE_FIELDS and self.engine.compiled_kernels and self.constant and not self.direct and self.desc.GroupCount == 1):
            return None
        blocks = -(-self.rows * 4 * self.desc.OutputTensor.Sizes[1] // SUMS_BLOCK_BYTES)
        return -(-self.rows // blocks // 64) * 64 if blocks > 1 else None

    def _input_zero_point(self, tensors: dict) -> None:
        """The input's zero point (0 where absent or not given), and the code padding reads."""
        self.zero_point = int(scalar(tensors, self.desc, "InputZeroPointTensor")) if "InputZeroPointTensor" in tensors else 0
        self.pad_code = np.array(self.zero_point).astype(self.desc.InputTensor.DataType.numpy())

    def requantize_parameters(self, tensors: dict) -> tuple:
        desc = self.desc
        return (scalar(tensors, desc, "InputScaleTensor"), channels_last(tensors, desc, "FilterScaleTensor"),
                scalar(tensors, desc, "OutputScaleTensor"), scalar(tensors, desc, "OutputZeroPointTensor"))

    def _product(self, tensors: dict):
        """The engine's product for the filter: made once; for a filter or filter zero point bound
        at run time, once per zero point met."""
        if not self.constant:
            b, b_zero_point = filter_matrix(self.desc, tensors)
            return self.product(b, b_zero_point, self.rows, key=(b_zero_point.tobytes(),))
        made = self.products.get(self.product_key())
        if made is not None:
            return made
        b, b_zero_point = filter_matrix(self.desc, tensors)
        return self.product(b, b_zero_point, self.block_rows or self.rows)

    def operand(self, tensors: dict) -> np.ndarray:
        """This run's input as GEMM rows (:func:`~dml_ep.numerics.kernels.im2col.im2col`); for the direct
        loops, channels last (no copy where it lies so)."""
        if self.runtime_zero_point:
            self._input_zero_point(tensors)
        x = read4d(tensors, self.desc, "InputTensor").transpose(0, 2, 3, 1)
        if self.direct:
            return np.ascontiguousarray(x)
        return im2col(x, self.desc, self.kernel, self.pad_code, self.engine.compiled_kernels)

    def accumulate(self, tensors: dict, operand: np.ndarray | None = None) -> np.ndarray:
        """The exact ``sum (x - zx) * (w - zw)`` over each window, as [N, OH, OW, OC] (channels
        last); the direct loops' with the bias (:meth:`bias_of`)."""
        desc = self.desc
        columns = self.operand(tensors) if operand is None else operand
        if self.direct:
            return self._direct(tensors, columns)
        if self.constant:
            acc = self._product(tensors)(columns, self.zero_point)
        else:  # a filter bound at run time
            acc = self._product(tensors)(columns, self.zero_point, np.ascontiguousarray(filter_matrix(desc, tensors)[0]))
        return self._channels_last(acc)

    def bias_of(self, tensors: dict) -> np.ndarray | None:
        """The bias, for the requantize step to add; the direct loops start from it instead."""
        if self.direct:
            return None
        if self.bias is not None or self.desc.BiasTensor is None:  # bound at initialization, or none
            return self.bias
        return channels_last(tensors, self.desc, "BiasTensor").astype(np.int32)

    def _direct(self, tensors: dict, x_nhwc: np.ndarray, requantize: tuple | None = None) -> np.ndarray:
        """The sums from the compiled direct loops, bias included (measured: summing from zero
        instead, the loops ran 3.6x slower), [N, OH, OW, OC] int32; with ``requantize``, MLAS's
        requantize step's parameters along an output row (:meth:`Requantizer.along_columns`),
        the codes."""
        desc = self.desc
        weights = self.direct_filter if self.direct_filter is not None else centred_filter(desc, tensors)
        bias = self.bias if self.bias is not None else (
            channels_last(tensors, desc, "BiasTensor") if desc.BiasTensor is not None else np.zeros(weights.shape[-1], np.int32))
        bias = np.ascontiguousarray(bias, np.int32)
        geometry = (*desc.Strides, *desc.Dilations, *desc.StartPadding)
        batch, out_channels, out_h, out_w = desc.OutputTensor.Sizes
        if requantize is None:
            out = np.empty((batch, out_h, out_w, out_channels), np.int32)
            native.direct_convolution.convolve(x_nhwc, self.zero_point, weights, bias, out, *geometry)
            return out
        codes = np.empty((batch, out_h, out_w, out_channels), desc.OutputTensor.DataType.numpy())
        native.direct_convolution.convolve_requantized(x_nhwc, self.zero_point, weights, bias, *requantize,
                                                       codes.view(np.uint8).reshape(batch, out_h, -1), out_w, *geometry)
        return codes

    def u8s8_correction(self, tensors: dict, operand: np.ndarray) -> np.ndarray:
        # the columns are MLAS's NHWC im2col: K is kernel tap outer, input channel inner
        return self._channels_last(u8s8.matmul_correction(operand, filter_matrix(self.desc, tensors)[0]))

    def _channels_last(self, products: np.ndarray) -> np.ndarray:
        """GEMM results, [N*OH*OW, OC] or per group [G, N*OH*OW, OC/G], as [N, OH, OW, OC]."""
        if products.ndim == 3:
            products = products.transpose(1, 0, 2).reshape(products.shape[1], -1)
        return products.reshape(-1, *self.desc.OutputTensor.Sizes[-2:], products.shape[-1])

    def output(self, requantized: np.ndarray) -> np.ndarray:
        return requantized.transpose(0, 3, 1, 2)


def centred_filter(desc, tensors: dict) -> np.ndarray:
    """The filter centred on its zero points, as the direct loops read it: int16 (centred 8-bit
    codes fit) [KH, KW, channels per group, OC]."""
    w = read4d(tensors, desc, "FilterTensor").astype(np.int16)
    zero_point = parameter4d(tensors, desc, "FilterZeroPointTensor").reshape(-1, 1, 1, 1).astype(np.int16)
    return np.ascontiguousarray((w - zero_point).transpose(2, 3, 1, 0))


def channels_last(tensors: dict, desc, field: str) -> np.ndarray:
    """A per-tensor or per-output-channel parameter ({1, OC, 1, 1}) as [OC], which broadcasts
    along the channels-last accumulator."""
    return read4d(tensors, desc, field).reshape(-1)


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``(acc + Bias) * InputScale * FilterScale / OutputScale``, ``acc`` the exact integer core."""
    acc = np.moveaxis(PreparedConvolution.integer_core(desc, tensors, engine), -1, 1).astype(np.int64)  # sum (x - zx) * (w - zw)
    if desc.BiasTensor is not None:
        acc += parameter4d(tensors, desc, "BiasTensor").astype(np.int64)
    terms = [(acc, scalar(tensors, desc, "InputScaleTensor") * parameter4d(tensors, desc, "FilterScaleTensor"))]
    return terms, scalar(tensors, desc, "OutputScaleTensor")


OPERATORS = (
    Operator(desc=DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC, prepared=PreparedConvolution, exact_value=exact_value,
             output_channels_last=True),
)
