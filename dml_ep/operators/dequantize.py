"""DML_OPERATOR_DEQUANTIZE (DML_FEATURE_LEVEL_6_3, DirectML 1.15): desc, import, kernel.

The real EP builds it for com.microsoft MatMulNBits (DmlOperatorMatMulNBits.cpp, the first of its
two operators: ``matmul_nbits``) and for DequantizeLinear-21 (DmlOperatorQuantization21,
DmlOperatorElementWise.cpp: :func:`dequantize_linear_21`).

DirectML's page is "TBD" for the semantics; what dml_ep takes, and from where:
- ``Output = (Input - ZeroPoint) * Scale``, the QuantizationTensors being [scale] for SCALE and
  [scale, zero point] for SCALE_ZERO_POINT (the EP's usage, DirectMLX's ``dml::Dequantize``).
- A quantization tensor dimension smaller than the input's stands for blocks of ``input / it``
  elements (MatMulNBits gives a {N, K} weight a {N, K / block_size} scale: inferred, the only reading
  under which the EP's graph computes MatMulNBits).
- SCALE with an unsigned input: the zero point is the type's midpoint, 8 for UINT4 and 128 for UINT8
  (the EP's comment, DmlOperatorElementWise.cpp; MatMulNBits' own default is the same 2^(bits-1));
  with a signed input 0.
- UINT4 and INT4 packed two to a byte, the first in the low nibble (DML_TENSOR_DATA_TYPE's page).

Import (the internal com.microsoft.dml ``DmlDequantize`` a MatMulNBits split makes): B's bytes read as
UINT4 (4 bits) or UINT8 (8 bits) {N, K}; the scales {N, blocks} (a 1-D [N * blocks] reads alike);
the zero points {N, blocks} of B's type with the EP's row stride ``blocks + 1`` when ``blocks`` is odd
(MatMulNBits pads each row of 4-bit zero points to whole bytes). The EP's desc repeats A's batch
dimensions on every tensor (stride 0 on the weight); dml_ep's has {N, K} alone, which GEMM then reads
with stride 0 over A's batches: the same values, dequantized once.

Import of DequantizeLinear-21 (int4, uint4, int8, uint8 codes; float32 or float16 scale), as
DmlOperatorQuantization21 builds it (DmlOperatorElementWise.cpp, the same in 1.20, 1.24 and main):
every tensor described by its own shape, right-aligned and padded with 1s to 4 dimensions
(DmlOperator::Initialize, CreateTensorDescFromInput); ``axis`` and ``block_size`` are never read.
So a per-tensor scale reads as a broadcast, a 1-D scale as one along the last axis, and a blocked
scale (the input's rank) as DEQUANTIZE's blocks: ONNX's values wherever the per-axis axis is the
last. A per-axis scale on another axis is DirectML's to read as blocks of the last axis where its
length divides that axis (compare then shows the difference from onnxruntime), and otherwise the
real EP fails creating the operator (RealEpError). (``../shared/DML_4BIT.md`` describes a
``BroadcastQuantizationParameters`` placing a 1-D scale on ``axis``: no onnxruntime source has it.)
SCALE_ZERO_POINT with a zero point, SCALE without one for signed codes (DirectML's default 0,
ONNX's too), and for unsigned codes without one SCALE_ZERO_POINT with a zero the real EP makes
with DML_OPERATOR_FILL_VALUE_CONSTANT and broadcasts to the scale's sizes (DirectML's default
there would be the midpoint, ONNX's is 0): dml_ep binds that zero as a constant of its own.
4-bit codes are taken from initializers, packed two to a byte as DirectML reads them
(onnxruntime's Python API carries no 4-bit tensors between nodes).

Kernel: the exact ``(q - zp) * scale`` (an integer below 2^8 times a float32 or float16 scale is
exact in float64), rounded once to the output type, half to even: onnxruntime's CPU dequantization
(``(q - zp) * scale`` in float32, MLAS q4_dq.cpp) gives the same float32 values. A float16 output
rounds the weights to float16, which onnxruntime's CPU MatMulNBits does not (it dequantizes to
float32): compare names that cause in the "directml" arithmetic; in the "onnxruntime" one a
MatMulNBits' weight stays float32, as onnxruntime keeps it. No exact value: DEQUANTIZE does not
quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core import nibbles
from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_QUANTIZATION_TYPE
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import RealEpError
from ..core.tensor_desc import DML_BUFFER_TENSOR_DESC, view
from ..realep.placement import ON_CPU, ON_DML
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, TensorDescArray, rules
from .importing import Fallback, NodeContext, data_type, owned, tensor
from .kernel_state import KernelState
from .nodes import DmlNode, Imported

# --- desc ------------------------------------------------------------------------------------

QT = DML_QUANTIZATION_TYPE
CODES = frozenset({DT.INT8, DT.INT4, DT.UINT8, DT.UINT4})
DIMS = {FL.FL_6_3: (1, 8)}
TENSOR_COUNT = {QT.NONE: 0, QT.SCALE: 1, QT.SCALE_ZERO_POINT: 2}


@dataclasses.dataclass(frozen=True)
class QuantizationDesc(OperatorDesc):
    """What DEQUANTIZE and QUANTIZE share: the same fields, in DirectML's order, and rules."""

    InputTensor: TensorDesc
    QuantizationType: DML_QUANTIZATION_TYPE
    QuantizationTensorCount: int
    QuantizationTensors: TensorDescArray
    OutputTensor: TensorDesc

    INTRODUCED = FL.FL_6_3

    def float_and_codes(self) -> tuple[TensorDesc, TensorDesc]:
        """The float tensor (the scale's type) and the codes (the zero point's type)."""
        raise NotImplementedError

    def validate_shapes(self, feature_level: FL) -> None:
        """The documented rule (every tensor of one DimensionCount), the count the type implies (the
        EP's usage; NONE is refused, as DirectMLX asserts), scale of the float tensor's type and zero
        point of the codes', and quantization sizes that equal or evenly divide the input's (blocks)."""
        count = TENSOR_COUNT[self.QuantizationType]
        if self.QuantizationType == QT.NONE or self.QuantizationTensorCount != count or len(self.QuantizationTensors) != count:
            self.fail(f"{self.QuantizationType} takes {count} tensor(s), not {self.QuantizationTensorCount}", "QuantizationTensors")
        wanted = tuple(each.DataType for each in self.float_and_codes())
        for index, (each, want) in enumerate(zip(self.QuantizationTensors, wanted)):
            field = f"QuantizationTensors[{index}]"
            if each.DimensionCount != self.InputTensor.DimensionCount:
                self.fail(f"DimensionCount {each.DimensionCount} must equal InputTensor's {self.InputTensor.DimensionCount}", field)
            if each.DataType != want:
                self.fail(f"DataType {each.DataType.name} must be {want.name}", field)
            if any(size > full or full % size for size, full in zip(each.Sizes, self.InputTensor.Sizes)):
                self.fail(f"sizes {list(each.Sizes)} must equal or evenly divide InputTensor's {list(self.InputTensor.Sizes)}", field)
        if self.OutputTensor.Sizes != self.InputTensor.Sizes:
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must equal InputTensor's {list(self.InputTensor.Sizes)}", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_DEQUANTIZE_OPERATOR_DESC(QuantizationDesc):
    """DEQUANTIZE: ``(Input - ZeroPoint) * Scale``, DML_FEATURE_LEVEL_6_3 and up."""

    OPERATOR_TYPE = OP.DEQUANTIZE
    TENSOR_RULES = rules({"InputTensor": (False, DIMS), "OutputTensor": (False, DIMS)}, {"InputTensor": CODES, "OutputTensor": FLOATS})

    def float_and_codes(self) -> tuple[TensorDesc, TensorDesc]:
        return self.OutputTensor, self.InputTensor


