"""DML_OPERATOR_ACTIVATION_* and ELEMENT_WISE_CLIP: the activations, standalone or fused into
ELEMENT_WISE_ADD1 (CONVOLUTION, GEMM, ... in DirectML): descs, import of a fused activation and of
the standalone ones the DML EP builds (DmlOperatorActivation.cpp), kernels.

Each formula is DirectML's, as written on its DML_*_OPERATOR_DESC reference page
(learn.microsoft.com/windows/win32/api/directml/), evaluated in float32 (float16 tensors are
computed in float32 and rounded back once); ACTIVATION_RELU on integers (INT8, INT16, INT32 from
DML_FEATURE_LEVEL_5_1) is ``max(x, 0)`` in the input's type. Input/Output are null when fused.

Standalone, the DML EP runs ONNX Sigmoid, Tanh, Relu, LeakyRelu (float32, float16) and
com.microsoft Gelu as one activation each, input and output the node's shape right-aligned to at
least 4 dimensions (Relu also on int8, the one integer Relu dml_ep models; com.microsoft BiasGelu and
FastGelu are ELEMENT_WISE_ADD1 with a fused GELU, ``element_wise_add1.bias_gelu``); ACTIVATION_SIGMOID
is the middle of the three DirectML operators of com.microsoft QLinearSigmoid
(DmlOperatorQLinearSigmoid.cpp: ELEMENT_WISE_DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID in place on a
FLOAT32 intermediate -> ELEMENT_WISE_QUANTIZE_LINEAR), which ``qlinear_sigmoid.py`` splits into
those three, the sigmoid as the internal com.microsoft.dml ``DmlSigmoid``.

Kernels.
- ``"directml"``: the page's formula in float32: sigmoid ``1 / (1 + exp(-x))`` and tanh with
  numpy's float32 exp and tanh; GELU ``0.5 x (1 + erf(x / sqrt(2)))`` exactly (float64), rounded
  once. DirectML does not say how its exp, tanh and erf are computed: ``DEVICE_PRECISION`` holds,
  per operator, how far WebNN's conformance tests (set on DirectML) let a device be.
- ``"onnxruntime"``: onnxruntime's CPU kernel of the ONNX op, bit for bit on x86-64 with FMA3
  (``dml_ep.numerics.kernels.mlas_transcendental``): Sigmoid MLAS's logistic (also QLinearSigmoid's
  lookup table, qlinear_lookup_table.cc), Tanh MLAS's tanh, Gelu onnxruntime's float32 Gelu
  (MLAS's erf); Relu and LeakyRelu are exact (``max(x, 0)``; ``alpha * x`` in float32 below 0).
  A float16 node has no CPU kernel and runs in float32 between Casts (InsertCastTransformer), so
  its output is the float32 kernel's, rounded to float16; a float16 com.microsoft Gelu runs its
  schema's function body (1/sqrt(2) as a float16 constant). A host without FMA3 runs MLAS's
  generic kernels, one multiply and one add for each fused multiply-add (measured once).

No exact value: the activations do not quantize.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import DescValidationError
from ..core.tensor_desc import view
from ..numerics.kernels.mlas_transcendental import gelu_function_body, host_logistic_fused, mlas_gelu, mlas_logistic, mlas_tanh
from ..realep.placement import ON_CPU, ON_DML
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .element_wise_erf import erf_float64
from .importing import Fallback, NodeContext, broadcast, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- descs -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ActivationDesc(OperatorDesc):
    """Common base of DML_ACTIVATION_*_OPERATOR_DESC."""

    InputTensor: TensorDesc | None = None
    OutputTensor: TensorDesc | None = None
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    @property
    def fused(self) -> bool:
        return self.InputTensor is None and self.OutputTensor is None

    def validate(self, feature_level: FL = FL.FL_6_4) -> None:
        if self.fused:
            feature_level = FL.parse(feature_level)
            if feature_level < self.INTRODUCED:
                self.fail(f"requires {self.INTRODUCED} (target is {feature_level})")
            return
        super().validate(feature_level)


_ACTIVATION_RULES = rules(
    {"InputTensor": (False, {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}), "OutputTensor": (False, {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)})},
    {"InputTensor": FLOATS, "OutputTensor": FLOATS},
)


# ACTIVATION_RELU standalone also takes integers (sdk-api ns-directml-dml_activation_relu_operator_desc.md):
# 4-D FLOAT32/16 at FL 1_0, 4 to 5 dimensions from 2_0, 1 to 8 from 3_0, INT32, INT16 and INT8 from 5_1.
_RELU_DIMS = {FL.FL_1_0: (4, 4), FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}
_RELU_TYPES = {FL.FL_1_0: FLOATS, FL.FL_5_1: frozenset({DT.INT32, DT.INT16, DT.INT8})}
_RELU_RULES = rules({"InputTensor": (False, _RELU_DIMS), "OutputTensor": (False, _RELU_DIMS)},
                    {"InputTensor": _RELU_TYPES, "OutputTensor": _RELU_TYPES})


def _activation(name: str, op: OP, introduced: FL = FL.FL_1_0, tensor_rules=_ACTIVATION_RULES, **params):
    """Declare a DML_ACTIVATION_* desc class with its parameters (as float fields with defaults)."""
    fields = [(p, float, dataclasses.field(default=default)) for p, default in params.items()]
    cls = dataclasses.make_dataclass(
        name,
        fields,
        bases=(ActivationDesc,),
        frozen=True,
        namespace={"OPERATOR_TYPE": op, "INTRODUCED": introduced, "TENSOR_RULES": tensor_rules},
    )
    cls.__module__ = __name__
    cls.__doc__ = f"{op} (parameters: {', '.join(params) or 'none'})."
    return cls


DML_ACTIVATION_ELU_OPERATOR_DESC = _activation("DML_ACTIVATION_ELU_OPERATOR_DESC", OP.ACTIVATION_ELU, Alpha=1.0)
DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC", OP.ACTIVATION_HARD_SIGMOID, Alpha=0.2, Beta=0.5
)
DML_ACTIVATION_IDENTITY_OPERATOR_DESC = _activation("DML_ACTIVATION_IDENTITY_OPERATOR_DESC", OP.ACTIVATION_IDENTITY)
DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC", OP.ACTIVATION_LEAKY_RELU, Alpha=0.01
)
DML_ACTIVATION_LINEAR_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_LINEAR_OPERATOR_DESC", OP.ACTIVATION_LINEAR, Alpha=1.0, Beta=0.0
)
DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC", OP.ACTIVATION_PARAMETRIC_SOFTPLUS, Alpha=1.0, Beta=1.0
)
DML_ACTIVATION_RELU_OPERATOR_DESC = _activation("DML_ACTIVATION_RELU_OPERATOR_DESC", OP.ACTIVATION_RELU, tensor_rules=_RELU_RULES)
DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC", OP.ACTIVATION_SCALED_ELU, Alpha=1.67326319217681884765625, Gamma=1.05070102214813232421875
)
DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC", OP.ACTIVATION_SCALED_TANH, Alpha=1.0, Beta=1.0
)
DML_ACTIVATION_SIGMOID_OPERATOR_DESC = _activation("DML_ACTIVATION_SIGMOID_OPERATOR_DESC", OP.ACTIVATION_SIGMOID)
DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC", OP.ACTIVATION_SOFTPLUS, Steepness=1.0
)
DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC = _activation("DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC", OP.ACTIVATION_SOFTSIGN)
DML_ACTIVATION_TANH_OPERATOR_DESC = _activation("DML_ACTIVATION_TANH_OPERATOR_DESC", OP.ACTIVATION_TANH)
DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC", OP.ACTIVATION_THRESHOLDED_RELU, Alpha=1.0
)
DML_ACTIVATION_SHRINK_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SHRINK_OPERATOR_DESC", OP.ACTIVATION_SHRINK, FL.FL_2_0, Bias=0.0, Threshold=0.5
)
DML_ACTIVATION_CELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_CELU_OPERATOR_DESC", OP.ACTIVATION_CELU, FL.FL_3_0, Alpha=1.0
)
DML_ACTIVATION_GELU_OPERATOR_DESC = _activation("DML_ACTIVATION_GELU_OPERATOR_DESC", OP.ACTIVATION_GELU, FL.FL_5_1)


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(ActivationDesc):
    """ELEMENT_WISE_CLIP: clamp(x * Scale + Bias, Min, Max); fusable from DML_FEATURE_LEVEL_6_0.

    ``ScaleBias`` is DirectML's optional DML_SCALE_BIAS, here a (Scale, Bias) pair or None.
    """

    ScaleBias: Optional[tuple[float, float]] = None
    Min: float = float("-inf")
    Max: float = float("inf")
    OPERATOR_TYPE = OP.ELEMENT_WISE_CLIP
    TENSOR_RULES = _ACTIVATION_RULES

    def validate(self, feature_level: FL = FL.FL_6_4) -> None:
        if self.fused and FL.parse(feature_level) < FL.FL_6_0:
            self.fail(f"fusing requires {FL.FL_6_0} (target is {FL.parse(feature_level)})")
        super().validate(feature_level)
        if self.Min > self.Max:
            self.fail(f"Min {self.Min} is greater than Max {self.Max}")


FUSABLE_ACTIVATIONS = (
    DML_ACTIVATION_ELU_OPERATOR_DESC,
    DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC,
    DML_ACTIVATION_IDENTITY_OPERATOR_DESC,
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC,
    DML_ACTIVATION_LINEAR_OPERATOR_DESC,
    DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC,
    DML_ACTIVATION_RELU_OPERATOR_DESC,
    DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC,
    DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC,
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC,
    DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC,
    DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC,
    DML_ACTIVATION_TANH_OPERATOR_DESC,
    DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC,
    DML_ACTIVATION_SHRINK_OPERATOR_DESC,
    DML_ACTIVATION_CELU_OPERATOR_DESC,
    DML_ACTIVATION_GELU_OPERATOR_DESC,
    DML_ELEMENT_WISE_CLIP_OPERATOR_DESC,
)


# --- import: a fused node's activation -------------------------------------------------------


def validate_fused_activation(desc: OperatorDesc, feature_level: FL) -> None:
    """A desc's FusedActivation, if any: a fusable activation with null tensors, valid at the level."""
    activation = getattr(desc, "FusedActivation")
    if activation is None:
        return
    if not isinstance(activation, FUSABLE_ACTIVATIONS):
        desc.fail(f"{type(activation).__name__} cannot be fused", "FusedActivation")
    if not activation.fused:
        desc.fail("a fused activation must have null InputTensor and OutputTensor", "FusedActivation")
    try:
        activation.validate(feature_level)
    except DescValidationError as exc:
        desc.fail(str(exc), "FusedActivation")


