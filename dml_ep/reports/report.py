"""What a comparison found, as data: each tensor's comparison (:class:`TensorComparison`), each
node's (:class:`NodeComparison`, with the causes :mod:`dml_ep.conformance.causes` found), each model's
(:class:`ModelReport`) and each shipped output's (:class:`ShippedComparison`). The text, JSON, HTML
and Model Explorer reports read these; :mod:`dml_ep.conformance.compare` makes them.

- Differences are counted in quantized steps (LSB) where a tensor has one: the integer difference
  for integer tensors, and for float tensors made by DequantizeLinear with a per-tensor constant
  scale, the difference divided by that scale. Signed differences are dml_ep minus reference.
- An element is within tolerance (:class:`Tolerance`) when it is within ``steps`` steps of the
  reference (tensors with a step; default 0: bit-exact), or within Polygraphy's ``--atol``/``--rtol``
  of it, as Polygraphy's element-wise check reads them: out when ``|d| > atol`` and
  ``|d| / |reference| > rtol``. Their defaults are 0 for tensors with a step and FLOAT_ATOL and
  FLOAT_RTOL (Polygraphy's) for other float tensors.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np
import onnx

from ..core.choices import FLOAT_ATOL, FLOAT_RTOL
from ..core.tensor_desc import DML_BUFFER_TENSOR_DESC
from ..operators.base import OperatorDesc
from ..planning.plan import Plan
from ..planning.planner import Planner

HISTOGRAM_STEPS = (-2, -1, 1, 2)
DEVICE_PRECISION = "DirectML device precision"  # within the operator's envelope (Operator.device_precision) of the "directml" value
CAUSES = ("tie rounding", "float32 rounding", "u8s8 saturation", "int8 activations", "float16 weights", "float summation order",
          DEVICE_PRECISION, "graph", "random values", "other")
NONE, OTHER = -1, CAUSES.index("other")  # an element's cause (causes.classify): an index into CAUSES, NONE where equal


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How far the candidate may be from the reference: ``steps`` quantized steps, or Polygraphy's
    absolute and relative tolerances, each by tensor name, "" for every tensor not named."""

    steps: int = 0
    atol: dict[str, float] = dataclasses.field(default_factory=dict)
    rtol: dict[str, float] = dataclasses.field(default_factory=dict)

    def of(self, name: str, quantized: bool) -> tuple[float, float]:
        """(atol, rtol) of one tensor; ``quantized``: it has a step, so both default to 0."""
        atol, rtol = (0.0, 0.0) if quantized else (FLOAT_ATOL, FLOAT_RTOL)
        return self.atol.get(name, self.atol.get("", atol)), self.rtol.get(name, self.rtol.get("", rtol))

    def describe(self) -> str:
        """As the report's heading gives it, e.g. "0 step(s), atol 1e-3"."""
        polygraphy = [f"{flag} {_per_name(values)}" for flag, values in (("atol", self.atol), ("rtol", self.rtol)) if values]
        return ", ".join([f"{self.steps} step(s)", *polygraphy])

    def to_dict(self) -> dict:
        return {"steps": self.steps, "atol": dict(self.atol), "rtol": dict(self.rtol)}


def _per_name(values: dict[str, float]) -> str:
    return " ".join(f"{name}:{value:g}" if name else f"{value:g}" for name, value in values.items())


EXACT = Tolerance()


@dataclasses.dataclass
class TensorComparison:
    """dml_ep's values of one tensor against onnxruntime's.

    ``max_diff`` and ``mean_diff`` (the mean over the differing elements) are in LSB when the
    tensor has a quantized ``step``, else in the tensor's own units. ``histogram`` counts the
    differing elements by signed step: "-2", "-1", "+1", "+2" and "other". ``max_ulps``: for a
    float tensor without a step, the largest difference in units in the last place of its float
    type at the reference's largest magnitude, None otherwise.
    """

    name: str
    dtype: str
    shape: list[int]
    elements: int
    equal: int
    step: float | None
    max_diff: float
    mean_diff: float
    histogram: dict[str, int] | None
    within_tolerance: bool
    problem: str | None = None
    max_ulps: float | None = None
    candidate_shape: list[int] | None = None  # dml_ep's shape, where it is not the reference's (``shape``)

    @property
    def exact_percent(self) -> float:
        return 100.0 * self.equal / self.elements if self.elements else 100.0

    @property
    def differing(self) -> int:
        return self.elements - self.equal

    @property
    def unit(self) -> str:
        return "LSB" if self.step is not None else "abs"

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "exact_percent": self.exact_percent, "differing": self.differing, "unit": self.unit}


