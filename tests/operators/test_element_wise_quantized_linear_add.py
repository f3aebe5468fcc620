"""com.microsoft QLinearAdd: dml_ep against onnxruntime's CPU EP, and "directml" against the exact
ideal value ``((a - za) * sa + (b - zb) * sb) / sc``, a ratio of Python integers."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import dml_ep
from dml_ep.core import about
from onnx_builders import assert_onnxruntime_mode_exact, check_directml_mode
from operator_cases import add_case

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)


def random_case(a_shape, b_shape, dtype, seed):
    """Random codes, scales across 1e-3..1, zero points anywhere in range."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, a_shape).astype(dtype)
    b = rng.integers(info.min, info.max + 1, b_shape).astype(dtype)
    scales = 10.0 ** rng.uniform(-3, 0, 3)
    return add_case(a, b, scales, [int(z) for z in rng.integers(info.min, info.max + 1, 3)])


SHAPES = {
    "1d-same": ((300,), (300,)),
    "1d-scalar-b": ((300,), (1,)),
    "1d-scalar-a": ((1,), (300,)),
    "rank0-b": ((4, 5), ()),
    "2d-row": ((6, 7), (7,)),
    "2d-column": ((6, 7), (6, 1)),
    "2d-outer": ((6, 1), (1, 7)),
    "2d-outer-swapped": ((1, 7), (6, 1)),
    "3d-channel": ((2, 3, 40), (1, 3, 1)),
    "3d-inner-constant-b": ((2, 3, 4), (2, 3, 1)),
    "4d-per-channel": ((2, 3, 4, 5), (1, 3, 1, 1)),
    "4d-width": ((2, 3, 4, 5), (5,)),
    "4d-cross": ((2, 3, 4, 1), (1, 1, 1, 5)),
    "4d-mixed": ((1, 3, 1, 5), (2, 1, 4, 1)),
    "5d": ((2, 3, 1, 4, 5), (1, 3, 2, 1, 5)),
    "6d": ((2, 1, 3, 1, 2, 3), (1, 2, 1, 4, 1, 3)),
    "6d-scalar-a": ((1, 1, 1, 1, 1, 1), (2, 1, 3, 1, 2, 3)),
    "all-ones": ((1, 1, 1), (1, 1)),
}
GRID = [
    pytest.param(a_shape, b_shape, dtype, id=f"{name}-{np.dtype(dtype).name}")
    for name, (a_shape, b_shape) in SHAPES.items()
    for dtype in (np.uint8, np.int8)
]


@pytest.mark.parametrize("a_shape, b_shape, dtype", GRID)
def test_onnxruntime_arithmetic_matches_onnxruntime(a_shape, b_shape, dtype):
    for seed in range(4):
        model, feeds, *_ = random_case(a_shape, b_shape, dtype, seed)
        assert not dml_ep.InferenceSession(model).plan.fallback_nodes
        assert_onnxruntime_mode_exact(model, feeds)


@pytest.mark.parametrize("a_shape, b_shape, dtype", GRID)
def test_directml_arithmetic_is_the_rounded_ideal(a_shape, b_shape, dtype):
    for seed in range(4):
        check_directml_mode("QLinearAdd", *random_case(a_shape, b_shape, dtype, seed))


# Parameters where onnxruntime's float32 result rounds to another code if its fixed part
# zc - (rAC*za + rBC*zb) and the scalar addend fixed + b*rBC are computed with separate multiplies
# and adds, as qladd_avx2.cpp is written, instead of the FMAs GCC contracts them into. The codes are
# every value of the type (A in order, B reversed), or one scalar operand as given.
# (span kind, dtype, sa, za, sb, zb, sc, zc, scalar code)
CONTRACTION_CASES = [
    ("general", np.uint8, 0.06163111329078674, 137, 0.06462191790342331, 117, 0.007415939588099718, 185, 129),
    ("general", np.int8, 0.043505582958459854, 119, 0.009951913729310036, -60, 0.019343065097928047, 81, 41),
    ("input1scalar", np.uint8, 0.01303773932158947, 92, 0.00114784250035882, 125, 0.0010016364976763725, 177, 213),
    ("input1scalar", np.int8, 0.2990840673446655, -30, 0.10450717061758041, -98, 0.0020880706142634153, -27, -16),
    ("input0scalar", np.uint8, 0.04532391205430031, 51, 0.01319484505802393, 45, 0.05441690608859062, 14, 181),
    ("input0scalar", np.int8, 0.0280345156788826, 89, 0.18556691706180573, 23, 0.10203242301940918, 108, 125),
]