# The DML EP's fused activations (OperatorUtility.cpp TryGetFusedActivationDesc): ONNX op -> the
# desc and its parameters, each ``(desc field, fused attribute, the DML EP's default)``.
_FUSED = {
    "Sigmoid": (DML_ACTIVATION_SIGMOID_OPERATOR_DESC, ()),
    "HardSigmoid": (DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC, (("Alpha", "fused_alpha", 0.2), ("Beta", "fused_beta", 0.5))),
    "Tanh": (DML_ACTIVATION_TANH_OPERATOR_DESC, ()),
    "Relu": (DML_ACTIVATION_RELU_OPERATOR_DESC, ()),
    "LeakyRelu": (DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC, (("Alpha", "fused_alpha", 0.01),)),
    "ThresholdedRelu": (DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC, (("Alpha", "fused_alpha", 1.0),)),
    "Elu": (DML_ACTIVATION_ELU_OPERATOR_DESC, (("Alpha", "fused_alpha", 1.0),)),
    "Selu": (DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC,
             (("Alpha", "fused_alpha", 1.67326319217681884765625), ("Gamma", "fused_gamma", 1.05070102214813232421875))),
    "Softsign": (DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC, ()),
    "Softplus": (DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC, ()),
}


def fused_activation(ctx: NodeContext):
    """The DirectML activation desc named by a fused node's ``fused_*`` attributes (None for a fused
    Dropout, which the DML EP fuses as nothing), its parameters float32 as the DML EP reads them."""
    activation = ctx.attr("fused_activation")
    if activation == "Dropout":
        return None
    if activation not in _FUSED:
        raise Fallback(f"fused activation {activation!r} is not modelled by dml_ep ({', '.join(_FUSED)})", ON_DML)
    desc, parameters = _FUSED[activation]
    return desc(**{field: float(np.float32(ctx.attr(name, default))) for field, name, default in parameters})


