"""MLAS's exp kernels, emulated: the Exp kernel the host's onnxruntime runs (measured apart from its
Softmax's sum-exp kernel) bit for bit on a sweep of float32 bit patterns and every float16 value,
the three kernels told apart by the probe, and each within MLAS's accuracy of exact math."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from dml_ep.numerics.kernels.mlas_exp import _EXP_PROBE, host_exp_lanes, host_sum_exp_lanes, mlas_exp, mlas_softmax, mlas_sum_exp_values
from dml_ep.ort.reference import cpu_session

# Every 9973rd float32 bit pattern (all exponents, both signs, NaNs), a dense ramp over exp's range,
# the clamps and the specials.
_PATTERNS = np.arange(0, 2**32, 9973, dtype=np.uint64).astype(np.uint32).view(np.float32)
_EDGES = np.array([-103.9720840454, -88.3762626647949, 88.7228, 88.7762626647950, 89.0], np.float32)
_SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)
SWEEP = np.concatenate([_PATTERNS, np.linspace(-110, 100, 40001, dtype=np.float32), _EDGES, np.nextafter(_EDGES, np.float32(np.inf)),
                        np.nextafter(_EDGES, np.float32(-np.inf)), _SPECIALS])
FLOAT16 = np.arange(65536, dtype=np.uint16).view(np.float16)


def onnxruntime(op_type: str, x: np.ndarray, opset: int = 13) -> np.ndarray:
    element = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"])], "one", [helper.make_tensor_value_info("x", element, None)],
                              [helper.make_tensor_value_info("y", element, None)])
    return cpu_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), threads=1).run(None, {"x": x})[0]


def exp(x: np.ndarray, lanes: int) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return mlas_exp(x, lanes)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal bit patterns, any NaN for a NaN (MLAS's NaN payloads are not modelled)."""
    both_nan = np.isnan(actual) & np.isnan(expected)
    bits = {np.dtype(np.float32): np.uint32, np.dtype(np.float16): np.uint16}[actual.dtype]
    differ = (actual.view(bits) != expected.view(bits)) & ~both_nan
    assert not differ.any(), f"{differ.sum()} differ, first at x index {np.flatnonzero(differ)[:5]}"


@pytest.mark.host_sensitive
def test_exp_is_onnxruntimes_exp_bit_for_bit():
    assert_same_bits(exp(SWEEP, host_exp_lanes()), onnxruntime("Exp", SWEEP))


@pytest.mark.host_sensitive
def test_float16_exp_runs_in_float32_through_casts():
    """No float16 Exp kernel on the CPU: InsertCastTransformer runs it in float32, rounded once to float16."""
    with np.errstate(over="ignore"):
        actual = exp(FLOAT16.astype(np.float32), host_exp_lanes()).astype(np.float16)
    assert_same_bits(actual, onnxruntime("Exp", FLOAT16))


@pytest.mark.host_sensitive
def test_the_exp_kernel_is_measured_apart_from_the_sum_exp_kernel():
    """platform.cpp picks them separately; on an AVX-512F host onnxruntime 1.32's Softmax runs the AVX-512F
    sum-exp kernel while its Exp gives the FMA3 kernel's bits (+inf to +inf, where vscalefps gives NaN)."""
    sum_exp, exp_lanes = host_sum_exp_lanes(), host_exp_lanes()
    assert exp_lanes == (4 if sum_exp == 4 else 8)
    if sum_exp == 16:
        assert np.isnan(exp(np.array([np.inf], np.float32), 16)).all()
        assert_same_bits(exp(np.array([np.inf], np.float32), exp_lanes), onnxruntime("Exp", np.array([np.inf], np.float32)))


def test_the_probe_tells_the_three_exp_kernels_apart():
    results = {lanes: exp(_EXP_PROBE, lanes) for lanes in (16, 8, 4)}
    for a, b in ((16, 8), (8, 4), (16, 4)):
        assert not np.array_equal(results[a], results[b], equal_nan=True), (a, b)


def test_on_a_softmaxs_domain_the_avx512f_and_fma3_exps_agree():
    """``x - max <= 0``: both kernels round p(r) once and scale it by 2^m with one rounding, so the Exp
    of onnxruntime's inlined float16 Softmax cannot tell them apart; every 4999th float32 in [-110, 0], every
    31st where the result is subnormal ([-104, -87.3])."""
    x = -np.concatenate([np.arange(0, 0x42DC0000, 4999), np.arange(0x42AE9000, 0x42D00000, 31)]).astype(np.uint32).view(np.float32)
    assert_same_bits(exp(x, 16), exp(x, 8))
    assert_same_bits(exp(x, 16), mlas_sum_exp_values(x, 16))


@pytest.mark.parametrize("lanes", [16, 8, 4])
def test_accuracy_against_exact_math(lanes):
    """Within 2 ULP of exp on [-87, 88] (normal results); a changed constant or a dropped term breaks it."""
    x = np.linspace(-87, 88, 200001, dtype=np.float32)
    exact = np.exp(x.astype(np.float64))
    ulps = np.abs(exp(x, lanes).astype(np.float64) - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 2


def test_avx512f_exp_overflows_to_infinity_beyond_the_fma3_clamp():
    """vscalefps by a huge 2^m is an infinity (or zero), not the int32 wrap of m."""
    x = np.array([88.8, 100.0, 1e9, 1.6e9, 1e20, 3e38], np.float32)
    assert np.isposinf(exp(x, 16)).all() and np.isposinf(exp(x, 8)).all()


def test_softmax_rows_sum_to_one():
    rows = np.random.default_rng(0).normal(0, 5, (20, 77)).astype(np.float32)
    for lanes in (16, 8, 4):
        assert np.abs(mlas_softmax(rows, lanes).sum(axis=1, dtype=np.float64) - 1).max() < 1e-5
