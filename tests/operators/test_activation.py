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
import onnxruntime as ort
import pytest
from onnx import helper

import dml_ep
from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE
from dml_ep.core.errors import DescValidationError
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.engines import get_engine
from dml_ep.numerics.kernels.mlas_transcendental import host_logistic_fused, mlas_gelu
from dml_ep.operators import activation as od
from dml_ep.operators import registration
from dml_ep.operators.activation import apply_activation
from dml_ep.operators.base import DevicePrecision
from dml_ep.operators.dispatch import run_kernel
from dml_ep.operators.element_wise_erf import erf_float64
from dml_ep.operators.kernel_state import KernelState
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
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
    "GELU": (od.DML_ACTIVATION_GELU_OPERATOR_DESC(), lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
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


# --- the standalone float activations: ONNX Sigmoid, Tanh, Relu, LeakyRelu, com.microsoft Gelu ----------------

# (op type, domain, attributes, the DirectML operator, the function in float64)
STANDALONE = {
    "Sigmoid": ("", {}, "ACTIVATION_SIGMOID", lambda x: 1 / (1 + np.exp(-x))),
    "Tanh": ("", {}, "ACTIVATION_TANH", np.tanh),
    "Relu": ("", {}, "ACTIVATION_RELU", lambda x: np.where(x < 0, 0.0, x)),
    "LeakyRelu": ("", {"alpha": 0.1}, "ACTIVATION_LEAKY_RELU", lambda x: np.where(x >= 0, x, np.float32(0.1) * x)),
    "LeakyRelu default alpha": ("", {}, "ACTIVATION_LEAKY_RELU", lambda x: np.where(x >= 0, x, np.float32(0.01) * x)),
    "Gelu": ("com.microsoft", {}, "ACTIVATION_GELU", lambda x: 0.5 * x * (1 + erf_float64(x / np.sqrt(2.0)))),
}
standalone = pytest.mark.parametrize("case", STANDALONE)
FLOATS = pytest.mark.parametrize("dtype", [np.float32, np.float16])
# Zeros of both signs, a denormal, the kernels' clamps (9, 18, erf's 3.925 * sqrt(2)), large, infinite, NaN, and a spread.
SPECIAL = [0.0, -0.0, 1e-45, -1e-45, 9.0, -9.5, 18.0, -18.5, 5.55, -5.56, 60.0, -60.0, np.inf, -np.inf, np.nan]


def activation_inputs(dtype) -> np.ndarray:
    spread = np.random.default_rng(1).standard_normal(3000) * 4
    return np.concatenate([SPECIAL, spread]).astype(dtype).reshape(3, -1)


def standalone_session(case: str, x: np.ndarray, arithmetic: str = "directml", opset: int = 17):
    domain, attributes, _, _ = STANDALONE[case]
    op_type = case.split()[0]
    model, feeds = single_node_model(op_type, [Feed(x)], x.dtype, 2, domain=domain, opset=opset, **attributes)
    options = None
    if case == "Gelu" and x.dtype == np.float16:  # onnxruntime's rewrites inline it, as if on the CPU EP: see the xfail below
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return dml_ep.InferenceSession(model.SerializeToString(), options, arithmetic=arithmetic), model, feeds


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """WebNN's ULP distance: the difference of the sign-magnitude bit patterns, +0 and -0 equal."""
    bits = np.int64 if a.dtype == np.float32 else np.int32
    unsigned = np.uint32 if a.dtype == np.float32 else np.uint16
    def ordered(v):
        raw = v.view(unsigned).astype(bits)
        magnitude = raw & (np.iinfo(unsigned).max >> 1)
        return np.where(raw != magnitude, -magnitude, magnitude)
    return np.abs(ordered(a) - ordered(b))


@standalone
@FLOATS
def test_standalone_activation_is_planned_on_its_directml_operator(case, dtype):
    x = activation_inputs(dtype)
    session, _, _ = standalone_session(case, x)
    assert [entry.operator for entry in session.plan.entries] == [f"DML_OPERATOR_{STANDALONE[case][2]}"]
    [entry] = session.plan.entries
    assert entry.desc.InputTensor.Sizes == (1, 1, 3, x.shape[1])  # right-aligned to 4-D


@standalone
@FLOATS
def test_directml_arithmetic_is_within_webnns_tolerance_of_the_function(case, dtype):
    """The point value against the function in float64, rounded once, within the envelope the
    operator declares (WebNN's tolerance); infinities and NaN as the function gives them."""
    x = activation_inputs(dtype)
    session, _, feeds = standalone_session(case, x)
    [entry] = session.plan.entries
    with np.errstate(all="ignore"):
        actual = session.run(None, feeds)[0]
        exact = STANDALONE[case][3](x.astype(np.float64)).astype(dtype)
    precision = registration.OPERATORS[entry.desc.OPERATOR_TYPE].device_precision
    allowed = 0 if precision is None else (precision.ulp32 if dtype == np.float32 else precision.ulp16)
    finite = np.isfinite(exact)
    assert ulp_distance(actual[finite], exact[finite]).max() <= allowed
    np.testing.assert_array_equal(actual[~finite], exact[~finite])


@pytest.mark.host_sensitive
@standalone
@FLOATS
def test_onnxruntime_arithmetic_is_onnxruntimes_kernel_bit_for_bit(case, dtype):
    """MLAS's logistic, tanh, erf; a float16 node through float32 (a Gelu through its function
    body); Relu's -0 and NaN passing as onnxruntime's."""
    x = activation_inputs(dtype)
    session, model, feeds = standalone_session(case, x, "onnxruntime")
    reference = cpu_session(model, threads=1).run(None, feeds)[0]
    actual = session.run(None, feeds)[0]
    assert actual.dtype == dtype
    assert np.array_equal(actual.view(np.uint8), reference.view(np.uint8)) or (
        np.array_equal(actual, reference, equal_nan=True) and np.array_equal(np.signbit(actual), np.signbit(reference)))


def test_relu_keeps_negative_zero_and_nan():
    x = np.float32([[-0.0, np.nan, -1e-45, 1e-45, -2.0]])
    for arithmetic in ("directml", "onnxruntime"):
        session, _, feeds = standalone_session("Relu", x, arithmetic)
        y = session.run(None, feeds)[0]
        np.testing.assert_array_equal(y, np.float32([[0.0, np.nan, 0.0, 1e-45, 0.0]]))
        assert np.signbit(y[0, 0]) and not np.signbit(y[0, 2])


@pytest.mark.parametrize("case, opset, planned", [("Sigmoid", 6, True), ("Sigmoid", 13, True), ("Tanh", 6, True), ("Relu", 13, True),
                                                  ("LeakyRelu", 6, True), ("LeakyRelu", 16, True)])
def test_standalone_rows_take_the_real_eps_since_versions(case, opset, planned):
    x = activation_inputs(np.float32)
    session, _, _ = standalone_session(case, x, opset=opset)
    assert (session.plan.entries[0].operator == f"DML_OPERATOR_{STANDALONE[case][2]}") is planned


def test_leaky_relu_reads_alpha_as_float32():
    session, _, _ = standalone_session("LeakyRelu", activation_inputs(np.float32))
    assert session.plan.entries[0].desc.Alpha == float(np.float32(0.1))


def test_gelu_desc_needs_feature_level_5_1_and_is_fusable():
    t = DML_BUFFER_TENSOR_DESC.create(DML_TENSOR_DATA_TYPE.FLOAT16, (2, 3, 4, 5, 6))
    desc = od.DML_ACTIVATION_GELU_OPERATOR_DESC(InputTensor=t, OutputTensor=t)
    desc.validate(FL.FL_5_1)
    with pytest.raises(DescValidationError, match="requires DML_FEATURE_LEVEL_5_1"):
        desc.validate(FL.FL_5_0)
    assert od.DML_ACTIVATION_GELU_OPERATOR_DESC in od.FUSABLE_ACTIVATIONS


def test_an_int16_relu_stays_on_directml_unmodelled():
    model, _ = single_node_model("Relu", [Feed(np.ones((2, 3), np.int16))], np.int16, 2)
    [entry] = plan_model(model).entries
    assert "int8 only" in entry.reason


def test_a_float16_gelu_stays_one_node_through_onnxruntimes_rewrites():
    """The CPU session onnxruntime_fusions.py asks would inline a float16 com.microsoft Gelu (no CPU kernel); the
    DML EP has one and keeps the node (onnxruntime inlines only nodes no EP took: function_inlining.py)."""
    model, _ = single_node_model("Gelu", [Feed(np.ones((2, 3), np.float16))], np.float16, 2, domain="com.microsoft")
    assert [entry.operator for entry in plan_model(model).entries] == ["DML_OPERATOR_ACTIVATION_GELU"]


def test_directml_gelu_is_gelu_rounded_once():
    """Every finite float16 value: the exact GELU (float64) rounded once, not through float32 (at
    0.001339 that would land one float16 ulp off)."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    with np.errstate(all="ignore"):
        exact = (0.5 * x.astype(np.float64) * (1 + erf_float64(x.astype(np.float64) / np.sqrt(2.0)))).astype(np.float16)
    np.testing.assert_array_equal(apply_activation(od.DML_ACTIVATION_GELU_OPERATOR_DESC(), x), exact)


def test_device_precision_is_webnns_tolerance():
    """WebNN's conformance tolerances (wpt webnn/resources/utils.js; ../shared/DML_FLOAT_OPS.md section 2.4), in ULP."""
    expected = {"SIGMOID": (34, 10), "TANH": (16, 16), "GELU": (18, 18), "LEAKY_RELU": (1, 2), "ELU": (18, 18), "SOFTPLUS": (18, 18),
                "SOFTSIGN": (3, 3), "HARD_SIGMOID": (2, 2), "LINEAR": (2, 2)}
    declared = {entry.desc.OPERATOR_TYPE.name.removeprefix("ACTIVATION_"): entry.device_precision for entry in od.OPERATORS}
    assert {name: (p.ulp32, p.ulp16) for name, p in declared.items() if p is not None} == expected
    assert all("WebNN" in p.rule for p in declared.values() if p is not None)
    assert declared["RELU"] is None and declared["IDENTITY"] is None


# --- com.microsoft BiasGelu and FastGelu: ELEMENT_WISE_ADD1 with a fused GELU (DmlOperatorBiasGelu.cpp) -------------


def bias_gelu_session(op_type: str, dtype, arithmetic: str = "directml", bias: bool = True):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((16, 257)) * 3).astype(dtype)
    operands = [Feed(x), Feed(rng.standard_normal(257).astype(dtype))] if bias else [Feed(x)]
    model, feeds = single_node_model(op_type, operands, dtype, 2, domain="com.microsoft")
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic), model, feeds