def compare_tensors(name: str, actual: np.ndarray, expected: np.ndarray, step: float | None,
                    tolerance: Tolerance = EXACT, sides: tuple[str, str] = ("dml_ep", "onnxruntime")) -> TensorComparison:
    """Compare ``actual`` (dml_ep) with ``expected`` (onnxruntime); ``step`` is one LSB, or None.
    ``sides`` names the two where their types or shapes differ (a saved runner's outputs: its name)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    base: dict[str, Any] = dict(name=name, dtype=str(expected.dtype), shape=list(expected.shape), elements=int(expected.size), step=step)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        problem = f"{sides[0]} gives {actual.dtype} {list(actual.shape)}, {sides[1]} {expected.dtype} {list(expected.shape)}"
        return TensorComparison(**base, equal=0, max_diff=float("inf"), mean_diff=float("inf"), histogram=None, within_tolerance=False, problem=problem,
                                candidate_shape=list(actual.shape) if actual.shape != expected.shape else None)
    equal, diff = differences(actual, expected)
    histogram = None
    if step is not None:
        steps = np.rint(diff[~equal] / step)
        histogram = {f"{s:+d}": int(np.count_nonzero(steps == s)) for s in HISTOGRAM_STEPS}
        histogram["other"] = int(steps.size - sum(histogram.values()))
        magnitude = np.abs(steps)
    else:
        magnitude = np.abs(diff[~equal])
    within = not beyond_tolerance(name, diff, expected, step, tolerance).any()
    return TensorComparison(
        **base,
        equal=int(np.count_nonzero(equal)),
        max_diff=float(magnitude.max()) if magnitude.size else 0.0,
        mean_diff=float(magnitude.mean()) if magnitude.size else 0.0,
        histogram=histogram,
        within_tolerance=within,
        max_ulps=max_ulps(diff, expected, equal) if step is None and expected.dtype.kind == "f" else None,
    )


def max_ulps(diff: np.ndarray, expected: np.ndarray, equal: np.ndarray) -> float:
    """The largest difference in units in the last place of the float type at the reference's
    largest finite magnitude (the tensor's scale: near zero a value's own ulp says little); 0 where
    none differ."""
    if equal.all():
        return 0.0
    finite = np.abs(expected[np.isfinite(expected)])
    return float(np.abs(diff[~equal]).max() / ulp(finite.max() if finite.size else 1.0, expected.dtype))


def ulp(magnitude, dtype: np.dtype | type):
    """The unit in the last place of ``dtype`` at ``magnitude`` (finite, >= 0; a number or an array),
    in float64, from its exponent: np.spacing overflows (a warning) at the type's largest value,
    which attention masks (-3.4e38) hold."""
    info = np.finfo(dtype)
    exponent = np.frexp(np.asarray(magnitude, np.float64))[1]
    return np.maximum(np.ldexp(1.0, exponent - info.nmant - 1), float(info.smallest_subnormal))


def differences(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which elements are equal (NaN on both sides, or the same infinity, counts as equal), and
    ``actual - expected`` in float64 where they are not (inf where one side is NaN), 0 where they
    are: subtracting only there, since inf - inf would be NaN and a numpy warning."""
    a, e = np.asarray(actual).astype(np.float64), np.asarray(expected).astype(np.float64)
    equal = (a == e) | (np.isnan(a) & np.isnan(e))
    diff = np.subtract(a, e, out=np.zeros_like(a), where=~equal)
    diff[np.isnan(diff)] = np.inf
    return equal, diff


def out_of_tolerance(name: str, actual: np.ndarray, expected: np.ndarray, step: float | None, tolerance: Tolerance = EXACT) -> np.ndarray:
    """Which elements of tensor ``name``'s ``actual`` are out of tolerance of ``expected`` (same
    shape and dtype). NaN on both sides is equal, on one side out of tolerance, as is any value
    against an infinity it is not."""
    return beyond_tolerance(name, differences(actual, expected)[1], expected, step, tolerance)