# --- import: the standalone activations ------------------------------------------------------


_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))


def _standalone(ctx: NodeContext, desc_type, types=_FLOAT_TYPES, **parameters) -> DmlNode:
    """A node of one of ``types`` as one activation: input and output of its shape, right-aligned to
    at least 4-D, parameters float32 as the DML EP reads them."""
    dtype = ctx.info(0).dtype
    if dtype not in types:
        raise Fallback(f"element type {dtype} is not supported by {desc_type.OPERATOR_TYPE} ({', '.join(map(str, types))})", ON_CPU)
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = desc_type(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes), **parameters)
    return ctx.dml_node(desc, ("InputTensor",), shape)


def relu(ctx: NodeContext) -> DmlNode:
    """ONNX Relu on float32, float16 and int8 (Relu-14) as ACTIVATION_RELU."""
    dtype = ctx.info(0).dtype
    if dtype in (np.dtype(np.int16), np.dtype(np.int32)):
        raise Fallback(f"{dtype} Relu is an integer operator dml_ep does not model (int8 only)", ON_DML)
    if dtype not in (*_FLOAT_TYPES, np.dtype(np.int8)):
        raise Fallback(f"{dtype} Relu: the DML EP registers Relu-14 for float16, float32, int8, int16, int32", ON_CPU)
    return _standalone(ctx, DML_ACTIVATION_RELU_OPERATOR_DESC, (*_FLOAT_TYPES, np.dtype(np.int8)))