@pytest.mark.parametrize("op_type", ["BiasGelu", "FastGelu"])
@FLOATS
def test_bias_gelu_is_add1_with_a_fused_exact_gelu(op_type, dtype):
    """The sum in float32, the exact GELU of it, rounded once: FastGelu too (DirectML's GELU, not the
    tanh approximation its name and onnxruntime's CPU kernel use)."""
    session, _, feeds = bias_gelu_session(op_type, dtype)
    [entry] = session.plan.entries
    assert entry.operator == "DML_OPERATOR_ELEMENT_WISE_ADD1" and type(entry.desc.FusedActivation) is od.DML_ACTIVATION_GELU_OPERATOR_DESC
    s = np.add(*(feeds[name].astype(np.float32) for name in ("in0", "in1")), dtype=np.float32).astype(np.float64)
    np.testing.assert_array_equal(session.run(None, feeds)[0], (0.5 * s * (1 + erf_float64(s / np.sqrt(2.0)))).astype(dtype))


def test_fast_gelu_without_bias_is_a_standalone_gelu():
    session, _, _ = bias_gelu_session("FastGelu", np.float32, bias=False)
    assert [entry.operator for entry in session.plan.entries] == ["DML_OPERATOR_ACTIVATION_GELU"]


@pytest.mark.host_sensitive
@FLOATS
def test_onnxruntime_arithmetic_bias_gelu_is_onnxruntimes_bit_for_bit(dtype):
    """onnxruntime's BiasGelu: the float32 sum, then its float32 Gelu (a float16 node between Casts)."""
    session, model, feeds = bias_gelu_session("BiasGelu", dtype, "onnxruntime")
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model, threads=1).run(None, feeds)[0])


