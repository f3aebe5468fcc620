"""MLAS's logistic, tanh, erf and onnxruntime's Gelu, emulated: bit for bit against the host's
onnxruntime (its Sigmoid, Tanh, Erf and Gelu nodes) on a sweep of float32 bit patterns and on
every float16 value, and within each approximation's accuracy of exact math (float64), so a
changed constant or a lost rounding fails here on any host."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from dml_ep.numerics.kernels.mlas_transcendental import (gelu_function_body, host_logistic_fused, mlas_erf, mlas_gelu, mlas_logistic,
                                                          mlas_tanh)
from dml_ep.operators.element_wise_erf import erf_float64
from dml_ep.ort.reference import cpu_session

# Every 99991st float32 bit pattern (all exponents, both signs; NaN dropped here, added below), a dense
# ramp where the approximations bend (erf's split at 0.921875, its clamp at 3.925, tanh's at 9,
# the logistic's at 18), and the specials; 1027 elements, so the SIMD kernels' tails run too.
_PATTERNS = np.arange(0, 2**32, 99991, dtype=np.uint64).astype(np.uint32).view(np.float32)
_RAMP = np.linspace(-20, 20, 40001, dtype=np.float32)
_EDGES = np.array([0.921875, 3.925, 9.0, 18.0], np.float32)
_SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38], np.float32)
SWEEP = np.concatenate([_PATTERNS[np.isfinite(_PATTERNS)], _RAMP, _EDGES, np.nextafter(_EDGES, np.float32(0)),
                        np.nextafter(_EDGES, np.float32(np.inf)), -_EDGES, _SPECIALS, _RAMP[:1027]])
FLOAT16 = np.arange(65536, dtype=np.uint16).view(np.float16)

KERNELS = {"Sigmoid": mlas_logistic, "Tanh": mlas_tanh, "Erf": mlas_erf, "Gelu": mlas_gelu}


def onnxruntime(op_type: str, x: np.ndarray, domain: str = "", opset: int = 13) -> np.ndarray:
    element = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], domain=domain)], "one", [helper.make_tensor_value_info("x", element, None)],
                              [helper.make_tensor_value_info("y", element, None)])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    return cpu_session(model, threads=1).run(None, {"x": x})[0]


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal bit patterns, any NaN equal to any NaN (onnxruntime's quiet NaNs keep their sign)."""
    same = (actual.view(np.uint8).reshape(actual.size, -1) == expected.view(np.uint8).reshape(expected.size, -1)).all(axis=1)
    differ = ~(same | (np.isnan(actual) & np.isnan(expected)))
    assert not differ.any(), f"{differ.sum()} differ, first at {np.flatnonzero(differ)[:5]}: {actual[differ][:5]} vs {expected[differ][:5]}"


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, domain, opset", [("Sigmoid", "", 13), ("Tanh", "", 13), ("Erf", "", 13), ("Gelu", "com.microsoft", 13),
                                                    ("Gelu", "", 20)])
def test_float32_is_onnxruntimes_kernel_bit_for_bit(op_type, domain, opset):
    with np.errstate(all="ignore"):
        actual = KERNELS[op_type](SWEEP, host_logistic_fused())
    assert_same_bits(actual, onnxruntime(op_type, SWEEP, domain, opset))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type", ["Sigmoid", "Tanh", "Erf"])
def test_float16_runs_the_float32_kernel_between_casts(op_type):
    with np.errstate(all="ignore"):
        actual = KERNELS[op_type](FLOAT16.astype(np.float32), host_logistic_fused()).astype(np.float16)
    assert_same_bits(actual, onnxruntime(op_type, FLOAT16))


@pytest.mark.host_sensitive
def test_float16_gelu_runs_its_function_body():
    """No float16 Gelu kernel: onnxruntime inlines the schema's body, 1/sqrt(2) a float16 constant."""
    with np.errstate(all="ignore"):
        actual = gelu_function_body(FLOAT16.astype(np.float32), host_logistic_fused()).astype(np.float16)
        plain = mlas_gelu(FLOAT16.astype(np.float32), host_logistic_fused()).astype(np.float16)
    reference = onnxruntime("Gelu", FLOAT16, "com.microsoft")
    assert_same_bits(actual, reference)
    assert np.count_nonzero(plain != reference) > 1000  # the constant matters


# The kernels' accuracy on [-6, 6] against exact math (float64), measured for both roundings: the
# bound a constant changed in its last digits or a dropped term breaks.
X = np.linspace(-6, 6, 20001, dtype=np.float32)
EXACT = {mlas_tanh: np.tanh(X.astype(np.float64)), mlas_erf: erf_float64(X), mlas_logistic: 1 / (1 + np.exp(-X.astype(np.float64))),
         mlas_gelu: 0.5 * X * (1 + erf_float64(X / np.sqrt(2.0)))}


def ulps(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    return np.abs(actual.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("fused", [True, False], ids=["fma3", "generic"])
@pytest.mark.parametrize("kernel, max_ulps, max_error", [(mlas_tanh, 6, 4e-7), (mlas_erf, 1.1, 7e-8), (mlas_logistic, None, 2e-7),
                                                         (mlas_gelu, None, 5e-7)], ids=["tanh", "erf", "logistic", "gelu"])
def test_accuracy_against_exact_math(kernel, max_ulps, max_error, fused):
    exact = EXACT[kernel]
    actual = kernel(X, fused)
    assert actual.dtype == np.float32 and actual.shape == X.shape
    assert np.abs(actual - exact).max() <= max_error
    if max_ulps is not None:
        assert ulps(actual, exact).max() <= max_ulps


def test_fused_and_generic_kernels_round_apart():
    """Each multiply-add rounded once or twice: hundreds to thousands of the 20001 values differ by an ulp."""
    for kernel in (mlas_tanh, mlas_erf, mlas_logistic):
        assert 100 < np.count_nonzero(kernel(X, True) != kernel(X, False)) < X.size // 2


def test_special_values():
    """NaN passes (its sign kept by erf), infinities saturate, zeros keep their sign, erf(x) ~ 2x/sqrt(pi) at 0."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(mlas_tanh(x)[:5], [np.nan, 1, -1, 0, -0.0])
        assert mlas_tanh(x)[5] == np.nextafter(np.float32(1e-30), np.float32(0))  # one float32 below: p / q, not exact
        np.testing.assert_array_equal(mlas_logistic(x), [np.nan, 1, 0, 0.5, 0.5, 0.5])
        erf = mlas_erf(x)
        np.testing.assert_array_equal(erf, [np.nan, 1, -1, 0, -0.0, np.float32(1.1283791e-30)])
        assert np.signbit(erf[4]) and np.signbit(mlas_erf(np.float32([-np.nan])))[0]
        np.testing.assert_array_equal(mlas_gelu(x), np.float32([np.nan, np.inf, np.nan, 0, -0.0, 5e-31]))  # -inf * 0: NaN
