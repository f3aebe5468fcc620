"""Single-node ONNX models for differential tests, and the exact references they are judged by.

Builders return ``(model, feeds)``: operands wrapped in :class:`Feed` become graph inputs (bound at
run time), every other operand an initializer, ``None`` an omitted optional input.

The exactness helpers follow DirectML's definition, "dequantize, compute, quantize", in exact
rational arithmetic: a quantized output is ``clamp(round_half_even(num / den) + zp)`` with Python
integers ``num`` and ``den``, so no float rounding is involved in the reference.
"""

from __future__ import annotations

import collections
import dataclasses
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

import dml_ep
import dml_ep.arithmetic
from dml_ep.reference import cpu_session

# Opset 19 keeps QLinearMatMul at version 10, which session.x64quantprecision covers.
OPSET = 19


@dataclasses.dataclass(frozen=True)
class Feed:
    """An operand that is a graph input, fed at run time, instead of an initializer."""

    value: np.ndarray


def single_node_model(op_type, operands, out_dtype, out_rank, domain="", consumer=None, opset=OPSET, **attributes):
    """A model of one node (plus an optional single-input ``consumer`` node name, attributes), of
    the ai.onnx ``opset``.

    ``operands`` are arrays (initializers), :class:`Feed` (inputs) or None (omitted).
    """
    inputs, initializers, names, feeds = [], [], [], {}
    for index, operand in enumerate(operands):
        if operand is None:
            names.append("")
            continue
        name = f"in{index}"
        names.append(name)
        if isinstance(operand, Feed):
            value = np.asarray(operand.value)
            feeds[name] = value
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        else:
            initializers.append(numpy_helper.from_array(np.asarray(operand), name))
    out_type = helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
    nodes = [helper.make_node(op_type, names, ["y"], domain=domain, **attributes)]
    if consumer is not None:
        consumer_type, consumer_attributes = consumer
        nodes[0].output[0] = "pre"
        nodes.append(helper.make_node(consumer_type, ["pre"], ["y"], **consumer_attributes))
    output = helper.make_tensor_value_info("y", out_type, [None] * out_rank)
    graph = helper.make_graph(nodes, f"single_{op_type}", inputs, [output], initializers)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    return model, feeds


def _value(operand):
    return None if operand is None else np.asarray(operand.value if isinstance(operand, Feed) else operand)


def qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias=None, **attributes):
    """QLinearConv; ``x`` is fed unless given as an array; ``attributes`` are the node's."""
    operands = [_feed(x), x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias]
    out_dtype = np.uint8 if y_zp is None else np.asarray(y_zp).dtype
    return single_node_model("QLinearConv", operands, out_dtype, _value(x).ndim, **attributes)


def qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    """QLinearMatMul; wrap ``b`` (or ``a``) in Feed to bind it at run time; ``a`` is always fed."""
    operands = [_feed(a), a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp]
    out_rank = len(np.matmul(np.zeros(_value(a).shape, np.int8), np.zeros(_value(b).shape, np.int8)).shape)
    return single_node_model("QLinearMatMul", operands, np.asarray(y_zp).dtype, out_rank)


def qlinear_add(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp):
    """com.microsoft QLinearAdd with both data operands fed."""
    operands = [_feed(a), a_scale, a_zp, _feed(b), b_scale, b_zp, c_scale, c_zp]
    out_rank = len(np.broadcast_shapes(_value(a).shape, _value(b).shape))
    out_dtype = _value(a).dtype if c_zp is None else np.asarray(c_zp).dtype
    return single_node_model("QLinearAdd", operands, out_dtype, out_rank, domain="com.microsoft")


def add(a, b, op_type="Add", activation=None, **activation_attributes):
    """Add (or a two-input Sum) of two fed operands, optionally consumed by an activation node."""
    consumer = None if activation is None else (activation, activation_attributes)
    out_rank = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return single_node_model(op_type, [_feed(a), _feed(b)], np.asarray(a).dtype, out_rank, consumer=consumer)


def _feed(operand):
    return operand if isinstance(operand, Feed) else Feed(np.asarray(operand))


# --- running ---------------------------------------------------------------------------------


def run_dml(model, feeds, arithmetic):
    return dml_ep.InferenceSession(model, arithmetic=arithmetic).run(None, feeds)[0]


def run_ort(model, feeds, reference):
    return cpu_session(model, reference, threads=1).run(None, feeds)[0]


def assert_onnxruntime_mode_exact(model, feeds):
    """arithmetic="onnxruntime" reproduces onnxruntime's CPU EP bit for bit."""
    expected = run_ort(model, feeds, "ort")
    actual = run_dml(model, feeds, "onnxruntime")
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    mismatch = np.flatnonzero(actual != expected)
    assert mismatch.size == 0, (
        f"{mismatch.size}/{actual.size} differ, first at {mismatch[:5]}: "
        f"dml_ep {actual.reshape(-1)[mismatch[:5]]} onnxruntime {expected.reshape(-1)[mismatch[:5]]}"
    )


# --- exact references -------------------------------------------------------------------------


