"""DML_OPERATOR_CONVOLUTION_INTEGER (ONNX ConvInteger): desc, import, kernel.

Import, as DmlOperatorConvInteger.cpp does it (L23-78): x, w, x_zero_point, w_zero_point bound to
Input, Filter, InputZeroPoint, FilterZeroPoint (index map {0, 2, 1, 3}); a 1-D convolution
([N, C, W]) becomes 2-D with a height of 1, so DimensionCount is always 2; x_zero_point per tensor
{1,1,1,1}; w_zero_point per tensor or per output channel {1,OC,1,1} (placed on C); a missing zero
point is a null tensor. The attributes are read as the QLinearConv importer reads them
(:func:`~dml_ep.operators.quantized_linear_convolution.convolution_geometry`); a 3-D ConvInteger
is assigned to DML by the real EP (no support query) and fails at kernel creation. The zero points
may be constants or bound at run time: ``quantize_dynamic``'s CNNs feed x_zero_point from a
DynamicQuantizeLinear.

Kernel: ``Output = sum (x - zx) * (w - zw)`` over each window, exact int32 sums. DirectML's page
is silent on the value of padded input elements; dml_ep pads with the input zero point (padding
contributes 0), which is what onnxruntime's CPU ConvInteger does (conv_integer.cc: its im2col
writes ``input_offset``, the x zero point, into the padded positions) and what ONNX's reference
(test_convinteger_with_padding) expects. The integer core is QUANTIZED_LINEAR_CONVOLUTION's
(:class:`~dml_ep.operators.quantized_linear_convolution.PreparedConvolution`): channels last, the
output an NCHW view of NHWC memory; what differs is the output step (the sums, no requantize) and
that a zero point bound at run time is read at each run.

onnxruntime arithmetic. onnxruntime 1.32's CPU ConvInteger (conv_integer.cc) takes T1, T2 in
{uint8, int8}, a per-tensor w_zero_point only (``ORT_ENFORCE(IsScalarOr1ElementVector(
W_Zero_Point), "Non per-tensor quantization is not supported now.")``: the real EP runs the
per-channel case on DirectML, and so does dml_ep, exact), and per image and group runs an NCHW
im2col (padding = x zero point) then ``MlasGemm`` with the *filter as A* ([OC/G, C/G*KH*KW]) and the
columns as B. So the uint8-activation x int8-weight pair that ``quantize_dynamic`` makes is MLAS's
S8U8 (A signed), which x86 MLAS runs on its portable exact kernel (``GemmS8U8Dispatch`` defaults to
``MlasGemmQuantDispatchDefault``; AVX-VNNI-INT8 hosts have an exact VNNI kernel): no saturation.
Only uint8 weights x int8 inputs reach the U8S8 AVX2 kernel whose pairs of products saturate to
int16 (``dml_ep.numerics.kernels.u8s8``); there the correction is applied with the filter as A and K ordered
as the NCHW im2col orders it (input channel outer, kernel tap inner), where
``arithmetic.saturates_u8s8(filter, input)`` says. Unchecked against a saturating host (this one
has AVX512-VNNI), and for depthwise filters (M = 1) MLAS may take its GEMV kernel instead.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..numerics.kernels import u8s8
from ..numerics.kernels.parameters import read4d
from ..numerics.kernels.quantized_product import PreparedQuantizedProduct
from .base import INT32, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .importing import NodeContext, check_zero_point, parameter_tensor, quantized_type, tensor
from .nodes import DmlNode
from .quantized_linear_convolution import PreparedConvolution, convolution_geometry, validate_convolution


@dataclasses.dataclass(frozen=True)
class DML_CONVOLUTION_INTEGER_OPERATOR_DESC(OperatorDesc):
    """CONVOLUTION_INTEGER (ONNX ConvInteger), DML_FEATURE_LEVEL_2_1 and up."""

    InputTensor: TensorDesc
    InputZeroPointTensor: TensorDesc | None
    FilterTensor: TensorDesc
    FilterZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    Dilations: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    GroupCount: int

    BiasTensor: ClassVar[None] = None  # not a field: no bias (the shared integer core asks)
    OPERATOR_TYPE = OP.CONVOLUTION_INTEGER
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = rules(
        {
            "InputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "InputZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "FilterTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "FilterZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "OutputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
        },
        {"InputTensor": QUANTIZED, "InputZeroPointTensor": QUANTIZED, "FilterTensor": QUANTIZED,
         "FilterZeroPointTensor": QUANTIZED, "OutputTensor": INT32},
    )
    SAME_TYPE = (("InputTensor", "InputZeroPointTensor"), ("FilterTensor", "FilterZeroPointTensor"))

    def validate_shapes(self, feature_level: FL) -> None:
        out_channels = validate_convolution(self, ("FilterTensor", "OutputTensor"))
        zero_points = [t for t in (self.InputZeroPointTensor, self.FilterZeroPointTensor) if t is not None]
        if len(zero_points) == 2 and zero_points[0].DimensionCount != zero_points[1].DimensionCount:
            self.fail("DimensionCount must equal InputZeroPointTensor's", "FilterZeroPointTensor")
        self.check_sizes("InputZeroPointTensor", [(1, 1, 1, 1)], "{1,1,1,1} (per tensor)")
        self.check_sizes("FilterZeroPointTensor", [(1, 1, 1, 1), (1, out_channels, 1, 1)],
                         f"{{1,1,1,1}} or {{1,{out_channels},1,1}} (per output channel)")


# --- import from ONNX ------------------------------------------------------------------------

X, W, X_ZP, W_ZP = range(4)
FIELDS_BY_INPUT = ("InputTensor", "FilterTensor", "InputZeroPointTensor", "FilterZeroPointTensor")


def conv_integer(ctx: NodeContext) -> DmlNode:
    x_type = quantized_type(ctx, X, "input")
    w_type = quantized_type(ctx, W, "filter")
    geometry = convolution_geometry(ctx, X, W, "CONVOLUTION_INTEGER")
    channel4 = (1, geometry.out_channels, 1, 1)
    check_zero_point(ctx, X_ZP, ctx.parameter(X_ZP), x_type)
    w_zp = check_zero_point(ctx, W_ZP, ctx.parameter(W_ZP), w_type, (1, geometry.out_channels))
    if w_zp is not None:  # a constant: per channel unless one value (all-equal: a broadcast scalar)
        w_zp_desc = parameter_tensor(w_zp, channel4 if w_zp.size > 1 else (1, 1, 1, 1))
    elif ctx.input_name(W_ZP):  # bound at run time: as its shape says
        w_zp_desc = tensor(w_type, channel4 if int(np.prod(ctx.shape(W_ZP))) > 1 else (1, 1, 1, 1))
    else:
        w_zp_desc = None
    desc = DML_CONVOLUTION_INTEGER_OPERATOR_DESC(
        InputTensor=tensor(x_type, geometry.in4),
        InputZeroPointTensor=tensor(x_type, (1, 1, 1, 1)) if ctx.input_name(X_ZP) else None,
        FilterTensor=tensor(w_type, geometry.w4, owned=ctx.input_name(W) in ctx.constants),
        FilterZeroPointTensor=w_zp_desc,
        OutputTensor=tensor(np.int32, geometry.out4),
        **geometry.fields(),
    )
    return ctx.dml_node(desc, FIELDS_BY_INPUT, geometry.output_shape)


# --- kernel ----------------------------------------------------------------------------------


class PreparedConvolutionInteger(PreparedConvolution):
    """QUANTIZED_LINEAR_CONVOLUTION's integer core, its int32 sums the output (no requantize); a
    zero point bound at run time is read at each run (a run-time filter zero point: one engine
    product per value met)."""

    REQUANTIZE_FIELDS = ()  # the output is the sums
    ONNXRUNTIME_GEMM = False  # onnxruntime's A is the filter and its K is in NCHW im2col order

    # the products' own test, not the convolutions': depthwise filters saturate too (ConvInteger has no depthwise kernel)
    saturates = PreparedQuantizedProduct.saturates

    @classmethod
    def onnxruntime_operands(cls, desc) -> tuple:
        """MLAS's A is the filter."""
        return desc.FilterTensor, desc.InputTensor

    def prepare_finish(self, tensors: dict, arithmetic) -> None:
        self.requantize = None

    def finish(self, acc: np.ndarray, tensors: dict) -> np.ndarray:
        return acc.astype(np.int32)

    def u8s8_correction(self, tensors: dict, operand: np.ndarray) -> np.ndarray:
        """onnxruntime's GEMM is filter [OC/G, K] x columns [K, N*OH*OW], K in NCHW im2col order."""
        desc = self.desc
        w = read4d(tensors, desc, "FilterTensor")
        groups, taps = desc.GroupCount, w.shape[2] * w.shape[3]
        columns = operand.reshape(groups, operand.shape[-2], taps, -1)  # [G, rows, KH*KW, C/G]
        columns = columns.transpose(0, 3, 2, 1).reshape(groups, -1, operand.shape[-2])  # [G, C/G*KH*KW, rows]
        filters = w.reshape(groups, w.shape[0] // groups, -1)  # [G, OC/G, C/G*KH*KW]
        corrections = [u8s8.matmul_correction(a, b).T for a, b in zip(filters, columns)]  # [rows, OC/G] each
        return self._channels_last(np.stack(corrections) if groups > 1 else corrections[0])


OPERATORS = (
    Operator(desc=DML_CONVOLUTION_INTEGER_OPERATOR_DESC, prepared=PreparedConvolutionInteger, exact_value=None,
             output_channels_last=True),
)
