"""DML_OPERATOR_ELEMENT_WISE_EXP, _LOG, _ABS, _NEGATE, _RECIP, _FLOOR and _CEIL (ONNX Exp, Log, Abs, Neg,
Reciprocal, Floor, Ceil 6 and 13; floats, and signed integers for Abs and Neg): descs, import, kernel.

Import, as DmlOperatorElementWise.cpp's ``DmlOperatorElementwiseUnary`` (and DmlOperatorNeg.cpp's
NEGATE): input and output of the node's shape, right-aligned to at least 4 dimensions, no
ScaleBias. In a transformer encoder these are T5's relative-position buckets (an int64 Abs, Neg, Log,
Min) and the exp of a decomposed softmax or GELU; the DML EP runs every one on DirectML. dml_ep models
the float tensors and the DML EP's signed integer Abs and Neg (int8 to int64: exact, the most negative
value wrapping to itself in both arithmetics, as two's complement and onnxruntime's Eigen give).

Support per feature level (the DirectML pages): FLOAT32 and FLOAT16 from DML_FEATURE_LEVEL_1_0,
4 dimensions, 1 to 8 from 3_0 (EXP's, ABS's and CEIL's tables; LOG, RECIP and FLOOR taken as the same);
ABS adds INT32, INT16, INT8 at 2_1 and INT64 at 4_1; NEGATE is DML_FEATURE_LEVEL_5_0's (1 to 8
dimensions, the floats and INT64 to INT8).

Kernel, "directml": the function's value rounded once to the tensor's type (exp and log in float64,
a reciprocal as an IEEE float32 quotient); abs, negate, floor and ceil are exact. A device may
differ (``device_precision``): D3D's ``exp``/``log`` are base 2 with 2^-21 relative (log: absolute
on [0.5, 2]) error, WebNN's tolerances exp 32 ULP (float16 1), log 1/1024 absolute, reciprocal 2 ULP.

Kernel, "onnxruntime": its CPU kernels, bit for bit. Exp: MlasComputeExp (numerics/kernels/mlas_exp.py's
``mlas_exp``), the kernel the host's onnxruntime Exp runs measured once (``host_exp_lanes``): the FMA3 one on
x86-64 with AVX2 (onnxruntime 1.32 on an AVX-512 host gives that kernel's bits too), the SSE2 one before.
Log: Eigen's ``plog_float`` on packets, ``std::log`` on the tensor's last few elements
(``numerics/kernels/eigen_log.py``). Reciprocal: Eigen's ``cwiseInverse``, one IEEE division. Abs, Neg, Floor, Ceil: exact. float16: onnxruntime has no float16
kernel for these, so InsertCastTransformer runs them in float32 between two Casts; the float32
result rounded to float16 is what runs here, NaNs written as those Casts write them (``cast_to_float16``).

No exact value: they do not quantize.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, ClassVar, Optional

import numpy as np
from onnx import TensorProto, helper

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.graph import internal_model
from ..core.tensor_desc import view
from ..numerics.kernels.eigen_log import eigen_log
from ..numerics.kernels.mlas_exp import host_exp_lanes, mlas_exp
from ..ort.reference import cpu_session
from ..realep.placement import ON_DML_AS
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------

_DIMS = {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}
_FIELDS = ("InputTensor", "OutputTensor")
_SIGNED_SMALL = frozenset({DT.INT32, DT.INT16, DT.INT8})


@dataclasses.dataclass(frozen=True)
class UnaryDesc(OperatorDesc):
    """A one-input element-wise desc: ``Output = f(Input)``, both the same sizes and type."""

    InputTensor: TensorDesc
    OutputTensor: TensorDesc

    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})
    SAME_TYPE: ClassVar[tuple[tuple[str, ...], ...]] = (_FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        self.check_output_sizes("InputTensor")


@dataclasses.dataclass(frozen=True)
class ScaledUnaryDesc(UnaryDesc):
    """A unary desc with DirectML's optional DML_SCALE_BIAS: ``f(Input * Scale + Bias)``, a (Scale,
    Bias) pair or None (the DML EP leaves it null)."""

    ScaleBias: Optional[tuple[float, float]] = None


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_EXP_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_EXP: ``exp(x)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_EXP


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_LOG_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_LOG: ``log(x)``, natural."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_LOG


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_ABS_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_ABS: ``abs(x)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_ABS
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS},
                         {f: {FL.FL_1_0: FLOATS, FL.FL_2_1: _SIGNED_SMALL, FL.FL_4_1: frozenset({DT.INT64})} for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_NEGATE_OPERATOR_DESC(UnaryDesc):
    """ELEMENT_WISE_NEGATE: ``-x`` (no ScaleBias)."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_NEGATE
    INTRODUCED = FL.FL_5_0
    TENSOR_RULES = rules({f: (False, {FL.FL_5_0: (1, 8)}) for f in _FIELDS}, {f: FLOATS | _SIGNED_SMALL | {DT.INT64} for f in _FIELDS})


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_RECIP_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_RECIP: ``1 / x``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_RECIP


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_FLOOR_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_FLOOR: ``floor(x)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_FLOOR


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_CEIL_OPERATOR_DESC(ScaledUnaryDesc):
    """ELEMENT_WISE_CEIL: ``ceil(x)``."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_CEIL


# --- import from ONNX ------------------------------------------------------------------------


_FLOAT_TYPES = frozenset({np.dtype(np.float32), np.dtype(np.float16)})
_SIGNED_TYPES = _FLOAT_TYPES | frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))


def unary(ctx: NodeContext, desc_class, types=_FLOAT_TYPES, **fields) -> DmlNode:
    """A one-input node of ``types`` as ``desc_class`` (with ``fields`` beyond its two tensors), the
    node's shape right-aligned to 4-D."""
    dtype = ctx.info(0).dtype
    if dtype not in types:
        name = desc_class.OPERATOR_TYPE.name
        allowed = ", ".join(sorted(DT.from_numpy(t).name for t in types))
        raise Fallback(f"element type {dtype} is not modelled by dml_ep's {name} ({allowed})", ON_DML_AS.format(name))
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    return ctx.dml_node(desc_class(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes), **fields), ("InputTensor",), shape)


