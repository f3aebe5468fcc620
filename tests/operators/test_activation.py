"""The activation kernels against DirectML's formulas and onnxruntime's single-node outputs.

Each expected value is the formula on the activation's DirectML reference page
(learn.microsoft.com/windows/win32/api/directml/ns-directml-dml_activation_*_operator_desc and
ns-directml-dml_element_wise_clip_operator_desc), written out here in float64 with ``math``.
Parameters are non-default and exactly representable, so a kernel that ignores or misplaces one
fails.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dml_ep.core.enums import DML_TENSOR_DATA_TYPE
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.engines import get_engine
from dml_ep.operators import activation as od
from dml_ep.operators.activation import apply_activation
from dml_ep.operators.dispatch import run_kernel
from dml_ep.operators.kernel_state import KernelState
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

# Negative (large and small), zero, positive, large; each exact in float16 as well as float32.
X = np.array([-20.0, -1.5, -0.25, 0.0, 0.75, 3.0, 50.0], np.float32)

CASES = {
    "ELU": (od.DML_ACTIVATION_ELU_OPERATOR_DESC(Alpha=0.5), lambda x: x if x >= 0 else 0.5 * (math.exp(x) - 1)),
    "HARD_SIGMOID": (
        od.DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC(Alpha=0.25, Beta=0.375),
        lambda x: max(0.0, min(0.25 * x + 0.375, 1.0)),
    ),
    "IDENTITY": (od.DML_ACTIVATION_IDENTITY_OPERATOR_DESC(), lambda x: x),
    "LEAKY_RELU": (od.DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC(Alpha=0.125), lambda x: x if x >= 0 else 0.125 * x),
    "LINEAR": (od.DML_ACTIVATION_LINEAR_OPERATOR_DESC(Alpha=-1.5, Beta=0.5), lambda x: -1.5 * x + 0.5),
    "PARAMETRIC_SOFTPLUS": (
        od.DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC(Alpha=2.0, Beta=3.0),
        lambda x: 2.0 * math.log1p(math.exp(3.0 * x)),
    ),
    "RELU": (od.DML_ACTIVATION_RELU_OPERATOR_DESC(), lambda x: max(0.0, x)),
    "SCALED_ELU": (
        od.DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC(Alpha=1.5, Gamma=2.0),
        lambda x: 2.0 * x if x > 0 else 2.0 * (1.5 * math.exp(x) - 1.5),
    ),
    "SCALED_TANH": (od.DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC(Alpha=1.5, Beta=0.5), lambda x: 1.5 * math.tanh(0.5 * x)),
    "SIGMOID": (od.DML_ACTIVATION_SIGMOID_OPERATOR_DESC(), lambda x: 1 / (1 + math.exp(-x))),
    "SOFTPLUS": (od.DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC(Steepness=2.0), lambda x: math.log1p(math.exp(2.0 * x)) / 2.0),
    "SOFTSIGN": (od.DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC(), lambda x: x / (1 + abs(x))),
    "TANH": (od.DML_ACTIVATION_TANH_OPERATOR_DESC(), lambda x: (1 - math.exp(-2 * x)) / (1 + math.exp(-2 * x))),
    "THRESHOLDED_RELU": (od.DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC(Alpha=0.75), lambda x: x if x > 0.75 else 0.0),
    "SHRINK": (
        od.DML_ACTIVATION_SHRINK_OPERATOR_DESC(Bias=0.25, Threshold=0.75),
        lambda x: x - 0.25 if x > 0.75 else x + 0.25 if x < -0.75 else 0.0,
    ),
    "CELU": (
        od.DML_ACTIVATION_CELU_OPERATOR_DESC(Alpha=0.5),
        lambda x: max(0.0, x) + min(0.0, 0.5 * (math.exp(x / 0.5) - 1)),
    ),
    "CLIP": (
        od.DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(ScaleBias=(2.0, -1.0), Min=-2.0, Max=4.0),
        lambda x: max(-2.0, min(2.0 * x - 1.0, 4.0)),
    ),
    "CLIP without ScaleBias": (
        od.DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(Min=-0.5, Max=2.0),
        lambda x: max(-0.5, min(x, 2.0)),
    ),
}
cases = pytest.mark.parametrize("desc, formula", CASES.values(), ids=CASES.keys())


def expected(formula, x: np.ndarray) -> np.ndarray:
    """The formula on each value in float64, rounded once to ``x``'s dtype."""
    return np.array([formula(float(value)) for value in x.reshape(-1)]).reshape(x.shape).astype(x.dtype)