def beyond_tolerance(name: str, diff: np.ndarray, expected: np.ndarray, step: float | None, tolerance: Tolerance) -> np.ndarray:
    """:func:`out_of_tolerance` from the differences :func:`differences` gave. The relative
    difference is Polygraphy's: against the reference, a float zero taken as 2^-52."""
    diff = np.abs(diff)
    atol, rtol = tolerance.of(name, step is not None)
    e = np.abs(np.asarray(expected, np.float64))
    if expected.dtype.kind == "f":
        e = np.where(e == 0, np.finfo(np.float64).eps, e)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = diff / e
    out = (diff > atol) & ~(relative <= rtol)  # ~(<=): a NaN relative difference (inf / inf) is out
    if step is not None:
        out &= np.rint(diff / step) > tolerance.steps
    return out


@dataclasses.dataclass
class NodeComparison:
    """One plan entry: its outputs after both full runs, and (DML nodes) its output in isolation."""

    node: str
    op_type: str
    runs_on: str
    propagated: list[TensorComparison]
    isolated: TensorComparison | None = None
    desc: dict | None = None
    causes: dict[str, int] = dataclasses.field(default_factory=dict)
    # those of the elements out of tolerance, when it differs in isolation: a float output's
    # within-tolerance float32 rounding must not outvote the one saturated element that fails it
    causes_out_of_tolerance: dict[str, int] = dataclasses.field(default_factory=dict)
    graph: str | None = None  # what the CPU and DML graphs do differently with this node
    not_isolated: str | None = None  # why it was not run on the reference's inputs (their shapes are not those dml_ep ran)
    precision_rule: str | None = None  # the device precision's source, where that is a cause of its differences

    @property
    def differs_in_isolation(self) -> bool:
        return self.isolated is not None and not self.isolated.within_tolerance

    @property
    def inexact_in_isolation(self) -> bool:
        """Not bit-exact in isolation, though maybe within tolerance (a float output)."""
        return self.isolated is not None and self.isolated.differing > 0

    @property
    def cause(self) -> str | None:
        """The cause of most of the differing elements in isolation; of those out of tolerance, when
        it differs in isolation."""
        if not self.inexact_in_isolation or not self.causes:
            return None
        counts = self.causes_out_of_tolerance if self.differs_in_isolation and self.causes_out_of_tolerance else self.causes
        return max(CAUSES, key=lambda c: counts.get(c, 0))

    def put_down(self, labels: np.ndarray, result: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> None:
        """Set ``causes`` from each element's cause in isolation (``labels``, see :func:`tally`), and
        ``causes_out_of_tolerance`` from those of the elements out of tolerance."""
        self.causes = tally(labels)
        if self.differs_in_isolation and self.isolated is not None and self.isolated.problem is None:
            isolated = self.isolated
            self.causes_out_of_tolerance = tally(labels[out_of_tolerance(isolated.name, result, expected, isolated.step, tolerance)])

    @property
    def cause_text(self) -> str:
        """The cause, with what differs for a "graph" one; or why the node was not run in isolation."""
        if self.not_isolated:
            return self.not_isolated
        cause = self.cause or ""
        if cause == DEVICE_PRECISION and self.precision_rule:
            return f"{cause}: {self.precision_rule}"
        return f"{cause}: {self.graph}" if cause == "graph" and self.graph else cause

    def to_dict(self) -> dict:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "runs_on": self.runs_on,
            "propagated": [c.to_dict() for c in self.propagated],
            "isolated": self.isolated.to_dict() if self.isolated else None,
            "desc": self.desc,
            "causes": self.causes,
            "causes_out_of_tolerance": self.causes_out_of_tolerance,
            "cause": self.cause,
            "graph": self.graph,
            "not_isolated": self.not_isolated,
            "precision_rule": self.precision_rule,
        }


def tally(labels: np.ndarray) -> dict[str, int]:
    """Elements by cause, in CAUSES' order, from their labels (:func:`classify`)."""
    counts = np.bincount(labels[labels != NONE].ravel(), minlength=len(CAUSES))
    return {cause: int(count) for cause, count in zip(CAUSES, counts) if count}