@pytest.mark.host_sensitive
def test_onnxruntime_arithmetic_fast_gelu_is_the_exact_gelu_the_real_ep_computes():
    """Not onnxruntime's FastGelu: its CPU kernel is the tanh approximation, which the real EP does
    not compute; the two differ by up to about 5e-4 (the approximation's error)."""
    session, model, feeds = bias_gelu_session("FastGelu", np.float32, "onnxruntime")
    ours, reference = session.run(None, feeds)[0], cpu_session(model, threads=1).run(None, feeds)[0]
    s = feeds["in0"] + feeds["in1"]
    np.testing.assert_array_equal(ours, mlas_gelu(s, host_logistic_fused()))
    assert 1e-5 < np.abs(ours - reference).max() < 1e-3


def test_a_fused_activations_envelope_adds_to_its_operators():
    """ADD1's 1 ULP (WebNN's add) plus GELU's 18; relu adds nothing; an activation without an
    envelope (thresholded relu: none in WebNN) leaves none."""
    add = DevicePrecision("add", ulp32=1, ulp16=1)
    gelu = od.with_fused_activation(add, od.DML_ACTIVATION_GELU_OPERATOR_DESC())
    assert (gelu.ulp32, gelu.ulp16) == (19, 19) and gelu.rule.startswith("add + WebNN's gelu")
    assert od.with_fused_activation(add, od.DML_ACTIVATION_RELU_OPERATOR_DESC()) is add
    assert od.with_fused_activation(add, None) is add
    assert od.with_fused_activation(add, od.DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC()) is None
    session, _, _ = bias_gelu_session("BiasGelu", np.float16)
    [entry] = session.plan.entries
    assert registration.OPERATORS[entry.desc.OPERATOR_TYPE].device_precision(entry.desc).ulp16 == 19