# --- import from ONNX ------------------------------------------------------------------------

B, SCALES, ZERO_POINTS = range(3)


def matmul_nbits_weight(ctx: NodeContext) -> DmlNode:
    """DmlDequantize (B, scales[, zero points]; attributes N, K, bits): MatMulNBits' weight {N, K}."""
    n, k, bits = ctx.attr("N"), ctx.attr("K"), ctx.attr("bits")
    codes = DT.UINT4 if bits == 4 else DT.UINT8
    float_type = ctx.constants[ctx.input_name(SCALES)].dtype
    blocks = ctx.constants[ctx.input_name(SCALES)].size // n
    scale = owned(tensor(float_type, (n, blocks)))
    quantization: tuple = (scale,)
    if ctx.input_name(ZERO_POINTS):
        misread = misread_zero_points(bits, blocks)
        if misread:
            raise Fallback(misread, ON_DML)
        strides = (blocks + 1, 1) if blocks % 2 else None
        quantization += (owned(DML_BUFFER_TENSOR_DESC.create(codes, (n, blocks), strides)),)
    desc = DML_DEQUANTIZE_OPERATOR_DESC(
        InputTensor=owned(DML_BUFFER_TENSOR_DESC.create(codes, (n, k))),
        QuantizationType=QT.SCALE_ZERO_POINT if len(quantization) == 2 else QT.SCALE,
        QuantizationTensorCount=len(quantization),
        QuantizationTensors=quantization,
        OutputTensor=tensor(float_type, (n, k)),
    )
    made = ctx.dml_node(desc, ("InputTensor", *(f"QuantizationTensors[{i}]" for i in range(len(quantization)))), (n, k))
    made.imported = Imported(MATMUL_NBITS_WEIGHT)
    return made


