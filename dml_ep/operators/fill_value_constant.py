"""DML_OPERATOR_FILL_VALUE_CONSTANT (ONNX ConstantOfShape 9 and 21): desc, import, kernel.

Import, as DmlOperatorConstantOfShape.cpp: input 0 (the int64 shape) is a required CPU input, never
bound to DirectML; the output, of that shape right-aligned to at least 4 dimensions, is filled with
the ``value`` attribute's one element, its raw bytes copied into DML_SCALAR_UNION (bool: the byte
1 or 0, DirectML's UINT8); without ``value``, float32 zero. T5's encoder builds its attention mask's
ones this way. An empty output (a 0 in the shape) falls back: a DirectML tensor has no size 0, and
how the EP runs it is not in DmlOperatorConstantOfShape.cpp (as Range's, fill_value_sequence.py).

Support per feature level (DML_FILL_VALUE_CONSTANT_OPERATOR_DESC's page): introduced in
DML_FEATURE_LEVEL_2_1 with 4 dimensions, float32, float16 and the 8- to 32-bit integers; 1 to 8
dimensions from 4_0; FLOAT64, INT64 and UINT64 from 4_1.

Kernel: the value, unchanged, in every element. It is a copy of the attribute's bits, so both
arithmetics give onnxruntime's output exactly (no rounding anywhere).

``Value`` is DirectML's DML_SCALAR_UNION, held as a Python number read through ValueDataType; an
ONNX bool's as a Python bool (an int, the UINT8 byte 1 or 0), so that the kernel gives ONNX bool
as the logical kernels do (dml_ep's executor keeps a kernel's array type). A DxDispatch export
writes it as JSON ``true``/``false``, which dml_ep's reader, expecting a number, rejects.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..realep.placement import ON_DML
from .base import FLOATS, Operator, rules
from .element_wise_identity import BOOL, INTS_32, INTS_64, dml_type
from .fill_value_sequence import DIMS, FillValueDesc
from .importing import Fallback, NodeContext, data_type, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_TYPES = {FL.FL_2_1: FLOATS | INTS_32, FL.FL_4_1: INTS_64}


@dataclasses.dataclass(frozen=True)
class DML_FILL_VALUE_CONSTANT_OPERATOR_DESC(FillValueDesc):
    """FILL_VALUE_CONSTANT: ``Output[coordinate] = Value``, DML_FEATURE_LEVEL_2_1 and up."""

    Value: float

    OPERATOR_TYPE = OP.FILL_VALUE_CONSTANT
    TENSOR_RULES = rules({"OutputTensor": (False, DIMS)}, {"OutputTensor": _TYPES})


# --- import from ONNX ------------------------------------------------------------------------


def constant_of_shape(ctx: NodeContext) -> DmlNode:
    """ConstantOfShape: the shape read on the CPU (input 0), the ``value`` attribute's element (float32 0 without it)."""
    shape = tuple(int(d) for d in ctx.constants[ctx.input_name(0)].reshape(-1))
    attribute = ctx.attr("value")
    value = np.zeros(1, np.float32) if attribute is None else onnx.numpy_helper.to_array(attribute).reshape(-1)
    if 0 in shape:
        raise Fallback(f"an empty ConstantOfShape {list(shape)}: a DirectML tensor has no size 0", ON_DML)
    dtype = dml_type(value.dtype)
    number = bool(value[0]) if value.dtype == BOOL else float(value[0]) if dtype.kind == "f" else int(value[0])
    desc = DML_FILL_VALUE_CONSTANT_OPERATOR_DESC(OutputTensor=tensor(dtype, padded_sizes(shape)), ValueDataType=int(data_type(dtype)), Value=number)
    return ctx.dml_node(desc, (), shape)


# --- kernel ----------------------------------------------------------------------------------


def fill_value_constant(desc: DML_FILL_VALUE_CONSTANT_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """The value in every element of the output's type (a float64 holds float32's and float16's values exactly)."""
    out = desc.OutputTensor
    return np.full(out.Sizes, desc.Value, BOOL if isinstance(desc.Value, bool) else out.DataType.numpy())


OPERATORS = (Operator(desc=DML_FILL_VALUE_CONSTANT_OPERATOR_DESC, kernel=fill_value_constant, exact_value=None, exact_for_any_input=True),)