def float_sigmoid(ctx: NodeContext) -> DmlNode:
    """ONNX Sigmoid as ACTIVATION_SIGMOID."""
    return _standalone(ctx, DML_ACTIVATION_SIGMOID_OPERATOR_DESC)


def tanh(ctx: NodeContext) -> DmlNode:
    """ONNX Tanh as ACTIVATION_TANH."""
    return _standalone(ctx, DML_ACTIVATION_TANH_OPERATOR_DESC)


def leaky_relu(ctx: NodeContext) -> DmlNode:
    """ONNX LeakyRelu as ACTIVATION_LEAKY_RELU, Alpha its ``alpha`` (default 0.01)."""
    return _standalone(ctx, DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC, Alpha=float(np.float32(ctx.attr("alpha", 0.01))))


def gelu(ctx: NodeContext) -> DmlNode:
    """com.microsoft Gelu as ACTIVATION_GELU (DML_FEATURE_LEVEL_5_1)."""
    return _standalone(ctx, DML_ACTIVATION_GELU_OPERATOR_DESC)


# --- import: ACTIVATION_SIGMOID in QLinearSigmoid --------------------------------------------


def sigmoid(ctx: NodeContext) -> DmlNode:
    """com.microsoft.dml DmlSigmoid (QLinearSigmoid's middle operator): the FLOAT32 intermediate,
    input and output of the output's shape, padded to at least 4 dimensions."""
    x_type, x_shape = ctx.info(0).dtype, ctx.info(0).shape
    if x_type != np.dtype(np.float32):
        raise Fallback(f"input type {x_type} is not supported (QLinearSigmoid's intermediate is FLOAT32)", ON_CPU)
    out_shape, sizes = broadcast(ctx, x_shape, x_shape)
    desc = DML_ACTIVATION_SIGMOID_OPERATOR_DESC(InputTensor=tensor(x_type, sizes), OutputTensor=tensor(x_type, sizes))
    return ctx.dml_node(desc, ("InputTensor",), out_shape)


# --- kernel ----------------------------------------------------------------------------------


def _f32(value) -> np.float32:
    return np.float32(value)


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _ln_1_plus_exp(x):
    """ln(1 + exp(x)), without overflow for large x."""
    return np.logaddexp(np.float32(0), x)


