"""QLinearConv: dml_ep against onnxruntime's CPU EP, and "directml" against the exact ideal value.

The exact accumulator is an int64 tap-by-tap convolution (tests/exact_values.py), independent of
dml_ep's im2col; the ideal value ``(acc + bias) * xs * ws / ys`` is a ratio of Python integers.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.cli import commands as cli
from dml_ep.operators.nodes import FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.realep.placement import ASSIGNED_TO_DML
from exact_values import exact_reference
from onnx_builders import assert_onnxruntime_mode_exact, check_directml_mode, qlinear_conv, run_ort
from operator_cases import TYPES, conv_case, prepared_convolution


CASES = {
    "3x3-pad1": dict(x_shape=(1, 8, 9, 9), w_shape=(12, 8, 3, 3), pads=[1, 1, 1, 1]),
    "stride2": dict(x_shape=(2, 4, 11, 10), w_shape=(6, 4, 3, 3), strides=[2, 2]),
    "stride3-dilation2": dict(x_shape=(1, 3, 16, 15), w_shape=(5, 3, 3, 2), strides=[3, 1], dilations=[2, 3]),
    "asymmetric-pads": dict(x_shape=(1, 5, 7, 8), w_shape=(4, 5, 3, 3), pads=[0, 2, 1, 0]),
    "same-upper": dict(x_shape=(1, 4, 8, 7), w_shape=(4, 4, 4, 2), strides=[2, 2], auto_pad="SAME_UPPER"),
    "same-lower": dict(x_shape=(1, 4, 8, 7), w_shape=(4, 4, 4, 2), strides=[2, 2], auto_pad="SAME_LOWER"),
    "valid": dict(x_shape=(1, 3, 6, 6), w_shape=(2, 3, 3, 3), auto_pad="VALID"),
    "groups2": dict(x_shape=(1, 6, 6, 6), w_shape=(4, 3, 3, 3), group=2, pads=[1, 1, 1, 1]),
    "groups4-cg3": dict(x_shape=(2, 12, 5, 5), w_shape=(8, 3, 2, 2), group=4),
    "depthwise3": dict(x_shape=(1, 3, 8, 8), w_shape=(3, 1, 3, 3), group=3, pads=[1, 1, 1, 1]),
    "depthwise16-symmetric": dict(x_shape=(1, 16, 6, 6), w_shape=(16, 1, 3, 3), group=16, pads=[1, 1, 1, 1], w_zp=0),
    "depthwise-multiplier2": dict(x_shape=(1, 4, 6, 6), w_shape=(8, 1, 3, 3), group=4),
    "pointwise": dict(x_shape=(1, 16, 5, 5), w_shape=(8, 16, 1, 1)),
    "convsym-32": dict(x_shape=(1, 32, 6, 6), w_shape=(32, 32, 3, 3), pads=[1, 1, 1, 1], w_zp=0),
    "1d": dict(x_shape=(2, 4, 20), w_shape=(6, 4, 5), strides=[2], dilations=[2], pads=[3, 1]),
    "1d-same-upper": dict(x_shape=(1, 3, 9), w_shape=(2, 3, 4), auto_pad="SAME_UPPER"),
    "per-channel": dict(x_shape=(1, 8, 7, 7), w_shape=(10, 8, 3, 3), per_channel=True),
    "per-channel-bias": dict(x_shape=(1, 8, 7, 7), w_shape=(10, 8, 3, 3), per_channel=True, bias=True, pads=[1, 1, 1, 1]),
    "bias-depthwise": dict(x_shape=(1, 6, 5, 5), w_shape=(6, 1, 3, 3), group=6, bias=True),
    "deep-k": dict(x_shape=(1, 64, 8, 8), w_shape=(8, 64, 5, 5), pads=[2, 2, 2, 2]),
    # int32 sums beyond SUMS_BLOCK_BYTES: made and requantized in blocks of rows (compiled kernels)
    "row-blocks": dict(x_shape=(1, 8, 64, 64), w_shape=(96, 8, 3, 3), pads=[1, 1, 1, 1], per_channel=True, bias=True),
}
GRID = [
    pytest.param(dict(CASES[name], x_dtype=x_dtype, w_dtype=w_dtype), id=f"{name}-{types}")
    for name in CASES
    for types, (x_dtype, w_dtype) in TYPES.items()
]


def _assert_mapped(model):
    plan = dml_ep.InferenceSession(model).plan
    assert not plan.fallback_nodes, plan.fallback_nodes[0].reason


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", GRID)
def test_onnxruntime_arithmetic_matches_onnxruntime(case):
    model, feeds, *_ = conv_case(**case)
    _assert_mapped(model)
    assert_onnxruntime_mode_exact(model, feeds)


def test_row_blocks_are_taken_where_the_sums_exceed_a_block():
    """The "row-blocks" case runs in blocks on the compiled kernels (4096 rows of 96 int32 sums:
    1.5 MiB), so the grid above checks them against onnxruntime and the rounded ideal."""
    from dml_ep.operators.quantized_linear_convolution import SUMS_BLOCK_BYTES

    model, *_ = conv_case(**CASES["row-blocks"])
    prepared = prepared_convolution(dml_ep.InferenceSession(model, engine="onnxruntime"))
    assert 4096 * 96 * 4 > SUMS_BLOCK_BYTES and prepared.block_rows == 2048


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", GRID)
def test_directml_arithmetic_is_the_rounded_ideal(case):
    model, feeds, num, den, y_zp, bound, y_dtype = conv_case(**case)
    check_directml_mode("QLinearConv", model, feeds, num, den, y_zp, bound, exact_reference(y_dtype))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("types", list(TYPES))
def test_ties_round_half_to_even(types):
    """Power-of-two scales put half the ideal values on exact ties (odd acc times 2^-1)."""
    x_dtype, w_dtype = TYPES[types]
    scales = (np.float32(2.0**-3), np.float32(2.0**-4), np.float32(2.0**-6))
    model, feeds, num, den, y_zp, bound, y_dtype = conv_case(
        (1, 1, 12, 12), (2, 1, 1, 1), x_dtype, w_dtype, scales=scales, seed=3
    )
    ties = ((2 * num) % den == 0) & (((2 * num) // den) % 2 == 1)
    assert np.count_nonzero(ties) > 20
    counts = check_directml_mode("QLinearConv", model, feeds, num, den, y_zp, bound, exact_reference(x_dtype))
    assert counts["float rounding"] == 0  # the multiplier 2^-1 is exact in float32: only ties can differ


# --- window attributes beyond int32 ----------------------------------------------------------


@pytest.mark.host_sensitive
def test_strides_beyond_int32_reach_directml_as_the_dml_ep_clamps_them(tmp_path):
    """Strides of 2^62: onnxruntime's size formula gives one output per spatial axis. The DML EP
    reads the strides clamped to int32 (GetOptionalAttributeVectorInt32), so DirectML's UINT
    Strides get 2^31-1, whose single output is the same window."""
    model, feeds, *_ = conv_case((1, 3, 6, 5), (4, 3, 3, 2), strides=[2**62, 2**62])
    (entry,) = dml_ep.InferenceSession(model).plan.entries
    assert entry.desc.Strides == (2**31 - 1, 2**31 - 1) and entry.output_shape == (1, 4, 1, 1)
    assert_onnxruntime_mode_exact(model, feeds)
    onnx.save(model, tmp_path / "conv.onnx")
    assert cli.main(["compare", str(tmp_path / "conv.onnx"), "--arithmetic", "onnxruntime", "--quiet"]) == 0


@pytest.mark.host_sensitive
def test_pads_beyond_int32_fall_back_when_the_clamped_size_is_not_onnxruntimes(capsys, tmp_path):
    """Pads of 2^40 (with strides of 2^62, one output of padding alone for onnxruntime): clamped
    to 2^31-1 they give the DML EP another output size, which its InferAndVerifyOutputSizes
    refuses. dml_ep leaves the node to onnxruntime and gives its output."""
    x = np.arange(90, dtype=np.uint8).reshape(1, 3, 6, 5)
    w = np.ones((4, 3, 3, 2), np.int8)
    bias = np.arange(4, dtype=np.int32) * 1000
    model, feeds = qlinear_conv(x, np.float32(0.1), np.uint8(3), w, np.float32(0.05), np.int8(0), np.float32(0.2), np.uint8(9),
                                bias, strides=[2**62, 2**62], pads=[2**40] * 4)
    session = dml_ep.InferenceSession(model)
    (entry,) = session.plan.entries
    assert isinstance(entry, FallbackNode)
    assert "the DML EP infers output shape [1, 4, 3, 3] from the attributes as it reads them" in entry.reason
    assert "onnxruntime's is [1, 4, 1, 1]" in entry.reason and entry.reason.endswith(ASSIGNED_TO_DML)
    np.testing.assert_array_equal(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))
    onnx.save(model, tmp_path / "conv.onnx")
    assert cli.main(["compare", str(tmp_path / "conv.onnx"), "--quiet"]) == 0


HUGE_PAD = 2**30


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ["onnxruntime", "numpy"])
@pytest.mark.parametrize("pads", [[HUGE_PAD] * 4, [HUGE_PAD, 0, 0, HUGE_PAD], [1, HUGE_PAD, 2, HUGE_PAD]])
def test_huge_pads_with_huge_strides_read_a_few_elements(engine, pads):
    """Valid, and onnxruntime runs it: each window reads a handful of elements, mostly padding. The
    numpy engine's im2col made the whole padded input (2^31 x 2^31 elements) and ran out of memory."""
    model, feeds = qlinear_conv(np.arange(16, dtype=np.uint8).reshape(1, 1, 4, 4), np.float32(0.1), np.uint8(3),
                                np.arange(-9, 9, dtype=np.int8).reshape(2, 1, 3, 3), np.float32(0.05), np.int8(0), np.float32(0.02),
                                np.uint8(128), strides=[2**31 - 1, 2**31 - 1], pads=pads)
    expected = cpu_session(model).run(None, feeds)[0]
    actual = dml_ep.InferenceSession(model, engine=engine, arithmetic="onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(actual, expected)
