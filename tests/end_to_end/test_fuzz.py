"""Fuzzing bad input: whatever the model bytes, parameters, attributes, shapes or feeds, dml_ep either
runs correctly (as onnxruntime's CPU EP, where that runs the model too) or raises a DmlEpError;
never another exception type, never a wrong answer, never a hang.

Most examples are valid, so that most reach a comparison of values with onnxruntime: each test
counts its examples and those compared (OUTCOMES) and fails if the comparisons are not a majority;
the rest break one rule at a time (a DmlEpError, or a model onnxruntime refuses).

Hypothesis runs derandomized (the same examples every run) with a bounded example count. A
watchdog (faulthandler) ends the process with every thread's traceback if one example runs longer
than EXAMPLE_SECONDS, so a hang, even inside onnxruntime's C++ code, cannot stall the suite.
"""

from __future__ import annotations

import collections
import contextlib
import faulthandler
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

import dml_ep
from dml_ep.core.errors import DmlEpError
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, single_node_model

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

EXAMPLE_SECONDS = 20
MAX_RUN_ELEMENTS = 10**6  # feeds larger than this are only planned, not run (keeps examples fast)


def fuzz(examples: int) -> settings:
    """Same examples every run, no example database, no per-example deadline (the watchdog instead)."""
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


QUANTIZED = [np.uint8, np.int8]
# (input, weights) of QLinearConv and QLinearMatMul: onnxruntime's CPU kernels take (uint8, uint8 or int8) and
# (int8, int8); (int8, uint8) one time in thirty
TYPE_PAIRS = [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)] * 5 + [(np.int8, np.uint8)] + [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)] * 5
# Per test: "examples" run, and of them "compared", whose values were checked against onnxruntime's.
OUTCOMES: collections.Counter = collections.Counter()


def mostly_compared(fuzzed) -> None:
    """Run the Hypothesis test ``fuzzed``: more than half its examples must reach a comparison of
    values (not a refusal, by dml_ep or onnxruntime)."""
    OUTCOMES.clear()
    fuzzed()
    assert OUTCOMES["compared"] > OUTCOMES["examples"] / 2, dict(OUTCOMES)
ODD_TYPES = [np.uint8, np.int8, np.int32, np.float32]