def ratio(value) -> tuple[int, int]:
    """A float (float32 scale) as an exact (numerator, denominator) of Python ints."""
    return Fraction(float(value)).as_integer_ratio()


def objects(array) -> np.ndarray:
    """An integer array as Python ints (object dtype), so exact products cannot overflow."""
    out = np.empty(np.shape(array), dtype=object)
    out[...] = np.asarray(array, dtype=np.int64).tolist()
    return out


def round_half_even(num, den) -> np.ndarray:
    """round(num / den), ties to even, for object arrays of Python ints (den > 0)."""
    quotient = num // den  # np.divmod has no object loop
    remainder = num - quotient * den
    twice = 2 * remainder
    up = np.asarray((twice > den) | ((twice == den) & (quotient % 2 == 1)))  # 0-d object ops give Python bools
    return quotient + up.astype(np.int64)


def quantize_exact(num, den, zero_point, dtype) -> np.ndarray:
    """DirectML's ``clamp(round(value) + zp)`` of the exact value ``num / den``."""
    info = np.iinfo(dtype)
    rounded = round_half_even(num, den) + np.asarray(zero_point, dtype=np.int64)
    return np.clip(rounded.astype(np.int64), info.min, info.max).astype(dtype)


def classify_mismatches(ours, theirs, num, den, error_bound, zero_point) -> collections.Counter:
    """Explain every element where dml_ep's correctly rounded output differs from onnxruntime's.

    onnxruntime computes the value in float32 (rounded multipliers, products or FMA chains), so it
    may land on the other side of a rounding boundary than the exact value ``num / den + zero_point``.
    A difference is explained when it is 1 step and the exact value is either an exact tie ("tie":
    onnxruntime's float error picks a side, DirectML rounds to even) or within ``error_bound``
    (output units: onnxruntime's worst float32 error there) of the half-integer between the two
    outputs ("float rounding"). Returns the counts; fails on anything else.
    """
    ours, theirs = np.atleast_1d(ours).astype(np.int64), np.atleast_1d(theirs).astype(np.int64)  # 0-d: matmul of 1-D
    num, den, bound, zero_point = (np.broadcast_to(v, ours.shape) for v in (num, den, error_bound, zero_point))
    counts = collections.Counter()
    for index in zip(*np.nonzero(ours != theirs)):
        what = f"at {index}: dml_ep {ours[index]}, onnxruntime {theirs[index]}"
        assert abs(ours[index] - theirs[index]) == 1, f"{what}: more than 1 step"
        value = Fraction(num[index], den[index]) + int(zero_point[index])
        boundary = Fraction(2 * int(min(ours[index], theirs[index])) + 1, 2)
        distance = abs(value - boundary)
        assert distance <= Fraction(float(bound[index])), (
            f"{what}: exact value {float(value)!r} is {float(distance):.3g} from {float(boundary)}, "
            f"beyond onnxruntime's float32 error bound {float(bound[index]):.3g}"
        )
        counts["tie" if distance == 0 else "float rounding"] += 1
    return counts


def saturated_by_onnxruntime(model, feeds, theirs) -> np.ndarray:
    """Where onnxruntime's output is its int16 pair saturation (AVX2 CPUs without VNNI): "ort-exact"
    only makes constant int8 weights of opset-10 nodes exact, so runtime or opset-21 B operands still
    saturate there. Those elements equal dml_ep's saturating emulation and differ without it."""
    if not dml_ep.arithmetic.host_saturates_u8s8():
        return np.zeros(np.shape(theirs), dtype=bool)
    with_saturation = dml_ep.InferenceSession(model, arithmetic="onnxruntime", u8s8_saturation=True).run(None, feeds)[0]
    without = dml_ep.InferenceSession(model, arithmetic="onnxruntime", u8s8_saturation=False).run(None, feeds)[0]
    return (with_saturation != without) & (theirs == with_saturation)


def check_directml_mode(op, model, feeds, num, den, zero_point, error_bound, reference="ort-exact") -> collections.Counter:
    """arithmetic="directml" gives the correctly rounded exact value ``num / den`` (plus zero point);
    onnxruntime with exact integer GEMMs differs from it only where :func:`classify_mismatches` explains.

    ``reference`` is "ort" where "ort-exact" cannot run and plain onnxruntime is exact anyway
    (int8-activation QLinearConv: its int8 weights become uint8, which has no kernel).
    """
    actual = run_dml(model, feeds, "directml")
    expected = quantize_exact(num, den, zero_point, actual.dtype)
    wrong = np.flatnonzero(actual != expected)
    assert wrong.size == 0, (
        f"{wrong.size}/{actual.size} not correctly rounded, first at {wrong[:5]}: "
        f"dml_ep {actual.reshape(-1)[wrong[:5]]} exact {expected.reshape(-1)[wrong[:5]]}"
    )
    theirs = run_ort(model, feeds, reference)
    saturated = saturated_by_onnxruntime(model, feeds, theirs)
    counts = classify_mismatches(actual, np.where(saturated, actual, theirs), num, den, error_bound, zero_point)
    counts["u8s8 saturation"] += int(np.count_nonzero(saturated))
    return counts
