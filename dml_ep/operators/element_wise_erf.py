"""DML_OPERATOR_ELEMENT_WISE_ERF on float tensors (ONNX Erf 9 and 13): desc, import, kernel.

Import, as DmlOperatorElementWise.cpp builds its unary operators (the real EP's Erf row,
OperatorRegistration.cpp, runs it as ELEMENT_WISE_ERF): input and output of the node's shape,
right-aligned to at least 4 dimensions, no ScaleBias. In a transformer encoder it is the Erf of a
GELU that onnxruntime's GeluFusion did not fuse.

Support per feature level (DML_ELEMENT_WISE_ERF_OPERATOR_DESC's page): from DML_FEATURE_LEVEL_2_0,
float32 and float16, 4 to 5 dimensions; 1 to 8 from 3_0.

Kernel:
- ``"directml"``: erf in float64 (``math.erf``, within an ulp of float64), rounded once to the
  tensor's type: DirectML states no precision for its erf; a device may be up to 1/1024 away in
  float32 and 1/512 in float16 (WebNN's erf tolerance, ``DEVICE_PRECISION``).
- ``"onnxruntime"``: onnxruntime's CPU Erf, MLAS's erf kernel
  (:func:`~dml_ep.numerics.kernels.mlas_transcendental.mlas_erf`), bit for bit on an x86-64 host
  with AVX-512F; a float16 Erf has no CPU kernel and runs in float32 between two Casts, so its
  output is that float32 value rounded to float16, which for every float16 input is the
  "directml" value too (MLAS's error stays below half a float16 ulp).

A float16 tensor of 1024 elements or more is a lookup in a table of all 65536 float16 values, made
once per ScaleBias and arithmetic.

No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import view
from ..numerics.kernels.mlas_transcendental import host_logistic_fused, mlas_erf
from .base import FLOATS, DevicePrecision, Operator, rules
from .element_wise_unary_math import ScaledUnaryDesc, unary
from .importing import NodeContext
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_DIMS = {FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}
_FIELDS = ("InputTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_ERF_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_ERF: ``Output = erf(Input * Scale + Bias)``; ``ScaleBias`` is DirectML's optional
    DML_SCALE_BIAS, a (Scale, Bias) pair or None (the DML EP leaves it null)."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_ERF
    INTRODUCED = FL.FL_2_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})


# --- import from ONNX ------------------------------------------------------------------------


def erf(ctx: NodeContext) -> DmlNode:
    """ONNX Erf on float32 or float16."""
    return unary(ctx, DML_ELEMENT_WISE_ERF_OPERATOR_DESC)


# --- kernel ----------------------------------------------------------------------------------

_erf = np.frompyfunc(math.erf, 1, 1)


def erf_float64(x: np.ndarray) -> np.ndarray:
    """erf of each value in float64 (numpy has none; ``math.erf`` is within an ulp of float64)."""
    return np.asarray(_erf(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def element_wise_erf(desc: DML_ELEMENT_WISE_ERF_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """erf of the input (after ScaleBias in float32), rounded once to the tensor's type; a large
    float16 tensor a lookup in the table of all 65536 float16 values (the same values, made once)."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    if source.dtype == np.float16 and source.size >= 1024:
        return _float16_table(desc.ScaleBias, arithmetic.onnxruntime)[source.view(np.uint16)]
    return _erf_of(source, desc.ScaleBias, arithmetic.onnxruntime)


def _erf_of(source: np.ndarray, scale_bias, onnxruntime: bool) -> np.ndarray:
    x = source.astype(np.float32)
    if scale_bias is not None:
        x = x * np.float32(scale_bias[0]) + np.float32(scale_bias[1])
    y = mlas_erf(x, host_logistic_fused()) if onnxruntime else erf_float64(x)
    return y.astype(source.dtype)


@functools.lru_cache(maxsize=8)
def _float16_table(scale_bias, onnxruntime: bool) -> np.ndarray:
    with np.errstate(all="ignore"):  # its NaNs and infinities
        return _erf_of(np.arange(65536, dtype=np.uint16).view(np.float16), scale_bias, onnxruntime)


DEVICE_PRECISION = DevicePrecision("WebNN's erf tolerance (wpt webnn/resources/utils.js): absolute 1/1024 in float32, 1/512 in float16",
                                   atol32=1 / 1024, atol16=1 / 512)

OPERATORS = (Operator(desc=DML_ELEMENT_WISE_ERF_OPERATOR_DESC, kernel=element_wise_erf, exact_value=None, device_precision=DEVICE_PRECISION),)
"""ONNX Erf on DML_OPERATOR_ELEMENT_WISE_ERF (``dml_ep/operators/element_wise_erf.py``): erf rounded
once in the "directml" arithmetic, MLAS's erf bit for bit in the "onnxruntime" one."""
