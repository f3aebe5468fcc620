"""QLinearConv: dml_ep against onnxruntime's CPU EP, and "directml" against the exact ideal value.

The exact accumulator is an int64 tap-by-tap convolution written here, independent of dml_ep's
im2col; the ideal value ``(acc + bias) * xs * ws / ys`` is a ratio of Python integers.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.cli import commands as cli
from dml_ep.operators.nodes import FallbackNode
from dml_ep.realep.placement import ASSIGNED_TO_DML
from dml_ep.ort.reference import cpu_session
from onnx_builders import assert_onnxruntime_mode_exact, check_directml_mode, objects, qlinear_conv, run_ort

# onnxruntime's float32 requantization (two rounded scale operations, one rounded product) is
# within 3 float32 ulps of the ideal value; 2^-21 relative leaves a margin of 2.
FLOAT32_RELATIVE_ERROR = 2.0**-21


def resolve_pads(in_spatial, kernel, strides, dilations, pads, auto_pad):
    """ONNX's start and end padding per spatial axis."""
    rank = len(in_spatial)
    if auto_pad in (None, "NOTSET"):
        pads = pads or [0] * 2 * rank
        return pads[:rank], pads[rank:]
    if auto_pad == "VALID":
        return [0] * rank, [0] * rank
    starts, ends = [], []
    for size, k, s, d in zip(in_spatial, kernel, strides, dilations):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        start = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
        starts.append(start)
        ends.append(total - start)
    return starts, ends


def exact_accumulator(x, x_zp, w, w_zp, group, strides, dilations, starts, ends) -> np.ndarray:
    """``sum((x - x_zp) * (w - w_zp))`` per output element in int64; padding contributes 0."""
    centred = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0), *zip(starts, ends)])
    filters = w.astype(np.int64) - np.asarray(w_zp, dtype=np.int64).reshape(-1, *[1] * (w.ndim - 1))
    batch, channels = x.shape[:2]
    out_channels, group_channels, *kernel = w.shape
    out_sizes = [(centred.shape[2 + i] - (k - 1) * d - 1) // s + 1 for i, (k, d, s) in enumerate(zip(kernel, dilations, strides))]
    filters = filters.reshape(group, out_channels // group, group_channels, *kernel)
    acc = np.zeros((batch, group, out_channels // group, *out_sizes), dtype=np.int64)
    for tap in np.ndindex(*kernel):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, out_sizes, strides))
        pixels = centred[(slice(None), slice(None), *window)].reshape(batch, group, group_channels, -1)
        acc += np.einsum("ngcp,gmc->ngmp", pixels, filters[(..., *tap)]).reshape(acc.shape)
    return acc.reshape(batch, out_channels, *out_sizes)


def conv_case(x_shape, w_shape, x_dtype=np.uint8, w_dtype=np.int8, group=1, strides=None, dilations=None, pads=None,
              auto_pad=None, per_channel=False, bias=False, scales=None, w_zp=None, y_zp=None, seed=0):
    """A QLinearConv model with random full-range codes, and its exact ideal output.

    ``scales`` = (xs, ws, ys) fixes the scales (else ys is chosen so the outputs spread over the
    range); ``w_zp`` and ``y_zp`` fix the filter and output zero points (else random, per-channel
    filter ones all equal as onnxruntime requires, and y_zp mid-range). Returns (model, feeds, num,
    den, y_zp, error bound, y dtype).
    """
    rng = np.random.default_rng(seed)
    x_info, w_info = np.iinfo(x_dtype), np.iinfo(w_dtype)
    x = rng.integers(x_info.min, x_info.max + 1, x_shape).astype(x_dtype)
    w = rng.integers(w_info.min, w_info.max + 1, w_shape).astype(w_dtype)
    spatial = len(x_shape) - 2
    strides, dilations = strides or [1] * spatial, dilations or [1] * spatial
    starts, ends = resolve_pads(x_shape[2:], w_shape[2:], strides, dilations, pads, auto_pad)
    out_channels = w_shape[0]
    x_zp = x_dtype(rng.integers(x_info.min, x_info.max + 1))
    w_zp = w_dtype(rng.integers(w_info.min, w_info.max + 1) if w_zp is None else w_zp)
    w_zps = np.full(out_channels, w_zp, dtype=w_dtype) if per_channel else np.array(w_zp)
    acc = exact_accumulator(x, x_zp, w, w_zps, group, strides, dilations, starts, ends)
    bias_values = rng.integers(-50000, 50000, out_channels).astype(np.int32) if bias else None
    if bias:
        acc = acc + bias_values.reshape(1, -1, *[1] * spatial)
    xs, ws, ys = scales or (np.float32(0.02), np.float32(0.005), None)
    w_scales = (ws * rng.uniform(0.5, 2.0, out_channels)).astype(np.float32) if per_channel else np.float32(ws)
    if ys is None:
        ys = np.float32(xs * ws * max(acc.std(), 1.0) / 40)
    if y_zp is None:
        y_zp = rng.integers(x_info.min // 2 + x_info.max // 4, x_info.max // 2 + x_info.max // 4 + 1)
    y_zp = x_dtype(y_zp)

    attributes = dict(strides=strides, dilations=dilations)
    if auto_pad:
        attributes["auto_pad"] = auto_pad
    else:
        attributes["pads"] = starts + ends
    if group > 1:
        attributes["group"] = group
    model, feeds = qlinear_conv(x, np.float32(xs), x_zp, w, w_scales, w_zps, np.float32(ys), y_zp, bias_values, **attributes)

    multipliers = [Fraction(float(xs)) * Fraction(float(s)) / Fraction(float(ys)) for s in np.atleast_1d(w_scales)]
    num = objects(acc) * np.array([m.numerator for m in multipliers], dtype=object).reshape(1, -1, *[1] * spatial)
    den = np.array([m.denominator for m in multipliers], dtype=object).reshape(1, -1, *[1] * spatial)
    bound = np.abs(acc.astype(np.float64) * np.float64(xs) * np.atleast_1d(w_scales).reshape(1, -1, *[1] * spatial) / np.float64(ys))
    return model, feeds, num, den, y_zp, bound * FLOAT32_RELATIVE_ERROR + 2.0**-30, np.dtype(x_dtype)


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
# onnxruntime registers QLinearConv for (uint8, uint8), (uint8, int8) and (int8, int8) only.
TYPES = {"u8s8": (np.uint8, np.int8), "u8u8": (np.uint8, np.uint8), "s8s8": (np.int8, np.int8)}
GRID = [
    pytest.param(dict(CASES[name], x_dtype=x_dtype, w_dtype=w_dtype), id=f"{name}-{types}")
    for name in CASES
    for types, (x_dtype, w_dtype) in TYPES.items()
]


def exact_reference(x_dtype) -> str:
    """onnxruntime with exact integer GEMMs for this activation type.

    "ort-exact" converts int8 weights to uint8, and onnxruntime has no QLinearConv kernel for
    int8 activations with uint8 weights (NOT_IMPLEMENTED); int8 activations use exact kernels on
    x86 anyway, so plain "ort" is exact for them.
    """
    return "ort" if np.dtype(x_dtype) == np.int8 else "ort-exact"


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


def prepared_convolution(session):
    """The prepared kernel of a session's single DML node (a convolution), as its runs use it."""
    (node,) = session.plan.dml_nodes
    (prepared,) = session.executor.kernel_state(node).prepared.values()
    return prepared


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