X, SCALE, ZERO_POINT = range(3)
FOUR_BIT = {"int4": DT.INT4, "uint4": DT.UINT4}  # onnx's (ml_dtypes') unpacked 4-bit numpy types


def dequantize_linear_21(ctx: NodeContext) -> DmlNode:
    """DequantizeLinear-21 as DmlOperatorQuantization21 builds it (module docstring)."""
    x_type = np.dtype(ctx.info(X).dtype)
    codes = FOUR_BIT.get(x_type.name) or data_type(x_type)
    if codes not in CODES:
        raise Fallback(f"input type {x_type} is not registered for DequantizeLinear-21 (INT4, UINT4, INT8, UINT8)", ON_CPU)
    if codes.bits == 4 and any(ctx.input_name(i) and ctx.input_name(i) not in ctx.constants for i in (X, ZERO_POINT)):
        raise Fallback("4-bit codes computed at run time: dml_ep takes 4-bit codes and zero points from initializers", ON_DML)
    return quantization_21(ctx, DML_DEQUANTIZE_OPERATOR_DESC, codes, data_type(ctx.info(SCALE).dtype), codes)


def quantization_21(ctx: NodeContext, desc_class: type[QuantizationDesc], input_type: DT, output_type: DT, codes: DT) -> DmlNode:
    """QuantizeLinear-21 or DequantizeLinear-21 (x, scale[, zero point]) as DmlOperatorQuantization21
    builds it (module docstring): ``desc_class`` of ``input_type`` to ``output_type``, ``codes`` the
    zero point's type; 4-bit constants packed as DirectML reads them."""
    sizes = right_aligned(ctx.shape(X))
    scale_sizes = right_aligned(ctx.shape(SCALE))
    for index in (SCALE, ZERO_POINT):
        if ctx.input_name(index) and not divides(right_aligned(ctx.shape(index)), sizes):
            raise RealEpError(f"the DML EP describes {ctx.input_name(index)!r} {list(ctx.shape(index))} right-aligned as "
                              f"{list(right_aligned(ctx.shape(index)))} against the input's {list(sizes)} (DmlOperatorQuantization21 "
                              f"reads neither axis nor block_size); {desc_class.OPERATOR_TYPE.name} takes quantization sizes that "
                              "equal or divide the input's, so the real EP fails creating the operator", node=ctx.node)
    quantization: tuple = (_flagged(DML_BUFFER_TENSOR_DESC.create(data_type(ctx.info(SCALE).dtype), scale_sizes),
                                    ctx.input_name(SCALE) in ctx.constants),)
    if ctx.input_name(ZERO_POINT):
        zero_point_desc = DML_BUFFER_TENSOR_DESC.create(codes, right_aligned(ctx.shape(ZERO_POINT)))
        quantization += (_flagged(zero_point_desc, ctx.input_name(ZERO_POINT) in ctx.constants),)
    elif codes in (DT.UINT4, DT.UINT8):  # the real EP's filled zero, broadcast to the scale's sizes
        quantization += (owned(DML_BUFFER_TENSOR_DESC.create(codes, scale_sizes, (0,) * len(scale_sizes))),)
    desc = desc_class(
        InputTensor=_flagged(DML_BUFFER_TENSOR_DESC.create(input_type, sizes), ctx.input_name(X) in ctx.constants),
        QuantizationType=QT.SCALE_ZERO_POINT if len(quantization) == 2 else QT.SCALE,
        QuantizationTensorCount=len(quantization),
        QuantizationTensors=quantization,
        OutputTensor=DML_BUFFER_TENSOR_DESC.create(output_type, sizes),
    )
    bound_inputs = 3 if ctx.input_name(ZERO_POINT) else 2
    made = ctx.dml_node(desc, ("InputTensor", "QuantizationTensors[0]", "QuantizationTensors[1]")[:bound_inputs], ctx.shape(X))
    if len(quantization) > bound_inputs - 1:
        made.inputs["QuantizationTensors[1]"] = np.zeros(1, codes.numpy())
    for field in ("InputTensor", "QuantizationTensors[1]"):  # onnx's unpacked 4-bit codes as the bytes DirectML reads
        value = made.inputs.get(field)
        if isinstance(value, np.ndarray) and value.dtype.name in FOUR_BIT:
            made.inputs[field] = nibbles.pack(value.astype(np.int8).reshape(-1))
    return made


def right_aligned(shape) -> tuple[int, ...]:
    """A shape as the DML EP's CreateTensorDescFromInput describes it: right-aligned, 1s prepended
    up to 4 dimensions (NchwDimensionCount)."""
    shape = tuple(int(d) for d in shape)
    return (1,) * (4 - len(shape)) + shape