@contextlib.contextmanager
def watchdog():
    faulthandler.dump_traceback_later(EXAMPLE_SECONDS, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_or_dml_ep_error(model, feeds=None, **session_options):
    """Plan and run in both arithmetic modes; a DmlEpError is a fine outcome, any other exception
    fails the test, and the run must be correct (:func:`check_against_onnxruntime`)."""
    OUTCOMES["examples"] += 1
    with watchdog():
        try:
            directml = dml_ep.InferenceSession(model, **session_options)
            like_onnxruntime = dml_ep.InferenceSession(model, arithmetic="onnxruntime", **session_options)
            if feeds is None:
                feeds = {i.name: np.ones(i.shape, i.dtype) for i in directml.plan.inputs}
            if sum(np.size(f) for f in feeds.values()) > MAX_RUN_ELEMENTS:
                event("planned only")
                return
            directml.run(None, feeds)
            outputs = like_onnxruntime.run(None, feeds)
        except DmlEpError as exc:
            event(type(exc).__name__)  # --hypothesis-show-statistics shows how often each outcome came
            return
        event("ran" if directml.plan.dml_nodes else "ran on fallback only")
        check_against_onnxruntime(model, like_onnxruntime.check_feeds(feeds), outputs)


def check_against_onnxruntime(model, feeds, outputs):
    """Outputs of arithmetic="onnxruntime" equal onnxruntime's CPU EP on the same model and feeds:
    integers bit for bit, floats within 1e-6.

    A model that onnxruntime refuses is only counted (hypothesis.event), not failed: dml_ep accepts
    what DirectML supports, and onnxruntime's CPU kernels reject some of it. Known cases (onnxruntime
    1.32): QLinearConv and QLinearMatMul types other than (input, weights, output) = (uint8, uint8 or
    int8, uint8) or (int8, int8, int8), which have no CPU kernel; a per-row output scale or zero
    point, or a one-element one of rank 2 (the kernels take a scalar or a 1-D tensor of size 1);
    QLinearConv with dilations and auto_pad SAME_UPPER/SAME_LOWER.
    """
    try:
        expected = cpu_session(model, threads=1).run(None, feeds)
    except Exception as exc:  # onnxruntime's exception types share no base class but Exception
        event(f"onnxruntime refused: {str(exc).rsplit(' : ', 1)[-1]}")  # the rule, after the status prefix
        return
    for actual, reference in zip(outputs, expected, strict=True):
        assert actual.dtype == reference.dtype and actual.shape == reference.shape
        if np.issubdtype(actual.dtype, np.integer):
            np.testing.assert_array_equal(actual, reference)
        else:
            np.testing.assert_allclose(actual, reference, rtol=1e-6)
    OUTCOMES["compared"] += 1


def build(op_type, operands, out_dtype, out_rank, domain="", **attributes):
    """A single-node model; an attribute combination onnx.checker itself refuses is not an example."""
    try:
        return single_node_model(op_type, operands, out_dtype, out_rank, domain=domain, **attributes)
    except onnx.checker.ValidationError:
        reject()


# --- the bytes of a valid model ---------------------------------------------------------------

SMALL_CONV = build(
    "QLinearConv",
    [Feed(np.ones((1, 2, 4, 4), np.uint8)), np.float32(0.1), np.uint8(128), np.ones((3, 2, 2, 2), np.int8),
     np.float32(0.05), np.int8(0), np.float32(0.2), np.uint8(128), np.arange(3, dtype=np.int32)],
    np.uint8, 4, strides=[1, 1], pads=[0, 1, 0, 1],
)[0].SerializeToString()  # fmt: skip
MLP = (Path(__file__).resolve().parents[2] / "models" / "mlp.onnx").read_bytes()


def weight_bytes(data: bytes) -> list[tuple[int, int]]:
    """Where the 8-bit initializers' raw data (weights, zero points) lie in the serialized model
    ``data``: any bytes there leave a valid model."""
    spans = []
    for tensor in onnx.load_from_string(data).graph.initializer:
        if tensor.data_type in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8) and tensor.raw_data:
            start = data.find(tensor.raw_data)
            spans.append((start, start + len(tensor.raw_data)))
    return spans


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with a few bytes overwritten, inserted or deleted, or cut short; seven times in
    eight, only bytes of its 8-bit weights and zero points overwritten (a valid model, to compare)."""
    spans = weight_bytes(data)
    if draw(st.sampled_from(mostly(True, False, times=7))):
        data = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            start, end = draw(st.sampled_from(spans))
            data[draw(st.integers(start, end - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        if kind == "set":
            data[where] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[where : where + draw(st.integers(1, 4))]
        else:
            del data[max(where, 1) :]
        if not data:
            break
    return bytes(data)


@fuzz(150)
@given(mutated(SMALL_CONV))
def mutated_conv_bytes(data):
    run_or_dml_ep_error(data)


def test_mutated_conv_bytes():
    mostly_compared(mutated_conv_bytes)


@fuzz(60)
@given(mutated(MLP))
def mutated_mlp_bytes(data):
    run_or_dml_ep_error(data)


def test_mutated_mlp_bytes():
    mostly_compared(mutated_mlp_bytes)


# --- fields: parameters, attributes, shapes ---------------------------------------------------

# Each field is bad about one time in thirty, so that most examples are valid (and compared with
# onnxruntime) or break a single rule.
def mostly(valid, *bad, times=29):
    """Choices: ``valid`` ``times`` times as often as any of ``bad``, which stand in the middle
    (Hypothesis draws the first and last choices more often than the others)."""
    count = times * len(bad)
    return [valid] * (count - count // 2) + list(bad) + [valid] * (count // 2)


def mostly_drawn(valid: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """A value of ``valid`` 29 times in 30, else of ``bad`` (st.one_of would draw each half the time)."""
    return st.sampled_from(mostly(True, False)).flatmap(lambda ok: valid if ok else bad)


scales = mostly_drawn(st.floats(0.125, 8.0, width=32), st.sampled_from([0.0, -0.5, np.nan, np.inf, -np.inf, 1e-30, 1e30]))


@st.composite
def parameter(draw, dtypes, sizes, value=None):
    """A scale or zero point of a drawn type and shape (scalar, per-axis of a drawn size, or 2-D)."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.sampled_from(mostly((), (1,), *[(s,) for s in sizes], (sizes[0], 1))))
    fill = draw(value) if value is not None else draw(st.integers(0, 127))
    return np.full(shape, fill, dtype=dtype)