# --- com.microsoft QuickGelu: a DirectML graph (DmlOperatorQuickGelu.cpp) ---------------------------------------------


def silu_session(dtype, arithmetic: str = "directml", alpha=None):
    """x * sigmoid(alpha x) as a QuickGelu node; alpha None: a SiLU, Sigmoid -> Mul, which onnxruntime's QuickGeluFusion
    makes a QuickGelu of alpha 1 in float32."""
    x = activation_inputs(dtype)
    if alpha is None:
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    else:
        nodes = [helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=alpha)]
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", element, x.shape)], [helper.make_tensor_value_info("y", element, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return dml_ep.InferenceSession(model.SerializeToString(), arithmetic=arithmetic), model, {"x": x}


@pytest.mark.parametrize("alpha, operators", [
    (None, ["ACTIVATION_SIGMOID", "ELEMENT_WISE_MULTIPLY"]),
    (1.702, ["ELEMENT_WISE_IDENTITY", "ACTIVATION_SIGMOID", "ELEMENT_WISE_MULTIPLY"]),
], ids=["silu", "alpha"])  # fmt: skip
def test_quick_gelu_is_the_real_eps_graph(alpha, operators):
    session, _, feeds = silu_session(np.float32, alpha=alpha)
    assert [entry.operator for entry in session.plan.entries] == [f"DML_OPERATOR_{name}" for name in operators]
    assert {entry.origin.rules[-1] for entry in session.plan.entries} == {"DmlOperatorQuickGelu"}
    if alpha is not None:
        assert session.plan.entries[0].desc.ScaleBias == (float(np.float32(alpha)), 0.0)
    x = feeds["x"].astype(np.float64)
    a = 1.0 if alpha is None else float(np.float32(alpha))
    with np.errstate(all="ignore"):
        exact = (x / (1 + np.exp(-a * x))).astype(np.float32)
        actual = session.run(None, feeds)[0]
    finite = np.isfinite(exact) & (np.abs(exact) > 1e-30)
    assert ulp_distance(actual[finite], exact[finite]).max() <= 34 + 1 + 1  # sigmoid's, the multiply's, the scale's envelope


@pytest.mark.host_sensitive
@pytest.mark.parametrize("alpha", [None, 1.702], ids=["silu", "alpha"])
def test_onnxruntime_arithmetic_quick_gelu_is_onnxruntimes_bit_for_bit(alpha):
    """Float32: onnxruntime's QuickGelu computes alpha * x, MLAS's logistic, x * that, as the parts do."""
    session, model, feeds = silu_session(np.float32, "onnxruntime", alpha)
    actual, reference = session.run(None, feeds)[0], cpu_session(model, threads=1).run(None, feeds)[0]
    assert np.array_equal(actual, reference, equal_nan=True) and np.array_equal(np.signbit(actual), np.signbit(reference))


def test_a_float16_quick_gelu_rounds_between_its_parts():
    session, _, feeds = silu_session(np.float16, alpha=1.5)
    assert len(session.plan.entries) == 3
    x = feeds["x"].astype(np.float32)
    scaled = (x * np.float32(1.5)).astype(np.float16).astype(np.float32)
    with np.errstate(all="ignore"):
        sigmoid = (1 / (1 + np.exp(-scaled))).astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(session.run(None, feeds)[0], (x * sigmoid).astype(np.float16))


def test_quick_gelu_alpha_defaults_to_the_schemas():
    x = np.ones((2, 4), np.float32)
    model, _ = single_node_model("QuickGelu", [Feed(x)], np.float32, 2, domain="com.microsoft")
    assert plan_model(model).entries[0].desc.ScaleBias == (float(np.float32(1.702)), 0.0)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["Sigmoid", "Tanh"])
def test_a_small_float16_activation_run_again_is_looked_up_with_the_same_bits(op_type, monkeypatch):
    """Under 1024 elements (an LLM decode step's SiLU) computed directly, then, once 4096 were, from the
    table of all float16 values: onnxruntime's bits at every run, the table used by the last."""
    monkeypatch.setattr(od, "_EVALUATED", {})
    x = (np.random.default_rng(5).standard_normal((1, 640)) * 4).astype(np.float16)
    model, feeds = single_node_model(op_type, [Feed(x)], np.float16, 2)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    session = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime")
    for _ in range(8):
        np.testing.assert_array_equal(session.run(None, feeds)[0], expected)
    assert sum(od._EVALUATED.values()) == 8 * 640
    od._float16_table.cache_clear()
    session.run(None, feeds)
    assert od._float16_table.cache_info().currsize == 1
