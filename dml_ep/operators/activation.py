"""DML_OPERATOR_ACTIVATION_* and ELEMENT_WISE_CLIP: the activations, standalone or fused into
ELEMENT_WISE_ADD1 (CONVOLUTION, GEMM, ... in DirectML): descs, import of a fused activation and
of a standalone int8 Relu (ONNX Relu-14; float Relu is a float operator dml_ep does not model), kernel.

Each formula is DirectML's, as written on its DML_*_OPERATOR_DESC reference page
(learn.microsoft.com/windows/win32/api/directml/), evaluated in float32 (float16 tensors are
computed in float32 and rounded back once); ACTIVATION_RELU on integers (INT8, INT16, INT32 from
DML_FEATURE_LEVEL_5_1) is ``max(x, 0)`` in the input's type. Input/Output are null when fused.

Standalone, dml_ep plans one activation: ACTIVATION_SIGMOID, the middle of the three DirectML
operators the DML EP builds for com.microsoft QLinearSigmoid (DmlOperatorQLinearSigmoid.cpp:
ELEMENT_WISE_DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID in place on a FLOAT32 intermediate ->
ELEMENT_WISE_QUANTIZE_LINEAR). ``qlinear_sigmoid.py`` splits the node into those three, the
sigmoid as the internal com.microsoft.dml ``DmlSigmoid``. A float Sigmoid a model brings is not registered: on
DirectML in the real EP, not modelled.

ACTIVATION_SIGMOID's kernel.
- ``"directml"``: the page's ``1 / (1 + exp(-x))`` in float32 (numpy's exp). DirectML's GPU exp is
  not specified, so this is where dml_ep and a real GPU may differ by an ulp, and the codes
  QUANTIZE_LINEAR makes of it where a value sits near a rounding boundary.
- ``"onnxruntime"``: onnxruntime's CPU QLinearSigmoid dequantizes the 256 codes, runs them through
  MlasComputeLogistic and quantizes the table (qlinear_lookup_table.cc): the same three steps,
  element by element. MlasComputeLogistic on x86-64 with AVX2 is MlasLogisticKernelFma3
  (LogisticKernelFma3.S): x clamped to [-18, 18] (``maxps``/``minps``: NaN passes), Eigen's
  rational polynomial ``x * p(x^2) / q(x^2) + 0.5`` with every multiply-add fused, then clamped
  below at 0. :func:`mlas_logistic` emulates it bit for bit (checked against onnxruntime's float
  Sigmoid, which calls the same routine). The generic SSE kernel (no FMA3) rounds each multiply
  and add and also clamps at 1: not modelled.

No exact value: the activations do not quantize.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np
from onnx import TensorProto, helper

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import DescValidationError
from ..core.graph import internal_model
from ..core.tensor_desc import view
from ..numerics.kernels.float32_fma import fma32
from ..ort.reference import cpu_session
from ..realep.placement import ON_CPU, ON_DML
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
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


# --- import: a standalone Relu -----------------------------------------------------------------


def relu(ctx: NodeContext) -> DmlNode:
    """ONNX Relu on int8 (Relu-14) as ACTIVATION_RELU; the input right-aligned to at least 4-D."""
    dtype = ctx.info(0).dtype
    if dtype in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"float Relu (input {dtype}) is a float operator", ON_DML)
    if dtype in (np.dtype(np.int16), np.dtype(np.int32)):
        raise Fallback(f"{dtype} Relu is an integer operator dml_ep does not model (int8 only)", ON_DML)
    if dtype != np.dtype(np.int8):
        raise Fallback(f"{dtype} Relu: the DML EP registers Relu-14 for float16, float32, int8, int16, int32", ON_CPU)
    shape = ctx.shape(0)
    sizes = padded_sizes(shape)
    desc = DML_ACTIVATION_RELU_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes))
    return ctx.dml_node(desc, ("InputTensor",), shape)


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
    DML_ACTIVATION_RELU_OPERATOR_DESC: lambda x, d: np.maximum(x, 0),
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
    DML_ELEMENT_WISE_CLIP_OPERATOR_DESC: lambda x, d: np.clip(
        x if d.ScaleBias is None else _f32(d.ScaleBias[0]) * x + _f32(d.ScaleBias[1]), _f32(d.Min), _f32(d.Max)
    ),
}


def apply_activation(activation: ActivationDesc, x: np.ndarray) -> np.ndarray:
    """The activation's formula on ``x``, keeping ``x``'s float dtype."""
    with np.errstate(over="ignore"):
        result = _FORMULAS[type(activation)](x.astype(np.float32), activation)
    return np.asarray(result, dtype=np.float32).astype(x.dtype, copy=False)


# MlasLogisticConstants (mlas/lib/logistic.cpp), in the order LogisticKernelFma3.S uses them.
_LOGISTIC = np.array([-18.0, 18.0, 4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                      2.48287947061529e-01, 6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                      1.16817656904453e-01, 9.93151921023180e-01, 0.5], dtype=np.float32)


def mlas_logistic(x: np.ndarray, fused: bool = True) -> np.ndarray:
    """MlasLogisticKernelFma3 on float32 ``x``: clamp to [-18, 18] (NaN passes), ``x2 = x * x``,
    ``p = x * (((a9 x2 + a7) x2 + a5) x2 + a3) x2 + a1)``, ``q = ((((b10 x2 + b8) x2 + b6) x2 + b4)
    x2 + b2) x2 + b0`` with every multiply-add one rounding (``vfmadd``), ``p / q + 0.5``, clamped
    below at 0 (``maxps(0, r)``: NaN passes). ``fused=False``: MLAS's generic kernel, which x86-64
    CPUs without FMA3 run, each multiply-add a multiply, then an add (two roundings)."""
    low, high, a9, a7, a5, a3, a1, b10, b8, b6, b4, b2, b0, half = _LOGISTIC
    x = np.asarray(x, dtype=np.float32)
    v = np.where(x < low, low, np.where(x > high, high, x))
    x2 = np.multiply(v, v, dtype=np.float32)
    multiply_add = fma32 if fused else _multiply_then_add
    p = multiply_add(x2, a9, a7)
    for alpha in (a5, a3, a1):
        p = multiply_add(p, x2, alpha)
    q = multiply_add(x2, b10, b8)
    for beta in (b6, b4, b2, b0):
        q = multiply_add(q, x2, beta)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.add(np.divide(np.multiply(v, p, dtype=np.float32), q, dtype=np.float32), half, dtype=np.float32)
    return np.where(r < 0, np.float32(0), r).reshape(x.shape)


def _multiply_then_add(x, y, z) -> np.ndarray:
    return np.add(np.multiply(x, y, dtype=np.float32), z, dtype=np.float32)


# Inputs whose logistic MLAS's FMA3 kernel and its generic one round apart (0 against 2^-24 or 2^-25).
_FUSION_PROBE = np.array([-17.9982, -17.9964, -17.9946, -17.9910, -17.9892, -17.9874, -17.9838, -17.9820], np.float32)


@functools.lru_cache(maxsize=1)
def host_logistic_fused() -> bool:
    """Whether the host's onnxruntime runs MLAS's FMA3 logistic kernel (x86-64 with FMA3 and AVX2)
    rather than its generic one (older x86-64 CPUs), measured once on its Sigmoid: CPU flags would
    only guess MLAS's choice."""
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "logistic_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(_FUSION_PROBE)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    y = cpu_session(internal_model(graph, 13), threads=1).run(None, {"x": _FUSION_PROBE})[0]
    return bool(np.array_equal(y, mlas_logistic(_FUSION_PROBE)))


