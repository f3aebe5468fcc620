"""DML_OPERATOR_ACTIVATION_* (and ELEMENT_WISE_CLIP), as standalone or fused activations.

Each formula is DirectML's, as written on its DML_*_OPERATOR_DESC reference page
(learn.microsoft.com/windows/win32/api/directml/), evaluated in float32 (float16 tensors are
computed in float32 and rounded back once).
"""

from __future__ import annotations

import numpy as np

from .. import operator_descs as od
from ..tensor_desc import view


def _f32(value) -> np.float32:
    return np.float32(value)


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _ln_1_plus_exp(x):
    """ln(1 + exp(x)), without overflow for large x."""
    return np.logaddexp(np.float32(0), x)


_FORMULAS = {
    od.DML_ACTIVATION_ELU_OPERATOR_DESC: lambda x, d: _elu(x, _f32(d.Alpha)),
    od.DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC: lambda x, d: np.clip(_f32(d.Alpha) * x + _f32(d.Beta), 0, 1),
    od.DML_ACTIVATION_IDENTITY_OPERATOR_DESC: lambda x, d: x,
    od.DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC: lambda x, d: np.where(x >= 0, x, _f32(d.Alpha) * x),
    od.DML_ACTIVATION_LINEAR_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * x + _f32(d.Beta),
    od.DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * _ln_1_plus_exp(_f32(d.Beta) * x),
    od.DML_ACTIVATION_RELU_OPERATOR_DESC: lambda x, d: np.maximum(x, 0),
    od.DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC: lambda x, d: _f32(d.Gamma) * _elu(x, _f32(d.Alpha)),
    od.DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC: lambda x, d: _f32(d.Alpha) * np.tanh(_f32(d.Beta) * x),
    od.DML_ACTIVATION_SIGMOID_OPERATOR_DESC: lambda x, d: 1 / (1 + np.exp(-x)),
    od.DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC: lambda x, d: _ln_1_plus_exp(_f32(d.Steepness) * x) / _f32(d.Steepness),
    od.DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC: lambda x, d: x / (1 + np.abs(x)),
    od.DML_ACTIVATION_TANH_OPERATOR_DESC: lambda x, d: np.tanh(x),
    od.DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC: lambda x, d: np.where(x > _f32(d.Alpha), x, 0),
    od.DML_ACTIVATION_SHRINK_OPERATOR_DESC: lambda x, d: np.where(
        x > _f32(d.Threshold), x - _f32(d.Bias), np.where(x < -_f32(d.Threshold), x + _f32(d.Bias), 0)
    ),
    od.DML_ACTIVATION_CELU_OPERATOR_DESC: lambda x, d: np.maximum(x, 0)
    + np.minimum(0, _f32(d.Alpha) * np.expm1(x / _f32(d.Alpha))),
    od.DML_ELEMENT_WISE_CLIP_OPERATOR_DESC: lambda x, d: np.clip(
        x if d.ScaleBias is None else _f32(d.ScaleBias[0]) * x + _f32(d.ScaleBias[1]), _f32(d.Min), _f32(d.Max)
    ),
}


def apply_activation(activation: od.ActivationDesc, x: np.ndarray) -> np.ndarray:
    """The activation's formula on ``x``, keeping ``x``'s float dtype."""
    with np.errstate(over="ignore"):
        result = _FORMULAS[type(activation)](x.astype(np.float32), activation)
    return np.asarray(result, dtype=np.float32).astype(x.dtype, copy=False)


def activation(desc: od.ActivationDesc, tensors: dict, options, cache: dict) -> np.ndarray:
    """A standalone activation operator (InputTensor to OutputTensor)."""
    return apply_activation(desc, view(tensors["InputTensor"], desc.InputTensor)).reshape(desc.OutputTensor.Sizes)