def test_every_fusable_activation_has_a_case():
    assert {type(desc) for desc, _ in CASES.values()} == set(od.FUSABLE_ACTIVATIONS)


@cases
def test_fused_formula(desc, formula):
    actual = apply_activation(desc, X)
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected(formula, X), rtol=1e-6)


@cases
@pytest.mark.parametrize("dtype, data_type, rtol", [
    (np.float32, DML_TENSOR_DATA_TYPE.FLOAT32, 1e-6),
    (np.float16, DML_TENSOR_DATA_TYPE.FLOAT16, 2**-10),  # float32 result rounded to float16: 1 ulp at most
], ids=["float32", "float16"])  # fmt: skip
def test_standalone_operator(desc, formula, dtype, data_type, rtol):
    """InputTensor is read through its desc (a stride of 0 repeats the 7 values on 2 rows); a
    float16 tensor gives a float16 output."""
    standalone = dataclasses.replace(
        desc,
        InputTensor=DML_BUFFER_TENSOR_DESC.create(data_type, (1, 1, 2, X.size), strides=(0, 0, 0, 1)),
        OutputTensor=DML_BUFFER_TENSOR_DESC.create(data_type, (1, 1, 2, X.size)),
    )
    standalone.validate()
    actual = run_kernel(standalone, {"InputTensor": X.astype(dtype)}, Arithmetic("directml"), get_engine(), KernelState())
    assert actual.dtype == dtype and actual.shape == (1, 1, 2, X.size)
    np.testing.assert_allclose(actual, np.broadcast_to(expected(formula, X.astype(dtype)), actual.shape), rtol=rtol)


# ONNX node (op type, attributes) with the same function as a DirectML activation.
ONNX_EQUIVALENTS = [
    ("Relu", {}, od.DML_ACTIVATION_RELU_OPERATOR_DESC()),
    ("LeakyRelu", {"alpha": 0.125}, od.DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC(Alpha=0.125)),
    ("Elu", {"alpha": 0.5}, od.DML_ACTIVATION_ELU_OPERATOR_DESC(Alpha=0.5)),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}, od.DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC(Alpha=1.5, Gamma=2.0)),
    ("Sigmoid", {}, od.DML_ACTIVATION_SIGMOID_OPERATOR_DESC()),
    ("Tanh", {}, od.DML_ACTIVATION_TANH_OPERATOR_DESC()),
    ("Softplus", {}, od.DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC(Steepness=1.0)),
    ("Softplus", {}, od.DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC(Alpha=1.0, Beta=1.0)),
    ("Softsign", {}, od.DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC()),
    ("HardSigmoid", {"alpha": 0.25, "beta": 0.375}, od.DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC(Alpha=0.25, Beta=0.375)),
    ("ThresholdedRelu", {"alpha": 0.75}, od.DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC(Alpha=0.75)),
    ("Celu", {"alpha": 0.5}, od.DML_ACTIVATION_CELU_OPERATOR_DESC(Alpha=0.5)),
    ("Shrink", {"bias": 0.25, "lambd": 0.75}, od.DML_ACTIVATION_SHRINK_OPERATOR_DESC(Bias=0.25, Threshold=0.75)),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize(
    "op_type, attributes, desc", ONNX_EQUIVALENTS, ids=[f"{op}-{desc.OPERATOR_TYPE.name}" for op, _, desc in ONNX_EQUIVALENTS]
)
def test_matches_onnxruntime(op_type, attributes, desc):
    model, feeds = single_node_model(op_type, [Feed(X)], np.float32, 1, **attributes)
    reference = cpu_session(model, threads=1).run(None, feeds)[0]
    # atol: onnxruntime's Sigmoid (MLAS's logistic approximation) is accurate to about 1e-7
    # absolute, not relative: it returns 0 for x <= -18, where the formula gives 2e-9 at -20.
    np.testing.assert_allclose(apply_activation(desc, X), reference, rtol=1e-6, atol=1e-7)