@st.composite
def conv_case(draw):
    rank = draw(st.sampled_from([3, 4, 4, 4, 5]))
    x_shape = (draw(st.integers(1, 2)), draw(st.integers(1, 4))) + tuple(draw(st.integers(3, 6)) for _ in range(rank - 2))
    group = draw(st.sampled_from(mostly(1, x_shape[1], times=4)))
    filter_channels = draw(st.sampled_from(mostly(x_shape[1] // group, 1, 2)))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
    w_shape = (group * draw(st.integers(1, 3)), filter_channels) + kernel
    # onnxruntime's CPU kernels: (uint8, uint8 or int8) and (int8, int8)
    x_type, w_type = draw(st.sampled_from(TYPE_PAIRS))
    spatial = draw(st.sampled_from(mostly(rank - 2, 1, 3)))
    attributes = {}
    for name, valid, low in (("strides", 1, -1), ("dilations", 1, -1), ("pads", 0, -1)):
        if draw(st.integers(0, 3)) == 0:
            count = 2 * spatial if name == "pads" else spatial
            attributes[name] = [draw(mostly_drawn(st.integers(valid, 2), st.integers(low, 3))) for _ in range(count)]
    if draw(st.integers(0, 3)) == 0:
        attributes["kernel_shape"] = draw(st.sampled_from(mostly(list(kernel[:spatial]), [draw(st.integers(1, 3)) for _ in range(spatial)])))
    if group != 1 or draw(st.integers(0, 29)) == 0:
        attributes["group"] = draw(st.sampled_from(mostly(group, 0, 3)))
    if draw(st.integers(0, 3)) == 0:
        attributes["auto_pad"] = draw(st.sampled_from(mostly("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER", "BOGUS", times=2)))
    out_channels = w_shape[0]
    operands = [
        Feed(np.full(x_shape, 3, x_type)),
        draw(parameter([np.float32], [out_channels], scales)),
        draw(parameter(mostly(x_type, np.int32), [out_channels])),
        np.ones(w_shape, w_type),
        draw(parameter(mostly(np.float32, np.float64), [out_channels, out_channels + 1], scales)),
        draw(parameter(mostly(w_type, np.uint8 if w_type == np.int8 else np.int8), [out_channels, 2])),
        draw(parameter([np.float32], [1], scales)),
        draw(parameter(mostly(x_type, np.uint8 if x_type == np.int8 else np.int8), [1])),  # mostly the input's type, the only one onnxruntime runs
        draw(st.sampled_from(mostly(np.arange(out_channels, dtype=np.int32), None, np.zeros(out_channels + 1, np.int32),
                                    np.zeros(out_channels, np.int64)))),
    ]
    return operands, rank, attributes


@fuzz(600)
@given(conv_case(), st.sampled_from(mostly(False, True, times=9)))
def conv_fields(case, declare_output):
    operands, rank, attributes = case
    model, feeds = build("QLinearConv", operands, operands[7].dtype, rank, **attributes)
    if declare_output:  # a static (possibly wrong) output shape: the importer, not the probe, meets the node
        for dim in model.graph.output[0].type.tensor_type.shape.dim:
            dim.dim_value = 2
    run_or_dml_ep_error(model, feeds)


def test_conv_fields():
    mostly_compared(conv_fields)


@st.composite
def shapes(draw, max_rank=4):
    """Mostly of rank 2 to ``max_rank``; sometimes 0 or 1."""
    return tuple(draw(st.integers(1, 4)) for _ in range(draw(st.sampled_from(mostly(*range(2, max_rank + 1), 0, 1, times=9)))))


@fuzz(300)
@given(shapes(), shapes(), st.data())
def matmul_fields(a_shape, b_shape, data):
    if len(a_shape) > 0 and len(b_shape) > 1 and data.draw(st.sampled_from(mostly(True, False, times=9))):
        b_shape = b_shape[:-2] + (a_shape[-1], b_shape[-1])  # matching inner dimensions, mostly
    a_type, b_type = data.draw(st.sampled_from(TYPE_PAIRS))
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    operands = [
        Feed(np.full(a_shape, 2, a_type)),
        data.draw(parameter([np.float32], [m, m + 1], scales)),
        data.draw(parameter(mostly(a_type, np.int32), [m])),
        data.draw(st.sampled_from([np.ones(b_shape, b_type), Feed(np.ones(b_shape, b_type))])),
        data.draw(parameter([np.float32], [n, n + 1], scales)),
        data.draw(parameter(mostly(b_type, np.uint8 if b_type == np.int8 else np.int8), [n])),
        data.draw(parameter([np.float32], [m], scales)),
        data.draw(parameter(mostly(a_type, np.uint8 if a_type == np.int8 else np.int8), [m])),
    ]
    model, feeds = build("QLinearMatMul", operands, operands[7].dtype, max(len(a_shape), len(b_shape), 1))
    run_or_dml_ep_error(model, feeds)


def test_matmul_fields():
    mostly_compared(matmul_fields)


@fuzz(120)
@given(shapes(6), shapes(6), st.booleans(), st.data())
def add_fields(a_shape, b_shape, quantized, data):
    if data.draw(st.sampled_from(mostly(True, False, times=9))):  # broadcastable shapes, mostly
        b_shape = tuple(1 if size % 2 else a_size for size, a_size in zip(b_shape, a_shape[len(a_shape) - len(b_shape):]))
    rank = max(len(a_shape), len(b_shape))
    if quantized:
        dtype = data.draw(st.sampled_from(QUANTIZED))

        def scale_and_zero_point():
            return [data.draw(parameter([np.float32], [2], scales)), data.draw(parameter(mostly(dtype, np.int32), [2]))]

        a, b = Feed(np.ones(a_shape, dtype)), Feed(np.ones(b_shape, dtype))
        operands = [a, *scale_and_zero_point(), b, *scale_and_zero_point(), *scale_and_zero_point()]
        model, feeds = build("QLinearAdd", operands, operands[-1].dtype, rank, domain="com.microsoft")
    else:
        dtype = data.draw(st.sampled_from([np.float32, np.float16, np.int32]))
        model, feeds = build("Add", [Feed(np.ones(a_shape, dtype)), Feed(np.ones(b_shape, dtype))], dtype, rank)
    level = data.draw(st.sampled_from(["2_0", "2_1", "4_0", "6_4"]))
    run_or_dml_ep_error(model, feeds, feature_level=level)


def test_add_fields():
    mostly_compared(add_fields)


# --- feeds ------------------------------------------------------------------------------------


@st.composite
def feed_arrays(draw):
    """Mostly a float32 (batch, 64) array, in any layout; sometimes of another type or shape."""
    dtype = draw(st.sampled_from(mostly(np.float32, np.float64, np.uint8, np.int64, object, times=9)))
    shape = draw(st.sampled_from(mostly((2, 64), (1, 64), (5, 64), (64,), (2, 63), (2, 65), (0, 64), (1, 1, 64), (), times=3)))
    with np.errstate(invalid="ignore"):  # NaN and inf cast to integers on purpose
        array = np.full(shape, draw(st.sampled_from([0.5, 0.5, -3.0, -1e30, np.nan, np.inf])) if dtype != object else None).astype(dtype)
    layout = draw(st.sampled_from(["c", "fortran", "strided", "read-only", "list"]))
    if layout == "fortran":
        array = np.asfortranarray(array)
    elif layout == "strided" and array.ndim:
        array = np.repeat(array, 2, axis=-1)[..., ::2]
    elif layout == "read-only":
        array.flags.writeable = False
    elif layout == "list":
        return array.tolist()
    return array


@fuzz(100)
@given(st.dictionaries(st.sampled_from(mostly("input", "output", "", times=9)), feed_arrays(), min_size=1, max_size=2))
def feeds_of_mlp(feeds):
    run_or_dml_ep_error(MLP, feeds)


def test_feeds():
    mostly_compared(feeds_of_mlp)
