"""Fuzzing bad input: whatever the model bytes, parameters, attributes, shapes or feeds, dml_ep either
runs correctly (as onnxruntime's CPU EP, where that runs the model too) or raises a DmlEpError;
never another exception type, never a wrong answer, never a hang.

Hypothesis runs derandomized (the same examples every run) with a bounded example count. A
watchdog (faulthandler) ends the process with every thread's traceback if one example runs longer
than EXAMPLE_SECONDS, so a hang, even inside onnxruntime's C++ code, cannot stall the suite.
"""

from __future__ import annotations

import contextlib
import faulthandler
from pathlib import Path

import numpy as np
import onnx
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

import dml_ep
from dml_ep.errors import DmlEpError
from dml_ep.reference import cpu_session
from onnx_builders import Feed, single_node_model

EXAMPLE_SECONDS = 20
MAX_RUN_ELEMENTS = 10**6  # feeds larger than this are only planned, not run (keeps examples fast)


def fuzz(examples: int) -> settings:
    """Same examples every run, no example database, no per-example deadline (the watchdog instead)."""
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


QUANTIZED = [np.uint8, np.int8]
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
MLP = (Path(__file__).resolve().parent.parent / "models" / "mlp.onnx").read_bytes()


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with a few bytes overwritten, inserted or deleted, or cut short."""
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
def test_mutated_conv_bytes(data):
    run_or_dml_ep_error(data)


@fuzz(60)
@given(mutated(MLP))
def test_mutated_mlp_bytes(data):
    run_or_dml_ep_error(data)


# --- fields: parameters, attributes, shapes ---------------------------------------------------

# Each field is bad about one time in ten, so that many examples are valid or break a single rule.
scales = st.one_of([st.floats(0.125, 8.0, width=32)] * 9 + [st.sampled_from([0.0, -0.5, np.nan, np.inf, -np.inf, 1e-30, 1e30])])


@st.composite
def parameter(draw, dtypes, sizes, value=None):
    """A scale or zero point of a drawn type and shape (scalar, per-axis of a drawn size, or 2-D)."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.sampled_from([()] * 6 + [(1,)] + [(s,) for s in sizes] + [(sizes[0], 1)]))
    fill = draw(value) if value is not None else draw(st.integers(0, 127))
    return np.full(shape, fill, dtype=dtype)


@st.composite
def conv_case(draw):
    rank = draw(st.sampled_from([3, 4, 4, 4, 5]))
    x_shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    filter_channels = draw(st.sampled_from([x_shape[1]] * 3 + [1, 2]))
    w_shape = (draw(st.integers(1, 4)), filter_channels) + tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
    x_type, w_type = draw(st.sampled_from(QUANTIZED)), draw(st.sampled_from(QUANTIZED))
    spatial = draw(st.sampled_from([rank - 2] * 9 + [1, 3]))
    attributes = {}
    for name, low in (("strides", -1), ("dilations", -1), ("pads", -1), ("kernel_shape", 1)):
        if draw(st.integers(0, 3)) == 0:
            count = 2 * spatial if name == "pads" else spatial
            attributes[name] = [draw(st.integers(low, 3)) for _ in range(count)]
    if draw(st.integers(0, 3)) == 0:
        attributes["group"] = draw(st.integers(0, 4))
    if draw(st.integers(0, 3)) == 0:
        attributes["auto_pad"] = draw(st.sampled_from(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"] * 2 + ["BOGUS"]))
    out_channels = w_shape[0]
    operands = [
        Feed(np.full(x_shape, 3, x_type)),
        draw(parameter([np.float32], [out_channels], scales)),
        draw(parameter([x_type] * 9 + [np.int32], [out_channels])),
        np.ones(w_shape, w_type),
        draw(parameter([np.float32] * 9 + [np.float64], [out_channels, out_channels + 1], scales)),
        draw(parameter([w_type] * 9 + [np.uint8], [out_channels, 2])),
        draw(parameter([np.float32], [1], scales)),
        draw(parameter([x_type] * 3 + QUANTIZED, [1])),  # mostly the input's type, the only one onnxruntime runs
        draw(st.sampled_from([None, np.arange(out_channels, dtype=np.int32), np.zeros(out_channels + 1, np.int32), np.zeros(out_channels, np.int64)])),
    ]
    return operands, rank, attributes


@fuzz(600)
@given(conv_case(), st.booleans())
def test_conv_fields(case, declare_output):
    operands, rank, attributes = case
    model, feeds = build("QLinearConv", operands, operands[7].dtype, rank, **attributes)
    if declare_output:  # a static (possibly wrong) output shape: the importer, not the probe, meets the node
        for dim in model.graph.output[0].type.tensor_type.shape.dim:
            dim.dim_value = 2
    run_or_dml_ep_error(model, feeds)


@st.composite
def shapes(draw, max_rank=4):
    return tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(0, max_rank))))