_FORMULAS = {
    DML_ACTIVATION_ELU_OPERATOR_DESC: lambda x, d: _elu(x, _f32(d.Alpha)),
    DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC: lambda x, d: np.clip(_f32(d.Alpha) * x + _f32(d.Beta), 0, 1),
    DML_ACTIVATION_IDENTITY_OPERATOR_DESC: lambda x, d: x,
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC: lambda x, d: np.where(x >= 0, x, _f32(d.Alpha) * x),
    DML_ACTIVATION_LINEAR_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * x + _f32(d.Beta),
    DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * _ln_1_plus_exp(_f32(d.Beta) * x),
    DML_ACTIVATION_RELU_OPERATOR_DESC: lambda x, d: np.where(x < 0, _f32(0), x),  # -0 and NaN pass, as onnxruntime's
    DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC: lambda x, d: _f32(d.Gamma) * _elu(x, _f32(d.Alpha)),
    DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * np.tanh(_f32(d.Beta) * x),
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC: lambda x, d: 1 / (1 + np.exp(-x)),
    DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC: lambda x, d: _ln_1_plus_exp(_f32(d.Steepness) * x) / _f32(d.Steepness),
    DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC: lambda x, d: x / (1 + np.abs(x)),
    DML_ACTIVATION_TANH_OPERATOR_DESC: lambda x, d: np.tanh(x),
    DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC: lambda x, d: np.where(x > _f32(d.Alpha), x, 0),
    DML_ACTIVATION_SHRINK_OPERATOR_DESC: lambda x, d: np.where(
        x > _f32(d.Threshold), x - _f32(d.Bias), np.where(x < -_f32(d.Threshold), x + _f32(d.Bias), 0)
    ),
    DML_ACTIVATION_CELU_OPERATOR_DESC: lambda x, d: np.maximum(x, 0)
    + np.minimum(0, _f32(d.Alpha) * np.expm1(x / _f32(d.Alpha))),
    DML_ACTIVATION_GELU_OPERATOR_DESC: lambda x, d: _gelu_float64(x),
    DML_ELEMENT_WISE_CLIP_OPERATOR_DESC: lambda x, d: np.clip(
        x if d.ScaleBias is None else _f32(d.ScaleBias[0]) * x + _f32(d.ScaleBias[1]), _f32(d.Min), _f32(d.Max)
    ),
}


def _gelu_float64(x: np.ndarray) -> np.ndarray:
    """GELU's exact value in float64, which the caller rounds once to the tensor's type."""
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1 + erf_float64(x64 / np.sqrt(2.0)))


