"""Why dml_ep and its reference differ, element by element: the arithmetic that reproduces the
reference's value, or DirectML's exact value to tell a tie from float32 rounding.

- A node that differs in isolation is run again under the other arithmetics of
  :mod:`dml_ep.numerics.arithmetic`; each differing element is put down to the first one that reproduces
  onnxruntime's value there. When only the rounding arithmetic changes (directml vs onnxruntime),
  the cause is "tie rounding" if DirectML's exact value (dequantize, operate, divide by the output
  scale, in exact fractions) lies exactly halfway between two integers, which DirectML rounds to
  even and onnxruntime's float32 error pushes to one side; otherwise "float32 rounding" (the exact
  value is near, not at, a half-integer, and onnxruntime's float32 requantization multiplier or
  fused multiply-add lands on the other side). "u8s8 saturation" when the int16 saturation of
  uint8 x int8 product pairs changes; then "DirectML device precision" for a float output within its
  operator's ``device_precision`` of dml_ep's "directml" value (what a Direct3D 12 device may
  compute: D3D11.3's bounds, WebNN's tolerances; the rule is the node's ``precision_rule``); else
  "other". The node's cause is that of most of its
  elements out of tolerance, so that a float output's many float32 rounding differences within
  it do not outvote the few saturated elements that fail it.
- A float16 SkipLayerNormalization's graph: "graph" (:data:`SKIP_SUM_ROUNDING`) where only the "onnxruntime"
  arithmetic's float32 sum gives the reference's value, not its normalization of the graph's float16 sum
  (:func:`rounded_skip_sum`).
- A DirectML graph whose output is a float product (its row's ``exact_products``: MatMulNBits'
  DEQUANTIZE -> GEMM against onnxruntime's CPU kernel): "int8 activations" where the reference is
  the CPU's other computation (A quantized to int8 per block at accuracy level 4, CompInt8), which
  DirectML never does; "float16 weights" where DirectML's own product (a float16 model's
  dequantized weights, float16 on DirectML, float32 on the CPU) moves off the exact one; "float
  summation order" where the reference lies within a float32 GEMM's rounding bound of the exact
  product it computes (``(K + 2) * 2^-24`` of the sum of magnitudes, and an ulp).
- A float sum of products (GEMM, CONVOLUTION: an operator with ``exact_float``), a float output:
  "float summation order" where another arithmetic gives the reference's value, or where the
  reference lies within a float32 sum's rounding bound of the exact value (as above): DirectML
  documents no order, and onnxruntime's MLAS kernels sum in their own.
- The real DML EP as reference ("dml") computes in float32 on the GPU, as "ort-unfused" does on
  the CPU: a value next to DirectML's exact one is its float32 rounding. Its products are exact,
  so u8s8 saturation is a cause only where dml_ep itself saturates, and no CPU-only QDQ rule
  applies: a group such a rule would fuse runs as DQ -> op -> Q there too, and its differences
  (the real EP may run the op on the GPU, which dml_ep does not model) are "other".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

import numpy as np

from ..core.tensor_desc import left_pad
from ..numerics.arithmetic import Arithmetic
from ..numerics.engines import get_engine
from ..numerics.kernels.parameters import parameter4d
from ..operators.base import DevicePrecision, OperatorDesc
from ..operators.dml_graph import FloatProducts
from ..operators.mean_variance_normalization import SKIP_SUM_FIELDS
from ..operators.nodes import DmlNode
from ..operators.registration import operator_of
from ..ort.reference import DML_REFERENCE
from ..reports.report import CAUSES, DEVICE_PRECISION, NONE, OTHER

# References whose uint8 x int8 products are exact: no u8s8 saturation to mimic, nor to blame.
EXACT_PRODUCTS = ("ort-exact", DML_REFERENCE)
# References that compute quantized groups in float32 and then quantize (see classify).
FLOAT_REFERENCES = ("ort-unfused", DML_REFERENCE)


def classify(entry: DmlNode, reference: dict, result: np.ndarray, expected: np.ndarray, alternatives,
             float_reference: bool = False, float32_inputs: bool = False) -> np.ndarray:
    """Each element's cause (see :func:`tally`): the first alternative arithmetic that gives the
    reference's value, with the rounding differences at exact ties told apart from the float32 ones.

    ``float_reference``: the reference computed the op in float32 and then quantized (onnxruntime
    without QDQ fusion, "ort-unfused"), which no arithmetic here reproduces; where it gave the
    other integer next to the exact value, its float32 rounding landed on the other side of the half.

    ``float32_inputs``: the reference read float32 values where it shows their float16 rounding (a float32
    chain, :mod:`.float32_chains`): what no arithmetic reproduces is "graph", no cause of the node's own.
    """
    unexplained = result != expected
    labels = np.where(unexplained, OTHER, NONE)

    def put(cause: str, explained: np.ndarray) -> None:
        unexplained[explained] = False
        ties = exact_ties(entry, reference, explained) if cause == "float32 rounding" else np.zeros_like(explained)
        labels[explained & ~ties] = CAUSES.index(cause)
        labels[ties] = CAUSES.index("tie rounding")

    saturable = may_saturate(entry.desc)
    exact_float = operator_of(entry.desc).exact_float  # a float sum of products: the arithmetics differ in the order of its sums
    point_value = result  # dml_ep's "directml" value, the alternative's where ``result`` is another arithmetic's
    for cause, executor in alternatives:
        if cause == "u8s8 saturation" and not saturable:  # the alternative changes its rounding only
            cause = "float32 rounding"
        if cause == "float32 rounding" and exact_float is not None:
            cause = "float summation order"
        output = first_output(entry, executor.run_dml(entry, reference))
        if not executor.arithmetic.onnxruntime:
            point_value = output
        put(cause, unexplained & (output == expected))
    if float32_inputs:
        put("graph", unexplained.copy())
    if float_reference and unexplained.any():
        put("float32 rounding", unexplained & next_to_exact(entry, reference, unexplained, expected))
    if exact_float is not None and unexplained.any():  # a float sum no arithmetic here orders as the reference does
        put("float summation order", within_float_sum(entry, reference, expected, unexplained))
    if unexplained.any():
        put(DEVICE_PRECISION, unexplained & within_device_precision(entry.desc, point_value, expected))
    return labels


SKIP_SUM_ROUNDING = ("the real EP's graph rounds input + skip to float16 (ELEMENT_WISE_ADD) before MEAN_VARIANCE_NORMALIZATION2, "
                     "where onnxruntime's SkipLayerNormalization normalizes their float32 sum")


def rounded_skip_sum(entry: DmlNode, reference: Mapping) -> dict | None:
    """For the MVN2 of a float16 SkipLayerNormalization's graph, which binds its sum's operands (input, skip; no
    bias): the reference's values with the input replaced by the float16 sum and the skip by zeros, on which the
    "onnxruntime" arithmetic normalizes the rounded sum as the graph does (what it explains is the normalization's
    own rounding; what only the float32 sum explains, :data:`SKIP_SUM_ROUNDING`); else None."""
    names = entry.names
    operand, skip = names.get(SKIP_SUM_FIELDS[0]), names.get(SKIP_SUM_FIELDS[1])
    if not operand or not skip or operand == skip or names.get(SKIP_SUM_FIELDS[2]) or operand not in reference or skip not in reference:
        return None
    values = dict(reference)
    values[operand] = (reference[operand].astype(np.float32) + reference[skip].astype(np.float32)).astype(reference[operand].dtype)
    values[skip] = np.zeros_like(reference[skip])
    return values


def device_precision(desc: OperatorDesc) -> DevicePrecision | None:
    """The envelope a Direct3D 12 device may compute ``desc``'s output within (its operator's
    ``device_precision``), None for an operator without one."""
    precision = operator_of(desc).device_precision
    return precision(desc) if callable(precision) else precision


def graph_precision(descs) -> DevicePrecision | None:
    """The envelope of DirectML operators run one after another (a DML EP graph of one node): their
    envelopes summed, as WebNN's conformance tests sum a graph's per-operator tolerances
    (``getPrecisionTolerance``); None where no operator has one."""
    parts = [p for p in map(device_precision, descs) if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return DevicePrecision(" + ".join(p.rule for p in parts), *(sum(getattr(p, f) for p in parts) for f in ("ulp32", "ulp16", "atol32", "atol16")))


def precision_rule(descs, causes: Mapping[str, int]) -> str | None:
    """The source of the device precision of ``descs`` (one desc, or a graph's, in order) where it is
    one of the ``causes``, for the report."""
    if DEVICE_PRECISION not in causes:
        return None
    precision = graph_precision(descs) if isinstance(descs, (list, tuple)) else device_precision(descs)
    return None if precision is None else precision.rule


def within_device_precision(desc: OperatorDesc, point_value: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Which elements of ``expected`` lie within the device precision of ``desc``'s operator around
    dml_ep's "directml" ``point_value``: within its ULP count (WebNN's distance, the difference of
    the bit patterns) or its absolute tolerance, by the output's float type. All False for
    operators without an envelope and for non-float outputs."""
    return within(device_precision(desc), point_value, expected)


def within(precision: DevicePrecision | None, point_value: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Which elements of ``expected`` lie within ``precision`` of ``point_value`` (see
    :func:`within_device_precision`)."""
    point_value, expected = np.asarray(point_value), np.asarray(expected)
    if precision is None or expected.dtype not in (np.float32, np.float16) or point_value.shape != expected.shape:
        return np.zeros(expected.shape, dtype=bool)
    half = expected.dtype == np.float16
    ulps, atol = (precision.ulp16, precision.atol16) if half else (precision.ulp32, precision.atol32)
    candidate = point_value.astype(expected.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(candidate.astype(np.float64) - expected.astype(np.float64)) <= atol
    return near | (ulp_distance(candidate, expected) <= ulps)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """WebNN's ULP distance of two float32 or float16 arrays (wpt webnn/resources/utils.js
    ``ulpDistance``): the difference of their bit patterns read as sign-magnitude integers, so +0
    and -0 are 0 apart and the distance runs across zero; infinite for a NaN."""
    bits = np.int32 if a.dtype == np.float32 else np.int16
    sign = np.int64(1) << (8 * np.dtype(bits).itemsize - 1)

    def ordered(x):
        raw = np.ascontiguousarray(x).view(bits).astype(np.int64)
        return np.where(raw < 0, -(raw & (sign - 1)), raw)

    distance = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    distance[np.isnan(a) | np.isnan(b)] = np.inf
    return distance


def within_float_sum(entry: DmlNode, values: Mapping, expected: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Which elements ``where`` of a float sum of products (an operator with ``exact_float``: GEMM,
    CONVOLUTION) run on ``values`` have the reference's value within a float32 sum's rounding bound
    of the exact one: the reference summed in another order. All False for other operators."""
    exact_float = operator_of(entry.desc).exact_float
    if exact_float is None or not where.any():
        return np.zeros(where.shape, dtype=bool)
    value, magnitude, k = exact_float(entry.desc, bound_tensors(entry, values))
    labels = product_causes(FloatProducts((value.reshape(expected.shape), magnitude.reshape(expected.shape)), k), expected, where)
    return labels == CAUSES.index("float summation order")


def bound_tensors(entry: DmlNode, values: Mapping) -> dict:
    """The arrays ``entry``'s desc fields are bound to: its constants, and ``values`` of the rest."""
    return {field: b if isinstance(b, np.ndarray) else values[b] for field, b in entry.inputs.items()}


def may_saturate(desc: OperatorDesc) -> bool:
    """Whether ``desc`` is a product whose operands onnxruntime's GEMM takes as uint8 x int8, the
    pairs an AVX2 CPU without VNNI saturates (no other operator can have that cause)."""
    prepared = operator_of(desc).prepared
    return prepared is not None and Arithmetic("onnxruntime", True).saturates_u8s8(*prepared.onnxruntime_operands(desc))


def exact_for_any_input(desc: OperatorDesc) -> bool:
    """Whether no arithmetic can make ``desc``'s output differ for one input (its operator's
    ``exact_for_any_input``): then a difference in isolation is the reference's graph, not arithmetic."""
    exact = operator_of(desc).exact_for_any_input
    return exact(desc) if callable(exact) else exact


def first_output(entry: DmlNode, result):
    """A DML node's first output from what ``run_dml`` gives (a list for an operator of several
    outputs: the others, DYNAMIC_QUANTIZE_LINEAR's scale and zero point, are compared where read)."""
    return result[0] if entry.more_outputs else result


def next_to_exact(entry: DmlNode, values: dict, where: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Which of the elements ``where`` of ``expected`` are one of the two integers next to
    DirectML's exact value (before its zero point is added)."""

    def near(tensors, index, exact):
        shape = left_pad(expected.shape, 4)
        zero_point = np.broadcast_to(parameter4d(tensors, entry.desc, "OutputZeroPointTensor"), shape).reshape(-1)[index]
        codes = expected.reshape(-1)[index].astype(np.int64) - zero_point.astype(np.int64)
        return [abs(int(code) - value) < 1 for code, value in zip(codes, exact)]

    return _where_exact(entry, values, where, near)


def exact_ties(entry: DmlNode, values: dict, where: np.ndarray) -> np.ndarray:
    """Which of the elements ``where`` have DirectML's exact value halfway between two integers."""
    return _where_exact(entry, values, where, lambda tensors, index, exact: [value.denominator == 2 for value in exact])


def _where_exact(entry: DmlNode, values: dict, where: np.ndarray, test) -> np.ndarray:
    """``test(tensors, index, exact values)`` at the elements ``where``, False elsewhere and for
    operators without an exact value."""
    result = np.zeros(where.shape, dtype=bool)
    index = np.flatnonzero(where)
    tensors = bound_tensors(entry, values)
    exact = ideal_values(entry.desc, tensors, index) if index.size else None
    if exact is not None:
        result.reshape(-1)[index] = test(tensors, index, exact)
    return result


def ideal_values(desc: OperatorDesc, tensors: dict, index: np.ndarray) -> list[Fraction] | None:
    """DirectML's value of a quantized operator before rounding, at the flat output ``index``:
    the dequantized operation divided by the output scale (the zero point, an integer, left out).

    Ideals, not a device's value (the "directml" kernels compute float32 point values where
    DirectML divides in float, e.g. QuantizeLinear's quotient): they tell an exact tie from a
    float32 rounding. Evaluated in exact fractions, since float rounding must not decide what is a tie; each value is
    ``sum(integer * scale) / OutputScale``, the integers exact in float64 (the operator's
    ``exact_value``, from the operator table). None for operators that do not quantize.
    """
    exact_value = operator_of(desc).exact_value
    if exact_value is None:
        return None
    terms, output_scale = exact_value(desc, tensors, get_engine("numpy"))  # the integer core on the engine that needs no session
    shape = np.broadcast_shapes(*(np.shape(array) for term in terms for array in term), np.shape(output_scale))

    def at(array) -> list[Fraction]:
        return [Fraction(float(v)) for v in np.broadcast_to(array, shape).reshape(-1)[index]]

    products = [[i * s for i, s in zip(at(integers), at(scales))] for integers, scales in terms]
    return [sum(values) / divisor for *values, divisor in zip(*products, at(output_scale))]


def alternative_arithmetics(used: Arithmetic, saturating: bool = True) -> list[tuple[str, Arithmetic]]:
    """The arithmetics other than ``used``, each labelled by what it changes, fewest changes first;
    none that saturates u8s8 products unless the reference may (``saturating``)."""

    def key(arith):
        return arith.mode, bool(arith.onnxruntime and arith.u8s8_saturation)

    variants = [Arithmetic("onnxruntime", False), Arithmetic("onnxruntime", True), Arithmetic("directml")]
    if not saturating:
        variants.remove(Arithmetic("onnxruntime", True))
    changes = []
    for arith in variants:
        mode_changes, saturation_changes = (a != b for a, b in zip(key(arith), key(used)))
        if mode_changes or saturation_changes:
            cause = "u8s8 saturation" if saturation_changes else "float32 rounding"
            changes.append((mode_changes + saturation_changes, cause, arith))
    return [(cause, arith) for _, cause, arith in sorted(changes, key=lambda c: c[0])]


def describe_arithmetic(arith: Arithmetic) -> str:
    return arith.mode + (" (u8s8 saturation)" if arith.onnxruntime and arith.u8s8_saturation else "")


def product_causes(products: FloatProducts, expected: np.ndarray, unexplained: np.ndarray) -> np.ndarray:
    """The causes of a float product's differences (an index into CAUSES each ``unexplained``
    element, OTHER where none holds), each a value of ``products`` the reference lies within a
    float32 GEMM's rounding bound of: the exact product ("float summation order"; "float16 weights"
    where DirectML's own product moves off it), or only the CPU's other computation ("int8
    activations": a host whose MLAS has no CompInt8 kernel computes level 4 as level 0)."""

    def reproduces(value, magnitude):
        bound = (products.terms + 2) * 2.0**-24 * magnitude + np.spacing(np.abs(expected)).astype(np.float64)
        return np.abs(np.asarray(expected, np.float64) - value) <= bound

    labels = np.full(expected.shape, OTHER)
    plain = reproduces(*products.exact)
    if products.cpu is not None:
        labels[reproduces(*products.cpu) & ~plain] = CAUSES.index("int8 activations")
    if products.on_dml is not None:
        labels[plain & ~reproduces(products.on_dml, products.exact[1])] = CAUSES.index("float16 weights")
    labels[plain & (labels == OTHER)] = CAUSES.index("float summation order")
    return np.where(unexplained, labels, NONE)