@fuzz(300)
@given(shapes(), shapes(), st.data())
def test_matmul_fields(a_shape, b_shape, data):
    if len(a_shape) > 0 and len(b_shape) > 1 and data.draw(st.booleans()):
        b_shape = b_shape[:-2] + (a_shape[-1], b_shape[-1])  # matching inner dimensions, half the time
    a_type, b_type = data.draw(st.sampled_from(QUANTIZED)), data.draw(st.sampled_from(QUANTIZED))
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    operands = [
        Feed(np.full(a_shape, 2, a_type)),
        data.draw(parameter([np.float32], [m, m + 1], scales)),
        data.draw(parameter([a_type] * 9 + [np.int32], [m])),
        data.draw(st.sampled_from([np.ones(b_shape, b_type), Feed(np.ones(b_shape, b_type))])),
        data.draw(parameter([np.float32], [n, n + 1], scales)),
        data.draw(parameter([b_type] * 9 + [np.uint8], [n])),
        data.draw(parameter([np.float32], [m], scales)),
        data.draw(parameter([np.uint8, np.int8], [m])),
    ]
    model, feeds = build("QLinearMatMul", operands, operands[7].dtype, max(len(a_shape), len(b_shape), 1))
    run_or_dml_ep_error(model, feeds)


@fuzz(120)
@given(shapes(6), shapes(6), st.booleans(), st.data())
def test_add_fields(a_shape, b_shape, quantized, data):
    if data.draw(st.booleans()):  # broadcastable shapes, half the time
        b_shape = tuple(1 if size % 2 else a_size for size, a_size in zip(b_shape, a_shape[len(a_shape) - len(b_shape):]))
    rank = max(len(a_shape), len(b_shape))
    if quantized:
        dtype = data.draw(st.sampled_from(QUANTIZED))

        def scale_and_zero_point():
            return [data.draw(parameter([np.float32], [2], scales)), data.draw(parameter([dtype] * 9 + [np.int32], [2]))]

        a, b = Feed(np.ones(a_shape, dtype)), Feed(np.ones(b_shape, dtype))
        operands = [a, *scale_and_zero_point(), b, *scale_and_zero_point(), *scale_and_zero_point()]
        model, feeds = build("QLinearAdd", operands, operands[-1].dtype, rank, domain="com.microsoft")
    else:
        dtype = data.draw(st.sampled_from([np.float32, np.float16, np.int32]))
        model, feeds = build("Add", [Feed(np.ones(a_shape, dtype)), Feed(np.ones(b_shape, dtype))], dtype, rank)
    level = data.draw(st.sampled_from(["2_0", "2_1", "4_0", "6_4"]))
    run_or_dml_ep_error(model, feeds, feature_level=level)


# --- feeds ------------------------------------------------------------------------------------


@st.composite
def feed_arrays(draw):
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float64, np.uint8, np.int64, object]))
    shape = draw(st.sampled_from([(2, 64), (1, 64), (5, 64), (64,), (2, 63), (2, 65), (0, 64), (1, 1, 64), ()]))
    with np.errstate(invalid="ignore"):  # NaN and inf cast to integers on purpose
        array = np.full(shape, draw(st.sampled_from([0.5, -1e30, np.nan, np.inf])) if dtype != object else None).astype(dtype)
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
@given(st.dictionaries(st.sampled_from(["input", "input", "output", ""]), feed_arrays(), max_size=2))
def test_feeds(feeds):
    run_or_dml_ep_error(MLP, feeds)