def _onnxruntime_gelu(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return (gelu_function_body if dtype == np.float16 else mlas_gelu)(x, host_logistic_fused())


# onnxruntime's CPU kernel of the ONNX op a standalone activation imports, where it is not the formula's float32
# value, on float32 ``x`` (a float16 node runs in float32 between Casts): ``kernel(x, the tensor's dtype)``.
_ONNXRUNTIME = {
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC: lambda x, dtype: mlas_logistic(x, host_logistic_fused()),
    DML_ACTIVATION_TANH_OPERATOR_DESC: lambda x, dtype: mlas_tanh(x, host_logistic_fused()),
    DML_ACTIVATION_GELU_OPERATOR_DESC: _onnxruntime_gelu,
}


def apply_activation(activation: ActivationDesc, x: np.ndarray, arithmetic=None, dtype=None) -> np.ndarray:
    """The activation's formula on ``x``, rounded once to ``dtype`` (``x``'s by default: a fused
    activation of a float16 operator gets its float32 sum); given the ``"onnxruntime"`` arithmetic,
    onnxruntime's CPU kernel where it is not the formula's value."""
    onnxruntime = arithmetic is not None and arithmetic.onnxruntime
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if x.dtype == dtype == np.float16 and type(activation) in _TABULATED:
        key = (_parameters(activation), onnxruntime)
        evaluated = _EVALUATED[key] = _EVALUATED.get(key, 0) + x.size
        if x.size >= _TABLE_FROM or evaluated >= _TABLE_AFTER:
            return _float16_table(*key)[x.view(np.uint16)]
    return _evaluate(activation, x, onnxruntime, dtype)


def _evaluate(activation: ActivationDesc, x: np.ndarray, onnxruntime: bool, dtype) -> np.ndarray:
    kernel = _ONNXRUNTIME.get(type(activation)) if onnxruntime else None
    with np.errstate(over="ignore", invalid="ignore"):
        if kernel is not None:
            result = kernel(x.astype(np.float32), x.dtype)
        else:
            result = _FORMULAS[type(activation)](x.astype(np.float32), activation)
    return np.asarray(result).astype(dtype, copy=False)


# A float16 tensor of the costly activations (MLAS's emulations, float64 erf) is a lookup in a table of all
# 65536 float16 values, made once per activation and arithmetic: an LLM's SiLU or an encoder's GELU runs
# in microseconds, not milliseconds. Each entry is the function of one value, so the two agree bit for bit.
_TABULATED = (DML_ACTIVATION_SIGMOID_OPERATOR_DESC, DML_ACTIVATION_TANH_OPERATOR_DESC, DML_ACTIVATION_GELU_OPERATOR_DESC)
_TABLE_FROM = 1024  # elements; smaller tensors compute directly
_TABLE_AFTER = 4096  # ... until that many were (an LLM's decode steps: a few hundred each, at every step)
_EVALUATED: dict = {}  # elements computed directly per activation and arithmetic
_ALL_FLOAT16 = np.arange(65536, dtype=np.uint16).view(np.float16)


def _parameters(activation: ActivationDesc) -> ActivationDesc:
    """The activation without its tensors: what its values depend on."""
    return activation if activation.fused else dataclasses.replace(activation, InputTensor=None, OutputTensor=None)


@functools.lru_cache(maxsize=16)
def _float16_table(activation: ActivationDesc, onnxruntime: bool) -> np.ndarray:
    with np.errstate(all="ignore"):  # its NaNs and infinities
        return _evaluate(activation, _ALL_FLOAT16, onnxruntime, np.float16)


def activation(desc: ActivationDesc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """A standalone activation operator (InputTensor to OutputTensor); ACTIVATION_RELU on
    integers is ``max(x, 0)`` in the input's type."""
    assert desc.InputTensor is not None and desc.OutputTensor is not None  # null only in a fused activation
    x = view(tensors["InputTensor"], desc.InputTensor)
    if x.dtype.kind in "iu":  # only RELU takes integers
        return np.maximum(x, x.dtype.type(0)).reshape(desc.OutputTensor.Sizes)
    return apply_activation(desc, x, arithmetic).reshape(desc.OutputTensor.Sizes)


def _webnn(name: str, ulp32: int, ulp16: int) -> DevicePrecision:
    return DevicePrecision(f"WebNN's {name} tolerance (wpt webnn/resources/utils.js, set on DirectML): {ulp32} ULP in float32, "
                           f"{ulp16} in float16", ulp32=ulp32, ulp16=ulp16)


# How far a device may put each activation from the point value; none for those WebNN holds exact (relu, clip, identity).
DEVICE_PRECISION = {
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC: _webnn("sigmoid", 34, 10),
    DML_ACTIVATION_TANH_OPERATOR_DESC: _webnn("tanh", 16, 16),
    DML_ACTIVATION_GELU_OPERATOR_DESC: _webnn("gelu", 18, 18),
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC: _webnn("leakyRelu", 1, 2),
    DML_ACTIVATION_ELU_OPERATOR_DESC: _webnn("elu", 18, 18),
    DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC: _webnn("softplus", 18, 18),
    DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC: _webnn("softsign", 3, 3),
    DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC: _webnn("hardSigmoid", 2, 2),
    DML_ACTIVATION_LINEAR_OPERATOR_DESC: _webnn("linear", 2, 2),
}
_EXACT_FUSED = (DML_ACTIVATION_RELU_OPERATOR_DESC, DML_ACTIVATION_IDENTITY_OPERATOR_DESC, DML_ELEMENT_WISE_CLIP_OPERATOR_DESC)


def with_fused_activation(precision: DevicePrecision | None, activation: ActivationDesc | None) -> DevicePrecision | None:
    """An operator's envelope with its fused activation's added, as WebNN sums a graph's per-operator
    tolerances; None where the activation has none (and is not exact: relu, identity, clip)."""
    if activation is None or type(activation) in _EXACT_FUSED:
        return precision
    extra = DEVICE_PRECISION.get(type(activation))
    if precision is None or extra is None:
        return None
    return DevicePrecision(f"{precision.rule} + {extra.rule}", precision.ulp32 + extra.ulp32, precision.ulp16 + extra.ulp16,
                           precision.atol32 + extra.atol32, precision.atol16 + extra.atol16)


# Every arithmetic gives max(x, 0) (integers and floats, NaN passing) and x or float32(alpha * x).
EXACT = (DML_ACTIVATION_RELU_OPERATOR_DESC, DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC)

OPERATORS = tuple(Operator(desc=cls, kernel=activation, exact_value=None, exact_for_any_input=cls in EXACT,
                           device_precision=DEVICE_PRECISION.get(cls)) for cls in FUSABLE_ACTIVATIONS)
