"""DML_OPERATOR_ELEMENT_WISE_SQRT on float tensors (ONNX Sqrt 6 and 13): desc, import, kernel.

Import, as DmlOperatorElementWise.cpp builds its unary operators: input and output of the node's
shape, right-aligned to at least 4 dimensions, no ScaleBias. In an LLM or a transformer it is the
Sqrt of a decomposed RMS or layer norm (Pow -> ReduceMean -> Add -> Sqrt -> Div), which the DML EP
runs on DirectML.

Support per feature level (DML_ELEMENT_WISE_SQRT_OPERATOR_DESC's page): float32 and float16 from
DML_FEATURE_LEVEL_1_0; 4 dimensions, 4 to 5 from 2_0, 1 to 8 from 3_0.

Kernel: ``sqrt(x)`` in float32, rounded once to the tensor's type: IEEE's correctly rounded square
root, as onnxruntime's CPU Sqrt (Eigen) gives, so the two agree bit for bit; Direct3D allows a GPU
1 ULP (its ``sqrt``, WebNN's tolerance too). float16 through float32 is correctly rounded
(24 >= 2 * 11 + 2 bits). A negative input gives NaN, silently.

No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses
import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import view
from .base import FLOATS, DevicePrecision, Operator, rules
from .element_wise_unary_math import ScaledUnaryDesc, unary
from .importing import NodeContext
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}
_FIELDS = ("InputTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_SQRT_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_SQRT: ``Output = sqrt(Input * Scale + Bias)``; ``ScaleBias`` is DirectML's optional
    DML_SCALE_BIAS, a (Scale, Bias) pair or None (the DML EP leaves it null)."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_SQRT
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})


# --- import from ONNX ------------------------------------------------------------------------


def sqrt(ctx: NodeContext) -> DmlNode:
    """ONNX Sqrt on float32 or float16."""
    return unary(ctx, DML_ELEMENT_WISE_SQRT_OPERATOR_DESC)


# --- kernel ----------------------------------------------------------------------------------


def element_wise_sqrt(desc: DML_ELEMENT_WISE_SQRT_OPERATOR_DESC, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE, silently (its callers run kernels under one np.errstate)."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    x = source if desc.ScaleBias is None else source.astype(np.float32) * np.float32(desc.ScaleBias[0]) + np.float32(desc.ScaleBias[1])
    return np.sqrt(x, dtype=np.float32).astype(source.dtype, copy=False)


DEVICE_PRECISION = DevicePrecision("D3D11.3 §3.1.3.2 and §22.10.21: sqrt within 1 ULP; WebNN's sqrt tolerance 1 ULP (wpt webnn/resources/utils.js)",
                                   ulp32=1, ulp16=1)
OPERATORS = (Operator(desc=DML_ELEMENT_WISE_SQRT_OPERATOR_DESC, kernel=element_wise_sqrt, exact_value=None, device_precision=DEVICE_PRECISION),)