@dataclasses.dataclass
class ModelReport:
    """The comparison of one model on one set of inputs."""

    model: str
    reference: str
    arithmetic: str
    feature_level: str
    tolerance: Tolerance
    outputs: list[TensorComparison]
    plan: dict  # Plan.summary(): what ran on DirectML
    candidate: str = "dml_ep"  # or another onnxruntime configuration, compared with the reference
    nodes: list[NodeComparison] | None = None
    # the graph outputs compared, kept for saving them (compare --save-outputs) and for shipped outputs
    candidate_outputs: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    reference_outputs: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    shipped: list[ShippedComparison] | None = None  # a model zoo data set's outputs: compare_shipped
    dml_plan: Plan | None = dataclasses.field(default=None, repr=False, compare=False)  # what the real EP runs, for pictures of it
    dml_planner: Planner | None = dataclasses.field(default=None, repr=False, compare=False)  # dml_plan's: its whole graph (rewritten_model)

    @property
    def on_dml(self) -> bool:
        """Whether dml_ep ran anything on DirectML: otherwise all of it ran on onnxruntime's CPU EP
        (and so did a CPU reference)."""
        return self.plan["dml"]["operators"] > 0

    @property
    def ok(self) -> bool:
        return all(o.within_tolerance for o in self.outputs) and not any(s.faults_candidate for s in self.shipped or ())

    @property
    def first_divergent(self) -> NodeComparison | None:
        """The first node, in topological order, that differs in isolation."""
        return next((n for n in self.nodes or () if n.differs_in_isolation), None)

    @property
    def cause_counts(self) -> dict[str, int]:
        """How many nodes differ in isolation, by cause."""
        counts = collections.Counter(n.cause for n in self.nodes or () if n.differs_in_isolation)
        return {cause: counts[cause] for cause in CAUSES if counts[cause]}

    @property
    def within_tolerance_cause_counts(self) -> dict[str, int]:
        """How many nodes are within tolerance in isolation but not bit-exact (float outputs), by
        cause: differences that later nodes may grow past the tolerance."""
        counts = collections.Counter(n.cause for n in self.nodes or () if n.inexact_in_isolation and not n.differs_in_isolation)
        return {cause: counts[cause] for cause in CAUSES if counts[cause]}

    def to_dict(self) -> dict:
        first = self.first_divergent
        return {
            "model": self.model,
            "reference": self.reference,
            "candidate": self.candidate,
            "arithmetic": self.arithmetic,
            "feature_level": self.feature_level,
            "tolerance": self.tolerance.to_dict(),
            "ok": self.ok,
            "plan": self.plan,
            "outputs": [o.to_dict() for o in self.outputs],
            "cause_counts": self.cause_counts,
            "within_tolerance_cause_counts": self.within_tolerance_cause_counts,
            "first_divergent": first.to_dict() if first else None,
            "nodes": None if self.nodes is None else [n.to_dict() for n in self.nodes],
            "shipped": None if self.shipped is None else [s.to_dict() for s in self.shipped],
        }


@dataclasses.dataclass
class ShippedComparison:
    """A model zoo data set's shipped output (``output_<i>.pb``) against the reference's and the
    candidate's values, within the report's tolerance.

    Shipped outputs were often made by another runtime and may differ from onnxruntime's by a
    step, so they judge the candidate only where the reference matches them: the candidate is at
    fault when the reference's output is within tolerance of the shipped one and its own is not.
    """

    name: str
    reference: TensorComparison
    candidate: TensorComparison

    @property
    def faults_candidate(self) -> bool:
        return self.reference.within_tolerance and not self.candidate.within_tolerance

    def to_dict(self) -> dict:
        return {"name": self.name, "reference": self.reference.to_dict(), "candidate": self.candidate.to_dict(),
                "faults_candidate": self.faults_candidate}


def node_label(node: onnx.NodeProto) -> str:
    """A node's name, or for an unnamed node its op type and first output."""
    return node.name or f"<{node.op_type} -> {node.output[0] if node.output else ''}>"


def desc_summary(desc: OperatorDesc) -> dict:
    """A desc in short: operator type, tensors as ``UINT8 {1,16,32,32}``, other fields as they are."""
    summary: dict[str, object] = {"Type": str(desc.OPERATOR_TYPE)}
    for field in dataclasses.fields(desc):
        value = getattr(desc, field.name)
        if isinstance(value, DML_BUFFER_TENSOR_DESC):
            summary[field.name] = value.describe()
        elif isinstance(value, OperatorDesc):
            summary[field.name] = str(value.OPERATOR_TYPE)
        elif value is not None:
            summary[field.name] = [v.describe() if isinstance(v, DML_BUFFER_TENSOR_DESC) else v for v in value] if isinstance(value, tuple) else value
    return summary