def activation(desc: ActivationDesc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """A standalone activation operator (InputTensor to OutputTensor); ACTIVATION_RELU on
    integers is ``max(x, 0)`` in the input's type; ACTIVATION_SIGMOID in ``"onnxruntime"``
    arithmetic is MLAS's logistic kernel (:func:`mlas_logistic`)."""
    assert desc.InputTensor is not None and desc.OutputTensor is not None  # null only in a fused activation
    x = view(tensors["InputTensor"], desc.InputTensor)
    if x.dtype.kind in "iu":  # only RELU takes integers
        return np.maximum(x, x.dtype.type(0)).reshape(desc.OutputTensor.Sizes)
    if arithmetic.onnxruntime and type(desc) is DML_ACTIVATION_SIGMOID_OPERATOR_DESC and x.dtype == np.float32:
        return mlas_logistic(x, host_logistic_fused()).reshape(desc.OutputTensor.Sizes)
    return apply_activation(desc, x).reshape(desc.OutputTensor.Sizes)


# Only ACTIVATION_RELU runs standalone on integers (int8), where every arithmetic gives max(x, 0).
OPERATORS = tuple(Operator(desc=cls, kernel=activation, exact_value=None, exact_for_any_input=cls is DML_ACTIVATION_RELU_OPERATOR_DESC)
                  for cls in FUSABLE_ACTIVATIONS)
