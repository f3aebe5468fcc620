"""DML_OPERATOR_FILL_VALUE_SEQUENCE: desc and kernel.

DirectML's page (DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC): ``OutputTensor[i] = ValueStart + i *
ValueDelta`` for each element index ``i`` in row-major order, ValueDataType the output's type. The
DML EP builds it twice in RotaryEmbedding's graph (DmlOperatorRotaryEmbedding.cpp): the sign
tensor {-1, 1} (start -1, delta 2, in the input's float type) and, for 1-D position ids, the
positions 0 .. S-1 (INT64, delta 1) that ELEMENT_WISE_ADD offsets; DmlOperatorRange.cpp builds it
for ONNX Range 11 (``range_``: start, limit and delta required CPU constants, ``max(ceil((limit - start) / delta), 0)``
elements, OperatorHelper.cpp RangeHelper; int16, int32, int64, float32).

Support per feature level: introduced in DML_FEATURE_LEVEL_2_1 with 4 dimensions; 1 to 8 from 4_0;
float32, float16, (u)int32, (u)int16, (u)int8, and (u)int64 from 5_0.

Kernel, "directml" arithmetic: the page's formula as a point value, ``start + i * delta`` exact,
rounded once to the type; integers wrap in their type. The older text of
the page (``Value += Delta`` per element) differs from it only for float values that do not add
exactly; RotaryEmbedding's are exact in both readings. "onnxruntime": onnxruntime's CPU Range
(cpu/generator/range.cc) adds delta to a running value in the type (``start += delta``), so a float32 sequence
rounds at each step; integers and RotaryEmbedding's sequences are the same in both arithmetics.

``ValueStart``/``ValueDelta`` are DirectML's DML_SCALAR_UNION, held as a Python number read
through ValueDataType.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import RealEpError
from ..realep.placement import ON_DML
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, data_type, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 8)}
TYPES = {FL.FL_2_1: frozenset({DT.FLOAT32, DT.FLOAT16, DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8}),
         FL.FL_5_0: frozenset({DT.INT64, DT.UINT64})}


@dataclasses.dataclass(frozen=True)
class FillValueDesc(OperatorDesc):
    """The FILL_VALUE descs' common head: an output and the type of the values written to it (its own)."""

    OutputTensor: TensorDesc
    ValueDataType: int  # a DML_TENSOR_DATA_TYPE (DxDispatch writes its number)

    INTRODUCED = FL.FL_2_1

    def validate_shapes(self, feature_level: FL) -> None:
        if self.ValueDataType != self.OutputTensor.DataType:
            self.fail(f"ValueDataType {self.ValueDataType} must be OutputTensor's {self.OutputTensor.DataType.name}", "ValueDataType")


@dataclasses.dataclass(frozen=True)
class DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(FillValueDesc):
    """FILL_VALUE_SEQUENCE: ``Output[i] = ValueStart + i * ValueDelta``, DML_FEATURE_LEVEL_2_1 and up."""

    ValueStart: float
    ValueDelta: float

    OPERATOR_TYPE = OP.FILL_VALUE_SEQUENCE
    TENSOR_RULES = rules({"OutputTensor": (False, DIMS)}, {"OutputTensor": TYPES})


# --- import from ONNX ------------------------------------------------------------------------


def signs(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotarySigns, RotaryEmbedding's {-1, 1} in the input's float type ``to``
    (DmlOperatorRotaryEmbedding.cpp L293-312): {2}; the value [2, 1] (halves) or [2] (``interleaved`` pairs) the
    MULTIPLY broadcasts."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(ctx.attr("to"))
    desc = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(OutputTensor=tensor(dtype, (2,)), ValueDataType=int(data_type(dtype)), ValueStart=-1.0, ValueDelta=2.0)
    return ctx.dml_node(desc, (), (2,) if ctx.attr("interleaved", 0) else (2, 1))


def positions(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlRotaryRange, RotaryEmbedding's 0 .. S-1 for 1-D position ids (L235-258): INT64
    {1, 1, 1, S}, S the sequence of input 0 (the node's x, [B, N, S, H] where ``transposed``)."""
    shape = ctx.shape(0)
    sequence = shape[2] if ctx.attr("transposed", 0) else shape[1]
    desc = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(OutputTensor=tensor(np.int64, (1, 1, 1, sequence)), ValueDataType=int(DT.INT64), ValueStart=0, ValueDelta=1)
    return ctx.dml_node(desc, (), (1, sequence))


def range_(ctx: NodeContext) -> DmlNode:
    """ONNX Range 11 (DmlOperatorRange.cpp): start, limit and delta scalars read on the CPU; a 1-D output of
    ``max(ceil((limit - start) / delta), 0)`` elements, {1, 1, 1, n} for DirectML."""
    start, limit, delta = (ctx.constants[ctx.input_name(i)].reshape(-1)[0] for i in range(3))
    dtype = np.dtype(start.dtype)
    if delta == 0:
        raise RealEpError("Range with delta 0: its element count is not a number (RangeHelper's narrow_cast fails)", node=ctx.node)
    if dtype.kind == "f":
        count = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    else:
        span, step = int(limit) - int(start), int(delta)
        quotient = abs(span) // abs(step) * (1 if (span >= 0) == (step > 0) else -1)  # C++'s / truncates toward zero
        count = max(quotient + (span - quotient * step != 0), 0)
    if count == 0:  # the EP's kernel is assigned; how it runs an empty output is not in DmlOperatorRange.cpp
        raise Fallback("an empty Range (0 elements): a DirectML tensor has no size 0", ON_DML)
    value = float(start) if dtype.kind == "f" else int(start)
    desc = DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC(OutputTensor=tensor(dtype, (1, 1, 1, count)), ValueDataType=int(data_type(dtype)), ValueStart=value,
                                                 ValueDelta=float(delta) if dtype.kind == "f" else int(delta))
    return ctx.dml_node(desc, (), (count,))


# --- kernel ----------------------------------------------------------------------------------


def fill_value_sequence(desc: DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """``start + i * delta`` over the output's elements, rounded once (floats) or wrapped (integers)."""
    out = desc.OutputTensor
    dtype = out.DataType.numpy()
    index = np.arange(out.element_count, dtype=np.int64)
    if out.DataType == DT.FLOAT32 and arithmetic is not None and arithmetic.onnxruntime:  # Range's running float32 sum
        steps = np.full(out.element_count, np.float32(desc.ValueDelta), np.float32)
        steps[:1] = np.float32(desc.ValueStart)
        return np.add.accumulate(steps, dtype=np.float32).reshape(out.Sizes)
    if out.DataType in FLOATS:  # exact in float64 (float32 start and delta, an index below 2^29), rounded once
        values = (np.float64(np.float32(desc.ValueStart)) + index * np.float64(np.float32(desc.ValueDelta))).astype(dtype)
    else:  # integers wrap as the type's arithmetic does: computed modulo 2^64, then narrowed
        with np.errstate(over="ignore"):
            values = (np.int64(int(desc.ValueStart)) + index * np.int64(int(desc.ValueDelta))).astype(dtype)
    return values.reshape(out.Sizes)


OPERATORS = (Operator(desc=DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC, kernel=fill_value_sequence, exact_value=None, exact_for_any_input=True),)
