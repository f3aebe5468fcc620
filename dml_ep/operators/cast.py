"""DML_OPERATOR_CAST (Cast 6, 9, 13, 19, 21; CastLike 15, 19, 21): desc, import, kernel.

Import, as DmlOperatorCast.cpp: input and output of the node's shape, right-aligned to at least 4
dimensions (``DmlOperator::Initialize``); CastLike's second input (``target_type``) only names the
type and is not bound; ``saturate`` (19+, float8 only) is not read. A bool input is DirectML's
UINT8 of 1 or 0. A bool output is not one operator: the DML EP casts to UINT8, then clamps with
ELEMENT_WISE_CLIP1 to [0, 1] (DmlOperatorCast.cpp, newer than 1.17's, which casts alone), a DirectML
graph of its own (``graphs/cast_to_bool.py``); this module's importer answers for one the planner
did not split.

Support per feature level (the page): FLOAT32, FLOAT16 and the 8- to 32-bit integers from
DML_FEATURE_LEVEL_1_0 (4 dimensions), INT64 and UINT64 from 3_0, 1 to 8 dimensions from 3_1,
FLOAT64 from 4_1.

Kernel (DirectML documents none of these conversions; each arithmetic says what it computes):
- to a float: rounded to nearest, ties to even, in both arithmetics (numpy's conversion, as
  onnxruntime's Eigen/MLAS casts give); exact where the type widens. A device may round toward
  zero and clamp to the largest finite value instead (D3D11.3 §3.2.2, the format conversion rule):
  ``device_precision`` 1 ULP (WebNN's cast tolerance), which does not cover that clamp of values
  beyond float16's range.
- float to integer: toward zero where the value fits. Outside the range and for NaN, C++ leaves it
  undefined: ``"onnxruntime"`` is the host's C conversion (numpy's, which matched onnxruntime's on
  x86-64 for every pair of types, NaN and infinities included); ``"directml"`` is Direct3D's
  ``ftoi``/``ftou`` rule (my reading of D3D11.3 §22.13: NaN to 0, out-of-range values clamped to
  the integer range), applied to the 64-bit and narrower integers alike.
- integer to integer: two's complement, the low bits kept (onnxruntime's ``static_cast``;
  DirectML's page is silent), the same in both arithmetics.

Residual (pinned by tests): NaN payloads. onnxruntime's float32 -> float16 and float16 -> float32
casts quiet and shorten payloads differently in MLAS's vector and scalar loops; dml_ep keeps
numpy's NaN, compared as NaN.

No exact value: nothing is quantized.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.tensor_desc import view
from ..realep.placement import ON_DML
from .base import FLOATS, DevicePrecision, Operator, rules
from .element_wise_identity import BOOL, INTS_32, dml_type, moved_type
from .element_wise_unary_math import UnaryDesc
from .importing import Fallback, NodeContext, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_FIELDS = ("InputTensor", "OutputTensor")
_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (4, 4), FL.FL_3_1: (1, 8)}
_TYPES = {FL.FL_1_0: FLOATS | INTS_32, FL.FL_3_0: frozenset({DT.INT64, DT.UINT64}), FL.FL_4_1: frozenset({DT.FLOAT64})}
_FLOATS_ALL = frozenset({DT.FLOAT16, DT.FLOAT32, DT.FLOAT64})
_MANTISSA = {DT.FLOAT16: 11, DT.FLOAT32: 24, DT.FLOAT64: 53}  # significand bits: a float of fewer rounds


@dataclasses.dataclass(frozen=True)
class DML_CAST_OPERATOR_DESC(UnaryDesc):
    """CAST: each element converted to OutputTensor's data type, DML_FEATURE_LEVEL_1_0 and up."""

    OPERATOR_TYPE = OP.CAST
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: _TYPES for f in _FIELDS})
    SAME_TYPE = ()


# --- import from ONNX ------------------------------------------------------------------------


def cast(ctx: NodeContext) -> DmlNode:
    """Cast and CastLike: the output's type is ``to``, or target_type's."""
    source = dml_type(moved_type(ctx))
    target = ctx.info(1).dtype if ctx.node.op_type == "CastLike" else _onnx_type(ctx.attr("to"))
    if target == BOOL:
        raise Fallback("a Cast to bool is a graph of DirectML operators (CAST to UINT8, ELEMENT_WISE_CLIP1 [0, 1]; DmlOperatorCast.cpp); "
                       "dml_ep plans it as those only where the planner finds them both on DirectML before a run", ON_DML)
    if target is None or DT.from_numpy(target) == DT.UNKNOWN:
        raise Fallback(f"a Cast to {target}: the DML EP's row takes no such type", ON_DML)
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = DML_CAST_OPERATOR_DESC(InputTensor=tensor(source, sizes), OutputTensor=tensor(target, sizes))
    return ctx.dml_node(desc, ("InputTensor",), shape)


def _onnx_type(to) -> np.dtype | None:
    """Cast's ``to`` as a numpy type; None for one numpy lacks (string, bfloat16 and float8 have no DirectML type either)."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(to)))
    except (KeyError, TypeError, ValueError):
        return None


# --- kernel ----------------------------------------------------------------------------------


def cast_kernel(desc: DML_CAST_OPERATOR_DESC, tensors: dict, options, state: KernelState) -> np.ndarray:
    """The conversion the module docstring states, silently (its callers run kernels under one np.errstate)."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    target = desc.OutputTensor.DataType.numpy()
    if x.dtype.kind == "f" and target.kind in "iu" and not options.onnxruntime:
        return float_to_integer(x, target)
    return x.astype(target)


def float_to_integer(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Direct3D's ``ftoi``/``ftou``: toward zero, NaN to 0, clamped to ``target``'s range."""
    info = np.iinfo(target)
    wide = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
    out = np.where(wide <= info.min, info.min, np.where(wide >= info.max, info.max, 0)).astype(target)
    inside = (wide > info.min) & (wide < info.max)
    out[inside] = wide[inside].astype(target)
    return out


def exact(desc: DML_CAST_OPERATOR_DESC) -> bool:
    """Whether both arithmetics give one output for every input: all but float to integer."""
    return not (desc.InputTensor.DataType in _FLOATS_ALL and desc.OutputTensor.DataType not in _FLOATS_ALL)


ROUNDING = DevicePrecision("D3D11.3 §3.2.2: a conversion to a narrower float rounds toward zero (out-of-range finite values "
                           "clamp to the largest finite value); WebNN's conformance tolerance for cast: 1 ULP", ulp32=1, ulp16=1)


def device_precision(desc: DML_CAST_OPERATOR_DESC) -> DevicePrecision | None:
    """1 ULP where the conversion rounds (to a float of fewer significand bits than the input holds); else None."""
    target, source = desc.OutputTensor.DataType, desc.InputTensor.DataType
    if target not in _FLOATS_ALL:
        return None
    held = _MANTISSA.get(source, 8 * source.element_size - (source.name.startswith("INT")))
    return ROUNDING if held > _MANTISSA[target] else None


OPERATORS = (Operator(desc=DML_CAST_OPERATOR_DESC, kernel=cast_kernel, exact_value=None, exact_for_any_input=exact,
                      device_precision=device_precision),)