def exp(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_EXP_OPERATOR_DESC)


def log(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_LOG_OPERATOR_DESC)


def abs_(ctx: NodeContext) -> DmlNode:
    """Abs of floats and signed integers (T5's relative-position buckets take an int64 Abs)."""
    return unary(ctx, DML_ELEMENT_WISE_ABS_OPERATOR_DESC, _SIGNED_TYPES)


def neg(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_NEGATE_OPERATOR_DESC, _SIGNED_TYPES)


def reciprocal(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_RECIP_OPERATOR_DESC)


def floor(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_FLOOR_OPERATOR_DESC)


def ceil(ctx: NodeContext) -> DmlNode:
    return unary(ctx, DML_ELEMENT_WISE_CEIL_OPERATOR_DESC)


# --- kernel ----------------------------------------------------------------------------------


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return np.divide(np.float32(1), x, dtype=np.float32)


# Per desc: (the "directml" function, evaluated in float64 unless it is exact in float32; the "onnxruntime" one, on float32).
_FUNCTIONS: dict[type, tuple[Callable, Callable]] = {
    DML_ELEMENT_WISE_EXP_OPERATOR_DESC: (np.exp, lambda x: mlas_exp(x, host_exp_lanes())),
    DML_ELEMENT_WISE_LOG_OPERATOR_DESC: (np.log, eigen_log),
    DML_ELEMENT_WISE_ABS_OPERATOR_DESC: (np.abs, np.abs),
    DML_ELEMENT_WISE_NEGATE_OPERATOR_DESC: (np.negative, np.negative),
    DML_ELEMENT_WISE_RECIP_OPERATOR_DESC: (_reciprocal, _reciprocal),
    DML_ELEMENT_WISE_FLOOR_OPERATOR_DESC: (np.floor, np.floor),
    DML_ELEMENT_WISE_CEIL_OPERATOR_DESC: (np.ceil, np.ceil),
}
_IN_FLOAT64 = (DML_ELEMENT_WISE_EXP_OPERATOR_DESC, DML_ELEMENT_WISE_LOG_OPERATOR_DESC)


