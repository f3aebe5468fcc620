"""DML_OPERATOR_ELEMENT_WISE_MIN and _MAX (ONNX Min, Max 6, 8, 12, 13 of two inputs): descs, import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseBinaryLoop``: two inputs are one
operator, every tensor right-aligned to at least 4 dimensions and read with the output's sizes (ONNX
broadcasting as a stride of 0, ``element_wise_arithmetic.binary``); one input is ELEMENT_WISE_IDENTITY
(``element_wise_identity``'s desc and kernel). The real EP runs three or more as a loop of MIN/MAX
dispatches accumulating into the output, which dml_ep does not model (``two_inputs``). T5's relative-position buckets take a Min of two tensors.

Support per feature level (the DirectML pages): FLOAT32 and FLOAT16 from DML_FEATURE_LEVEL_1_0, the
8- to 32-bit integers from 2_1, INT64 and UINT64 from 5_0; 4 dimensions, 1 to 8 from 3_0.

Kernel: exact in both arithmetics but for NaN. "onnxruntime": its Min/Max propagate NaN (Eigen's
``max<PropagateNaN>``). "directml": a NaN operand gives the other one (D3D11.3 §3.1.3.1's min/max;
DirectML's page says ``min(a, b)`` only).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .base import FLOATS, Operator, rules
from .element_wise_arithmetic import FLOAT_TYPES, INTEGERS, BinaryDesc, binary
from .element_wise_identity import DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC
from .element_wise_unary_math import unary
from .importing import Fallback, NodeContext
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
_FIELDS = ("ATensor", "BTensor", "OutputTensor")
_TYPES = {FL.FL_1_0: FLOATS, FL.FL_2_1: frozenset({DT.INT32, DT.INT16, DT.INT8, DT.UINT32, DT.UINT16, DT.UINT8}),
          FL.FL_5_0: frozenset({DT.INT64, DT.UINT64})}


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_MIN_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_MIN: ``min(A, B)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_MIN
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_MAX_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_MAX: ``max(A, B)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_MAX
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})


# --- import from ONNX ------------------------------------------------------------------------


def two_inputs(ctx: NodeContext) -> None:
    """The support query of the Min and Max rows: dml_ep takes one or two inputs, one DirectML operator."""
    count = len(ctx.node.input)
    if count > 2:
        real = f"ELEMENT_WISE_{ctx.node.op_type.upper()}, once per input after the first"
        raise Fallback(f"{ctx.node.op_type} with {count} inputs (one or two inputs are one DirectML operator)", ON_DML_AS.format(real))


def _one_input(ctx: NodeContext) -> DmlNode:
    """A one-input Min or Max: ELEMENT_WISE_IDENTITY, as the real EP runs it."""
    return unary(ctx, DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC, FLOAT_TYPES | INTEGERS)


def min_(ctx: NodeContext) -> DmlNode:
    if len(ctx.node.input) == 1:
        return _one_input(ctx)
    return binary(ctx, DML_ELEMENT_WISE_MIN_OPERATOR_DESC, types=FLOAT_TYPES | INTEGERS)


def max_(ctx: NodeContext) -> DmlNode:
    if len(ctx.node.input) == 1:
        return _one_input(ctx)
    return binary(ctx, DML_ELEMENT_WISE_MAX_OPERATOR_DESC, types=FLOAT_TYPES | INTEGERS)


# --- kernel ----------------------------------------------------------------------------------

# Per desc: (the D3D function, a NaN operand giving the other; onnxruntime's, NaN propagating).
_FUNCTIONS = {DML_ELEMENT_WISE_MIN_OPERATOR_DESC: (np.fmin, np.minimum), DML_ELEMENT_WISE_MAX_OPERATOR_DESC: (np.fmax, np.maximum)}


def element_wise_min_max(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """The smaller or larger of A and B, exactly."""
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    directml, onnxruntime = _FUNCTIONS[type(desc)]
    # Broadcast operands made whole: numpy's min/max loop over a zero-stride operand faults under
    # qemu-x86_64's AVX2 emulation (CI's emulated hosts), though not on a real CPU.
    a, b = (np.ascontiguousarray(x) if 0 in x.strides else x for x in (a, b))
    return (onnxruntime if options.onnxruntime else directml)(a, b)


def _integers(desc) -> bool:
    """Integer tensors have no NaN: the same output in every arithmetic."""
    return desc.OutputTensor.DataType not in FLOATS


OPERATORS = tuple(Operator(desc=desc, kernel=element_wise_min_max, exact_value=None, exact_for_any_input=_integers) for desc in _FUNCTIONS)
"""ONNX Min and Max of two inputs on DML_OPERATOR_ELEMENT_WISE_MIN/MAX (``dml_ep/operators/element_wise_min_max.py``):
exact, NaN aside."""