# Known divergence, found when CI first ran this test under an emulated Nehalem (issue 58): on an x86-64 CPU below
# x86-64-v3 (no FMA; CPUID, as the compiled kernels read it: qemu-user passes the host's /proc/cpuinfo through),
# MLAS's QLinearAdd multiplies and adds in separate roundings, and dml_ep's "onnxruntime" arithmetic does not follow it yet.
# (The third case's ratios happen to round alike either way.)
NO_FMA = pytest.mark.xfail(platform.machine() == "x86_64" and "x86_64_v3" not in about.x86_64_levels(), strict=True,
                           reason="dml_ep's onnxruntime arithmetic models MLAS's FMA kernels only; this CPU has no FMA")


@pytest.mark.parametrize("kind, dtype, sa, za, sb, zb, sc, zc, scalar",
                         [pytest.param(*case, marks=() if index == 2 else NO_FMA) for index, case in enumerate(CONTRACTION_CASES)])
def test_onnxruntime_contracts_the_fixed_part_into_fmas(kind, dtype, sa, za, sb, zb, sc, zc, scalar):
    info = np.iinfo(dtype)
    span = np.arange(info.min, info.max + 1).astype(dtype)
    one = np.array([scalar], dtype=dtype)
    a, b = {"general": (span, span[::-1].copy()), "input1scalar": (span, one), "input0scalar": (one, span)}[kind]
    model, feeds, *_ = add_case(a, b, (sa, sb, sc), (za, zb, zc))
    assert_onnxruntime_mode_exact(model, feeds)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_ties_round_half_to_even(dtype):
    """sa/sc = 1/2 and sb/sc = 1/4: a quarter of the ideal values are exact halves."""
    info = np.iinfo(dtype)
    a = np.repeat(np.arange(info.min, info.max + 1), 4).astype(dtype)
    b = np.tile(np.arange(4) + info.min + 40, 256).astype(dtype)
    model, feeds, num, den, zc, bound = add_case(a, b, (2.0**-3, 2.0**-4, 2.0**-2), (int(info.min) + 100, int(info.min) + 40, 3))
    ties = ((2 * num) % den == 0) & (((2 * num) // den) % 2 == 1)
    assert np.count_nonzero(ties) >= 200
    counts = check_directml_mode("QLinearAdd", model, feeds, num, den, zc, bound)
    assert counts["float rounding"] == 0  # every ratio is a power of two: onnxruntime is exact too


@pytest.mark.host_sensitive
def test_scales_and_zero_points_bound_at_run_time():
    """The real EP binds them as tensors: fed as graph inputs, the node still runs on DirectML, as
    onnxruntime computes it, and a zero scale is refused when it arrives, naming node and tensor."""
    from onnx import TensorProto, helper

    from dml_ep.core.errors import QuantizationParameterError
    from dml_ep.operators.nodes import DmlNode
    from dml_ep.ort.reference import cpu_session

    inputs = [("a", TensorProto.UINT8, [2, 3]), ("as", TensorProto.FLOAT, []), ("az", TensorProto.UINT8, []),
              ("b", TensorProto.UINT8, [2, 3]), ("bs", TensorProto.FLOAT, []), ("bz", TensorProto.UINT8, []),
              ("cs", TensorProto.FLOAT, []), ("cz", TensorProto.UINT8, [])]
    graph = helper.make_graph([helper.make_node("QLinearAdd", [n for n, _, _ in inputs], ["c"], domain="com.microsoft", name="add")], "g",
                              [helper.make_tensor_value_info(*i) for i in inputs], [helper.make_tensor_value_info("c", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    rng = np.random.default_rng(0)
    for _ in range(3):  # new parameters each run
        feeds = {"a": rng.integers(0, 256, (2, 3), dtype=np.uint8), "b": rng.integers(0, 256, (2, 3), dtype=np.uint8),
                 "as": np.array(rng.uniform(0.01, 0.1), np.float32), "bs": np.array(rng.uniform(0.01, 0.1), np.float32),
                 "cs": np.array(rng.uniform(0.05, 0.2), np.float32), "az": np.array(rng.integers(0, 256), np.uint8),
                 "bz": np.array(rng.integers(0, 256), np.uint8), "cz": np.array(rng.integers(0, 256), np.uint8)}
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0])
        assert isinstance(session.executor.plan.entries[0], DmlNode)
    feeds["bs"] = np.array(0, np.float32)
    with pytest.raises(QuantizationParameterError, match="node 'add' \\(QLinearAdd\\), tensor 'bs': scale 0 is not positive"):
        session.run(None, feeds)
