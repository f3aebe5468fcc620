"""DML_OPERATOR_ELEMENT_WISE_IS_NAN (ONNX IsNaN 9, 13, 20 of float tensors): desc, import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseUnary``: input and output of the
node's shape, right-aligned to at least 4 dimensions, the bool output described as UINT8 holding 1
or 0. BERT exports (torch's masked_fill of the attention scores) send IsNaN to DirectML.

Support per feature level (the DirectML page): DML_FEATURE_LEVEL_2_0, InputTensor FLOAT32 or FLOAT16,
OutputTensor UINT32 or UINT8; 4 dimensions, 1 to 8 from 3_0.

Kernel: 1 where the input is a NaN, exact in both arithmetics (onnxruntime's CPU IsNaN is
``std::isnan``; its float16 one reads the bits).
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
from .element_wise_unary_math import UnaryDesc
from .importing import Fallback, NodeContext, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

_DIMS = {FL.FL_2_0: (4, 4), FL.FL_3_0: (1, 8)}


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC(UnaryDesc):
    """ELEMENT_WISE_IS_NAN: ``Output = isnan(Input) ? 1 : 0``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_IS_NAN
    INTRODUCED = FL.FL_2_0
    TENSOR_RULES = rules({"InputTensor": (False, _DIMS), "OutputTensor": (False, _DIMS)},
                         {"InputTensor": FLOATS, "OutputTensor": frozenset({DT.UINT32, DT.UINT8})})
    SAME_TYPE = ()


def is_nan(ctx: NodeContext) -> DmlNode:
    """ONNX IsNaN of float32 or float16, a bool output as UINT8."""
    dtype = ctx.info(0).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"element type {dtype} is not supported by ELEMENT_WISE_IS_NAN (FLOAT32, FLOAT16)", ON_DML_AS.format("ELEMENT_WISE_IS_NAN"))
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(np.uint8, sizes))
    return ctx.dml_node(desc, ("InputTensor",), shape)


def element_wise_is_nan(desc: DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC, tensors: dict, options, state: KernelState) -> np.ndarray:
    """1 or 0 as ONNX bool (the bytes the DML EP's UINT8 output holds)."""
    return np.isnan(view(tensors["InputTensor"], desc.InputTensor))


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_IS_NAN_OPERATOR_DESC, kernel=element_wise_is_nan, exact_value=None, exact_for_any_input=True),)
"""ONNX IsNaN on DML_OPERATOR_ELEMENT_WISE_IS_NAN (``dml_ep/operators/element_wise_is_nan.py``): exact."""