def element_wise_unary(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE, silently (its callers run kernels under one np.errstate): ``f(Input * Scale + Bias)``
    rounded to the tensor's type."""
    source = view(tensors["InputTensor"], desc.InputTensor)
    if source.dtype.kind == "i":  # Abs, Neg: two's complement, the most negative value wrapping to itself
        return _FUNCTIONS[type(desc)][0](source)
    x = source.astype(np.float32)
    scale_bias = getattr(desc, "ScaleBias", None)
    if scale_bias is not None:
        x = x * np.float32(scale_bias[0]) + np.float32(scale_bias[1])
    directml, onnxruntime = _FUNCTIONS[type(desc)]
    if not options.onnxruntime:
        return np.asarray(directml(x.astype(np.float64) if isinstance(desc, _IN_FLOAT64) else x)).astype(source.dtype, copy=False)
    y = np.asarray(onnxruntime(x), np.float32)
    return y if source.dtype == np.float32 else cast_to_float16(y)


def cast_to_float16(y: np.ndarray) -> np.ndarray:
    """onnxruntime's Cast of float32 ``y`` to float16 after a float16 node InsertCastTransformer runs in float32:
    rounded to nearest even; a NaN quieted with its payload's top bits (the conversion instruction, as the Cast
    in had quieted a signalling one) except in the last ``size % 8`` elements, which MLAS converts one by one
    to the sign and 0x7E00; on hosts without AVX2 (:func:`host_casts_nan_payloads` false) every element so."""
    half = y.astype(np.float16).reshape(-1)
    quieted = (half.view(np.uint16) | np.uint16(0x0200)).view(np.float16)
    canonical = ((half.view(np.uint16) & np.uint16(0x8000)) | np.uint16(0x7E00)).view(np.float16)
    tail = np.arange(half.size) >= (half.size - half.size % 8 if host_casts_nan_payloads() else 0)
    return np.where(np.isnan(half), np.where(tail, canonical, quieted), half).reshape(y.shape)


_NAN_PROBE = np.full(8, np.uint32(0x7FA12000)).view(np.float32)  # a NaN with a payload, one vector of eight


@functools.lru_cache(maxsize=1)
def host_casts_nan_payloads() -> bool:
    """Whether the host's onnxruntime casts float32 to float16 with MLAS's AVX2 kernel (platform.cpp's
    CastF32ToF16Kernel: ``vcvtps2ph`` keeps a NaN's payload) or, without AVX2, element by element
    (MLAS_Float2Half: the sign and 0x7E00), measured once on its Cast."""
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)], "cast_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [_NAN_PROBE.size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    y = cpu_session(internal_model(graph, 13), threads=1).run(None, {"x": _NAN_PROBE})[0]
    return bool(y.view(np.uint16)[0] != 0x7E00)


EXP = DevicePrecision("D3D11.3 §22.10.6: exp (2^x) within 2^-21 relative, natural exp built on it; WebNN's conformance tolerance "
                      "for exp: 32 ULP (float16 1)", ulp32=32, ulp16=1)
LOG = DevicePrecision("D3D11.3 §22.10.8: log (log2) within 2^-21 absolute on [0.5, 2], else relative; WebNN's conformance "
                      "tolerance for log: 1/1024 absolute", atol32=1 / 1024, atol16=1 / 1024)
RECIPROCAL = DevicePrecision("D3D11.3 §3.1.3.2, §22.10.18: a 1 ULP reciprocal (rcp 2^-21 relative); WebNN's conformance tolerance "
                             "for reciprocal: 2 ULP", ulp32=2, ulp16=2)
_PRECISION: dict[type, DevicePrecision] = {DML_ELEMENT_WISE_EXP_OPERATOR_DESC: EXP, DML_ELEMENT_WISE_LOG_OPERATOR_DESC: LOG, DML_ELEMENT_WISE_RECIP_OPERATOR_DESC: RECIPROCAL}

OPERATORS = tuple(Operator(desc=desc, kernel=element_wise_unary, exact_value=None, exact_for_any_input=desc not in _PRECISION,
                           device_precision=_PRECISION.get(desc)) for desc in _FUNCTIONS)
"""ONNX Exp, Log, Abs, Neg, Reciprocal, Floor, Ceil on their DirectML operators
(``dml_ep/operators/element_wise_unary_math.py``): Abs, Neg, Floor, Ceil exact in both
arithmetics; Exp, Log, Reciprocal bit-exact with onnxruntime's CPU kernels in the "onnxruntime"
arithmetic, float32 and float16."""
