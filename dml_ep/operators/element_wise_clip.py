"""DML_OPERATOR_ELEMENT_WISE_CLIP (ONNX Clip 6) and _CLIP1 (Clip 11, 12, 13) on float tensors: descs,
import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseClip7`` and ``Clip11``: input and
output of the node's shape, right-aligned to at least 4 dimensions. Clip 6's ``min``/``max``
attributes (default float's lowest and largest) are CLIP's Min and Max; from Clip 11 they are inputs
1 and 2, required CPU constants, CLIP1's Min and Max in the tensor's type (MinMaxDataType), an absent
one -DBL_MAX or DBL_MAX clamped to the type. dml_ep models float tensors; the DML EP's integer
Clip 12 and 13 fall back. CLIP1 of UINT8 to [0, 1] is also the second part of the DML EP's Cast to
bool (com.microsoft.dml ``DmlClipToBool``, ``graphs/cast_to_bool.py``), its output the node's bool.

Support per feature level (the DirectML pages): CLIP from DML_FEATURE_LEVEL_1_0 (floats, 4
dimensions; 1 to 8 from 3_0), CLIP1 from 5_0 (1 to 8 dimensions, the floats and all integers).

Clip 6's CLIP is activation.py's desc and kernel (``np.clip``: NaN stays NaN, and a Min above Max
fails the desc's validation, as onnxruntime's Clip 6 refuses it).

Kernel of CLIP1: the page's ``max(Min, min(x, Max))`` ("directml", D3D's min/max: a NaN input gives Max),
onnxruntime's ``min(max(x, min), max)`` ("onnxruntime": NaN stays NaN; Eigen's cwiseMax then
cwiseMin). Both exact; they differ where Min > Max (DirectML gives Min, onnxruntime Max; onnxruntime's
Clip 6 refuses such a node) and for NaN.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .activation import DML_ELEMENT_WISE_CLIP_OPERATOR_DESC
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_FIELDS = ("InputTensor", "OutputTensor")
_ALL_TYPES = FLOATS | frozenset({DT.INT64, DT.INT32, DT.INT16, DT.INT8, DT.UINT64, DT.UINT32, DT.UINT16, DT.UINT8})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_CLIP1_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_CLIP1: ``max(Min, min(x * Scale + Bias, Max))``, Min and Max DML_SCALAR_UNIONs of
    MinMaxDataType (a DML_TENSOR_DATA_TYPE, the output's), held as Python numbers; ``ScaleBias`` null
    in the DML EP."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc
    ScaleBias: Optional[tuple[float, float]]
    MinMaxDataType: int
    Min: float
    Max: float

    OPERATOR_TYPE = OP.ELEMENT_WISE_CLIP1
    INTRODUCED = FL.FL_5_0
    TENSOR_RULES = rules({f: (False, {FL.FL_5_0: (1, 8)}) for f in _FIELDS}, {f: _ALL_TYPES for f in _FIELDS})
    SAME_TYPE = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("InputTensor")
        if self.MinMaxDataType != self.OutputTensor.DataType:
            self.fail(f"MinMaxDataType {self.MinMaxDataType} must be OutputTensor's {self.OutputTensor.DataType.name}", "MinMaxDataType")


# --- import from ONNX ------------------------------------------------------------------------

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))


def _float_input(ctx: NodeContext, real: str) -> tuple[np.dtype, tuple[int, ...], tuple[int, ...]]:
    dtype = ctx.info(0).dtype
    if dtype not in _FLOAT_TYPES:
        raise Fallback(f"element type {dtype} is not modelled by dml_ep's {real} (FLOAT32, FLOAT16)", ON_DML_AS.format(real))
    shape = ctx.shape(0)
    return dtype, shape, padded_sizes(shape)


def clip_6(ctx: NodeContext) -> DmlNode:
    """ONNX Clip 6: activation.py's ELEMENT_WISE_CLIP (the fusable activation's desc, run standalone) of
    the ``min``/``max`` attributes."""
    dtype, shape, sizes = _float_input(ctx, "ELEMENT_WISE_CLIP")
    finfo = np.finfo(np.float32)
    desc = DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes),
                                               Min=float(np.float32(ctx.attr("min", finfo.min))), Max=float(np.float32(ctx.attr("max", finfo.max))))
    return ctx.dml_node(desc, ("InputTensor",), shape)


def clip(ctx: NodeContext) -> DmlNode:
    """ONNX Clip 11 to 13: CLIP1 of the constant inputs 1 and 2 (absent: the type's extremes)."""
    dtype, shape, sizes = _float_input(ctx, "ELEMENT_WISE_CLIP1")
    finfo = np.finfo(dtype)
    bounds = []
    for index, default in ((1, finfo.min), (2, finfo.max)):
        value = ctx.parameter(index) if ctx.input_name(index) else None
        bounds.append(float(default if value is None else value.reshape(-1)[0].astype(dtype)))
    desc = DML_ELEMENT_WISE_CLIP1_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes), ScaleBias=None,
                                                MinMaxDataType=int(DT.from_numpy(dtype)), Min=bounds[0], Max=bounds[1])
    return ctx.dml_node(desc, ("InputTensor",), shape)


def clip_to_bool(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlClipToBool, a Cast to bool's second part: CLIP1 of its UINT8 input to [0, 1],
    bound to the node's bool output (DirectML's UINT8 holds an ONNX bool's bytes)."""
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = DML_ELEMENT_WISE_CLIP1_OPERATOR_DESC(InputTensor=tensor(np.uint8, sizes), OutputTensor=tensor(np.uint8, sizes), ScaleBias=None,
                                                MinMaxDataType=int(DT.UINT8), Min=0, Max=1)
    return ctx.dml_node(desc, ("InputTensor",), shape)


# --- kernel ----------------------------------------------------------------------------------


def element_wise_clip(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """Clamped to [Min, Max] as each arithmetic orders the two comparisons."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    x = source
    if desc.ScaleBias is not None:
        x = (source.astype(np.float32) * np.float32(desc.ScaleBias[0]) + np.float32(desc.ScaleBias[1])).astype(source.dtype)
    low, high = source.dtype.type(desc.Min), source.dtype.type(desc.Max)
    if options.onnxruntime:
        return np.minimum(np.maximum(x, low), high)
    return np.fmax(low, np.fmin(x, high))


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_CLIP1_OPERATOR_DESC, kernel=element_wise_clip, exact_value=None),)
"""ONNX Clip 11 to 13 on DML_OPERATOR_ELEMENT_WISE_CLIP1 (``dml_ep/operators/element_wise_clip.py``):
exact; the arithmetics differ for NaN and for Min > Max."""
