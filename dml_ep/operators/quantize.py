"""DML_OPERATOR_QUANTIZE (DML_FEATURE_LEVEL_6_3, DirectML 1.15): desc, import, kernel, exact value.

The real EP builds it for QuantizeLinear-21 (DmlOperatorQuantization21, DmlOperatorElementWise.cpp),
as it builds DEQUANTIZE for DequantizeLinear-21 (``dequantize``: the same fields and import,
every tensor's own shape right-aligned to 4 dimensions, ``axis`` and ``block_size`` unread, the
zero the real EP fills for unsigned codes without a zero point).

DirectML's page is "TBD" for the semantics. dml_ep takes ``clamp(round(Input / Scale) +
ZeroPoint)``, ELEMENT_WISE_QUANTIZE_LINEAR's documented formula, with DEQUANTIZE's reading of the
quantization tensors (blocks where their sizes divide the input's) and its default zero points
(the midpoint of an unsigned type under SCALE, 0 of a signed one).

Import: float32 or float16 input; int8 or uint8 output. 4-bit output is the real EP's too, but
its codes could go nowhere dml_ep can take them (onnxruntime's Python API carries no 4-bit
tensors): such a node runs on the CPU here, and its plan row says so.

Kernel: the scale checked finite and positive (a constant when planned, else as it arrives: a
zero scale is undefined behaviour for ELEMENT_WISE_QUANTIZE_LINEAR, and QUANTIZE's page is silent),
then ``element_wise_quantize_linear``'s arithmetics on the scale and zero point read at every
element: the float32 ``x / scale`` and MLAS's steps in both (onnxruntime's CPU QuantizeLinear-21; a
float16 input converted to float32 first, exactly). Exact value (compare): ``x / scale`` in exact
fractions, an ideal, not a device's value.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import view
from ..numerics.kernels.parameters import checked_scale
from ..realep.placement import ON_CPU, ON_DML
from .base import FLOATS, Operator, TensorDesc, rules
from .dequantize import CODES, DIMS, FOUR_BIT, QT, SCALE, X, QuantizationDesc, blocks_expanded, default_zero_point, quantization_21
from .element_wise_quantize_linear import quantize_values
from .importing import Fallback, NodeContext, data_type
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZE_OPERATOR_DESC(QuantizationDesc):
    """QUANTIZE: ``clamp(round(Input / Scale) + ZeroPoint)``, DML_FEATURE_LEVEL_6_3 and up."""

    OPERATOR_TYPE = OP.QUANTIZE
    TENSOR_RULES = rules({"InputTensor": (False, DIMS), "OutputTensor": (False, DIMS)}, {"InputTensor": FLOATS, "OutputTensor": CODES})

    def float_and_codes(self) -> tuple[TensorDesc, TensorDesc]:
        return self.InputTensor, self.OutputTensor


# --- import from ONNX ------------------------------------------------------------------------


def quantize_linear_21(ctx: NodeContext) -> DmlNode:
    """QuantizeLinear-21 as DmlOperatorQuantization21 builds it (module docstring)."""
    y_type = np.dtype(ctx.values[ctx.node.output[0]].dtype)
    codes = FOUR_BIT.get(y_type.name) or data_type(y_type)
    if codes not in CODES:
        raise Fallback(f"output type {y_type} is not registered for QuantizeLinear-21 (INT4, UINT4, INT8, UINT8)", ON_CPU)
    if codes.bits == 4:
        raise Fallback("4-bit codes computed at run time: dml_ep takes 4-bit codes from initializers only", ON_DML)
    scale = ctx.parameter(SCALE)
    if scale is not None:  # one bound at run time is checked as it arrives
        checked_scale(np.asarray(scale), node=ctx.node, tensor=ctx.input_name(SCALE))
    return quantization_21(ctx, DML_QUANTIZE_OPERATOR_DESC, data_type(ctx.info(X).dtype), codes, codes)


# --- kernel ----------------------------------------------------------------------------------


def quantize_kernel(desc, tensors: dict, arithmetic, state: KernelState, compiled: bool = False) -> np.ndarray:
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float32, copy=False)
    scale, zero_point = _parameters(desc, tensors, x.shape)
    return quantize_values(x, scale, zero_point, desc.OutputTensor.DataType.numpy(), arithmetic, compiled)


def quantize_compiled(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """:func:`quantize_kernel` in one compiled pass (``kernels.compiled.quantize``) for a per-tensor
    scale and zero point."""
    return quantize_kernel(desc, tensors, arithmetic, state, compiled=True)


def _parameters(desc, tensors: dict, shape: tuple) -> tuple[np.ndarray, np.ndarray | int]:
    """The scale (float32) and zero point at every element (DEQUANTIZE's blocks); one element each
    where they are per tensor."""
    def read(index: int) -> np.ndarray:
        values = view(tensors[f"QuantizationTensors[{index}]"], desc.QuantizationTensors[index])
        return values.reshape(1) if values.size == 1 else blocks_expanded(values, shape)

    scale = checked_scale(read(0).astype(np.float32))  # finite and positive, as ELEMENT_WISE_QUANTIZE_LINEAR needs it
    zero_point = read(1) if desc.QuantizationType == QT.SCALE_ZERO_POINT else np.asarray([default_zero_point(desc.OutputTensor.DataType)])
    return scale, zero_point.astype(np.int32)


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``x / scale`` (the zero point, an integer, left out)."""
    x = view(tensors["InputTensor"], desc.InputTensor).astype(np.float64)
    scale, _ = _parameters(desc, tensors, x.shape)
    return [(x, 1.0)], scale.astype(np.float64)


OPERATORS = (Operator(desc=DML_QUANTIZE_OPERATOR_DESC, kernel=quantize_kernel, compiled_kernel=quantize_compiled, exact_value=exact_value),)