def divides(sizes: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Quantization sizes (DE)QUANTIZE takes against the input's: as many, each equal or dividing."""
    return len(sizes) == len(full) and all(size <= whole and whole % size == 0 for size, whole in zip(sizes, full))


def _flagged(desc: DML_BUFFER_TENSOR_DESC, constant: bool) -> DML_BUFFER_TENSOR_DESC:
    return owned(desc) if constant else desc


# --- kernel ----------------------------------------------------------------------------------


def misread_zero_points(bits: int, blocks: int) -> str | None:
    """Why the real EP's zero-point desc misreads MatMulNBits' zero points (None where it does not):
    its row stride rounds an odd block count up for whole bytes of 4-bit rows, also for 8-bit ones."""
    if bits == 8 and blocks % 2:
        return (f"the real EP reads 8-bit zero points with a row stride of {blocks + 1} bytes (its rounding up for 4-bit rows), "
                f"where each row has {blocks}: every row after the first is misread; dml_ep does not model that read")
    return None


MATMUL_NBITS_WEIGHT = "MatMulNBits' weight"  # Imported.onnxruntime: the DEQUANTIZE of a MatMulNBits split


def dequantize_kernel(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """``(q - zp) * scale`` exactly, rounded once to the output type (every arithmetic alike); but a
    MatMulNBits' float16 weight in the "onnxruntime" arithmetic stays float32, as onnxruntime's CPU
    kernel keeps it (a float16 scale converted to float32, times a code: exact), for the GEMM
    that reads it there."""
    codes = view(tensors["InputTensor"], desc.InputTensor).astype(np.int32)
    scale = blocks_expanded(view(tensors["QuantizationTensors[0]"], desc.QuantizationTensors[0]), codes.shape)
    zero_point: np.ndarray | int = default_zero_point(desc.InputTensor.DataType)
    if desc.QuantizationType == QT.SCALE_ZERO_POINT:
        zero_point = blocks_expanded(view(tensors["QuantizationTensors[1]"], desc.QuantizationTensors[1]), codes.shape)
    exact = np.multiply(codes - zero_point, scale, dtype=np.float64)
    if arithmetic.onnxruntime and state.imported.onnxruntime == MATMUL_NBITS_WEIGHT:
        return exact.astype(np.float32)
    return exact.astype(desc.OutputTensor.DataType.numpy())


def weight_codes(desc, tensors: dict) -> tuple[np.ndarray, np.ndarray, int] | None:
    """A 4-bit {N, K} DEQUANTIZE's codes minus their zero points (int8) and its scales {N, blocks}
    (float32), blocked along K: each product, rounded to float32, is the "onnxruntime" arithmetic's
    weight (MLAS's ``(q - zp) * scale``), which a GEMM may read so, at a byte per code; None for
    another DEQUANTIZE."""
    if not isinstance(desc, DML_DEQUANTIZE_OPERATOR_DESC) or desc.InputTensor.DataType not in (DT.UINT4, DT.INT4) \
            or len(desc.InputTensor.Sizes) != 2:
        return None
    codes = view(tensors["InputTensor"], desc.InputTensor).astype(np.int8)
    scales = view(tensors["QuantizationTensors[0]"], desc.QuantizationTensors[0]).astype(np.float32)
    (n, k), blocks = codes.shape, scales.shape[-1]
    if scales.shape != (n, blocks) or k % blocks:
        return None
    zero_point: np.ndarray | int = default_zero_point(desc.InputTensor.DataType)
    if desc.QuantizationType == QT.SCALE_ZERO_POINT:
        zero_point = np.repeat(view(tensors["QuantizationTensors[1]"], desc.QuantizationTensors[1]).astype(np.int8), k // blocks, axis=1)
    return codes - zero_point, scales, k // blocks


def default_zero_point(data_type: DT) -> int:
    """DirectML's zero point under SCALE: the unsigned types' midpoint, 0 for the signed ones."""
    return 1 << (data_type.bits - 1) if data_type in (DT.UINT4, DT.UINT8) else 0


def blocks_expanded(values: np.ndarray, shape: tuple) -> np.ndarray:
    """A quantization tensor read at every input element: each dimension smaller than the input's
    repeated in blocks of ``input / it``."""
    for axis, (size, full) in enumerate(zip(values.shape, shape)):
        if size != full:
            values = np.repeat(values, full // size, axis=axis)
    return values


OPERATORS = (Operator(desc=DML_DEQUANTIZE_OPERATOR_DESC, kernel=dequantize_kernel, exact_value=None, exact_for_any_input=True),)
