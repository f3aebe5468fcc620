"""Conformance of dml_ep with onnxruntime's CPU EP, or with the real DML EP: output by output, and node by node.

Design notes:

- Differences are counted in quantized steps (LSB) where a tensor has one: the integer difference
  for integer tensors, and for float tensors made by DequantizeLinear with a per-tensor constant
  scale, the difference divided by that scale. A tensor within tolerance differs by at most
  ``atol`` steps (default 0: bit-exact). Other float tensors pass when every element satisfies
  ``|dml_ep - reference| <= FLOAT_ATOL + FLOAT_RTOL * |reference|``. Signed differences are
  dml_ep minus reference.
- Node by node, onnxruntime exposes every intermediate value (a copy of the model lists them as
  graph outputs). Each DML node also runs *isolated*, fed onnxruntime's values for its inputs, so
  its verdict does not inherit upstream differences.
- A node that differs in isolation is run again under the other arithmetics of
  :mod:`dml_ep.arithmetic`; each differing element is put down to the first one that reproduces
  onnxruntime's value there. When only the rounding arithmetic changes (directml vs onnxruntime),
  the cause is "tie rounding" if DirectML's exact value (dequantize, operate, divide by the output
  scale, in exact fractions) lies exactly halfway between two integers, which DirectML rounds to
  even and onnxruntime's float32 error pushes to one side; otherwise "float32 rounding" (the exact
  value is near, not at, a half-integer, and onnxruntime's float32 requantization multiplier or
  fused multiply-add lands on the other side). "u8s8 saturation" when the int16 saturation of
  uint8 x int8 product pairs changes, else "other". The node's cause is that of most of its
  elements out of tolerance, so that a float output's many float32 rounding differences within
  it do not outvote the few saturated elements that fail it.
- The real DML EP as reference ("dml") computes in float32 on the GPU, as "ort-unfused" does on
  the CPU: a value next to DirectML's exact one is its float32 rounding. Its products are exact,
  so u8s8 saturation is a cause only where dml_ep itself saturates, and no CPU-only QDQ rule
  applies: a group such a rule would fuse runs as DQ -> op -> Q there too, and its differences
  (the real EP may run the op on the GPU, which dml_ep does not model) are "other".
- QDQ models: the reference applies onnxruntime's QDQ rules for CPU nodes, dml_ep those for DML
  nodes. Intermediates are matched by name (the rules keep the Q outputs' names); the float
  tensors inside QDQ groups (DQ outputs, Q inputs) are never listed as reference outputs, since
  that would keep onnxruntime from fusing the group. A group a CPU-only rule fuses on the
  reference (Mul -> QLinearMul) but DML runs as DQ -> op -> Q is run in isolation as a whole
  (fed onnxruntime's inputs of its DQs); its differences have the cause "graph".
- Saved outputs (Polygraphy's RunResults) can stand in for the reference's graph outputs. A model
  zoo data set's shipped outputs are compared with both sides, and fault the candidate only where
  the reference matches them (:class:`ShippedComparison`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import onnx

from .arithmetic import Arithmetic
from .errors import DmlEpError, FeedError, ModelError
from .executor import Executor
from .graph import load_model, ort_message
from .importer import DEFAULT_FEATURE_LEVEL
from .engines import get_engine
from .enums import DML_OPERATOR_TYPE as OP
from .kernels.parameters import parameter4d
from .operators.base import OperatorDesc
from .operators.element_wise_dequantize_linear import DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC
from .operators.registration import operator_of
from .passes import CPU, DEFAULT_RELEASE
from .passes.dml_graphs import GRAPHS as DML_GRAPHS
from .passes.qdq_util import is_dq, is_q
from .plan import DmlNode, Plan, PlanEntry
from .planner import Planner
from .reference import DML_REFERENCE, cpu_session, dml_session, require_dml
from .session import InferenceSession
from .tensor_desc import DML_BUFFER_TENSOR_DESC, left_pad

FLOAT_ATOL = 1e-5
FLOAT_RTOL = 1e-5
HISTOGRAM_STEPS = (-2, -1, 1, 2)
# What compare_model compares with its reference: dml_ep, or an onnxruntime configuration whose
# QDQ fusions dml_ep reproduces node by node (so not "ort-unfused").
CANDIDATES = ("dml_ep", "ort", "ort-exact")
CAUSES = ("tie rounding", "float32 rounding", "u8s8 saturation", "graph", "other")
NONE, OTHER = -1, CAUSES.index("other")  # an element's cause (classify): an index into CAUSES, NONE where equal
# References whose uint8 x int8 products are exact: no u8s8 saturation to mimic, nor to blame.
EXACT_PRODUCTS = ("ort-exact", DML_REFERENCE)
# References that compute quantized groups in float32 and then quantize (see classify).
FLOAT_REFERENCES = ("ort-unfused", DML_REFERENCE)


@dataclasses.dataclass
class TensorComparison:
    """dml_ep's values of one tensor against onnxruntime's.

    ``max_diff`` and ``mean_diff`` (the mean over the differing elements) are in LSB when the
    tensor has a quantized ``step``, else in the tensor's own units. ``histogram`` counts the
    differing elements by signed step: "-2", "-1", "+1", "+2" and "other".
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


def compare_tensors(name: str, actual: np.ndarray, expected: np.ndarray, step: float | None, atol: int = 0) -> TensorComparison:
    """Compare ``actual`` (dml_ep) with ``expected`` (onnxruntime); ``step`` is one LSB, or None."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    base: dict[str, Any] = dict(name=name, dtype=str(expected.dtype), shape=list(expected.shape), elements=int(expected.size), step=step)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        problem = f"dml_ep gives {actual.dtype} {list(actual.shape)}, onnxruntime {expected.dtype} {list(expected.shape)}"
        return TensorComparison(**base, equal=0, max_diff=float("inf"), mean_diff=float("inf"), histogram=None, within_tolerance=False, problem=problem)
    equal, diff = differences(actual, expected)
    histogram = None
    if step is not None:
        steps = np.rint(diff[~equal] / step)
        histogram = {f"{s:+d}": int(np.count_nonzero(steps == s)) for s in HISTOGRAM_STEPS}
        histogram["other"] = int(steps.size - sum(histogram.values()))
        magnitude = np.abs(steps)
    else:
        magnitude = np.abs(diff[~equal])
    within = not beyond_tolerance(diff, expected, step, atol).any()
    return TensorComparison(
        **base,
        equal=int(np.count_nonzero(equal)),
        max_diff=float(magnitude.max()) if magnitude.size else 0.0,
        mean_diff=float(magnitude.mean()) if magnitude.size else 0.0,
        histogram=histogram,
        within_tolerance=within,
    )


def differences(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which elements are equal (NaN on both sides, or the same infinity, counts as equal), and
    ``actual - expected`` in float64 where they are not (inf where one side is NaN), 0 where they
    are: subtracting only there, since inf - inf would be NaN and a numpy warning."""
    a, e = np.asarray(actual).astype(np.float64), np.asarray(expected).astype(np.float64)
    equal = (a == e) | (np.isnan(a) & np.isnan(e))
    diff = np.subtract(a, e, out=np.zeros_like(a), where=~equal)
    diff[np.isnan(diff)] = np.inf
    return equal, diff


def out_of_tolerance(actual: np.ndarray, expected: np.ndarray, step: float | None, atol: int = 0) -> np.ndarray:
    """Which elements of ``actual`` are out of tolerance of ``expected`` (same shape and dtype): more
    than ``atol`` steps off, or without a step, more than FLOAT_ATOL + FLOAT_RTOL * |expected|. NaN
    on both sides is equal, on one side out of tolerance, as is any value against an infinity it is not."""
    return beyond_tolerance(differences(actual, expected)[1], expected, step, atol)


def beyond_tolerance(diff: np.ndarray, expected: np.ndarray, step: float | None, atol: int) -> np.ndarray:
    """:func:`out_of_tolerance` from the differences :func:`differences` gave."""
    diff = np.abs(diff)
    if step is not None:
        return np.rint(diff / step) > atol
    e = np.abs(np.asarray(expected, np.float64))
    return diff > np.where(np.isinf(e), 0.0, FLOAT_ATOL + FLOAT_RTOL * e)


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

    def put_down(self, labels: np.ndarray, result: np.ndarray, expected: np.ndarray, atol: int) -> None:
        """Set ``causes`` from each element's cause in isolation (``labels``, see :func:`tally`), and
        ``causes_out_of_tolerance`` from those of the elements out of tolerance."""
        self.causes = tally(labels)
        if self.differs_in_isolation and self.isolated is not None and self.isolated.problem is None:
            self.causes_out_of_tolerance = tally(labels[out_of_tolerance(result, expected, self.isolated.step, atol)])

    @property
    def cause_text(self) -> str:
        """The cause, with what differs for a "graph" one."""
        cause = self.cause or ""
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
        }


@dataclasses.dataclass
class ModelReport:
    """The comparison of one model on one set of inputs."""

    model: str
    reference: str
    arithmetic: str
    feature_level: str
    atol: int
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
            "atol": self.atol,
            "ok": self.ok,
            "plan": self.plan,
            "outputs": [o.to_dict() for o in self.outputs],
            "cause_counts": self.cause_counts,
            "within_tolerance_cause_counts": self.within_tolerance_cause_counts,
            "first_divergent": first.to_dict() if first else None,
            "nodes": None if self.nodes is None else [n.to_dict() for n in self.nodes],
            "shipped": None if self.shipped is None else [s.to_dict() for s in self.shipped],
        }


def compare_model(
    model,
    feeds: dict[str, np.ndarray],
    *,
    reference: str = "ort",
    candidate: str = "dml_ep",
    arithmetic: str = "directml",
    u8s8_saturation: bool | None = None,
    feature_level=DEFAULT_FEATURE_LEVEL,
    qdq_rules: str | None = DEFAULT_RELEASE,
    atol: int = 0,
    per_node: bool = False,
    name: str | None = None,
    progress: Callable[..., None] | None = None,
    expected_outputs: dict[str, np.ndarray] | None = None,
    engine: str | None = None,
) -> ModelReport:
    """Run dml_ep and onnxruntime (``reference``) on ``feeds`` and compare every graph output.

    Nodes are compared too with ``per_node``, and whenever an output is out of tolerance, so that
    the report can say which nodes differ in isolation and why. With ``per_node`` onnxruntime runs
    once, exposing every intermediate; otherwise the intermediates cost a second run only when an
    output is out of tolerance. ``progress(stage, done, total)`` hears where a long run is.
    ``u8s8_saturation=None`` follows the reference: the host's onnxruntime for ``"ort"``, none for
    ``"ort-exact"`` and ``"dml"`` (their u8s8 products are exact). ``"dml"``, the real DML EP, is
    refused before any work where it cannot run (:func:`dml_ep.reference.require_dml`).

    ``candidate`` "ort" or "ort-exact" (see ``CANDIDATES``) compares that onnxruntime configuration
    with the reference instead: dml_ep then plans the graph onnxruntime's CPU EP runs and judges
    each node its QDQ rules made in isolation (:func:`compare_rewritten`).

    ``expected_outputs``, saved outputs (e.g. Polygraphy's RunResults), take the place of the
    reference's graph outputs; the reference still runs for the intermediate values.
    """
    if candidate not in CANDIDATES:
        raise DmlEpError(f"unknown candidate {candidate!r} (choose from {', '.join(CANDIDATES)})")
    if reference == DML_REFERENCE:
        require_dml()
    progress = progress or (lambda *args: None)
    # dml_ep's arithmetic mimics the reference, or in candidate mode the candidate
    if u8s8_saturation is None and (reference if candidate == "dml_ep" else candidate) in EXACT_PRODUCTS:
        u8s8_saturation = False
    proto = load_model(model)
    session = InferenceSession(
        proto, feature_level=feature_level, arithmetic=arithmetic, u8s8_saturation=u8s8_saturation, qdq_rules=qdq_rules,
        engine=engine,
    )
    feeds = session.check_feeds(feeds)
    output_names = [o.name for o in proto.graph.output]
    intermediates = exposable_intermediates(proto)
    shapes = {k: v.shape for k, v in feeds.items() if isinstance(v, np.ndarray)}
    if candidate == "dml_ep":
        executor = session.executor
        progress("running dml_ep")
        values = executor.run(feeds, keep_all=True)
        dml_plan = executor.plan
    else:
        executor = Executor(Planner(proto, feature_level, qdq_rules=qdq_rules, provider=CPU), Arithmetic("onnxruntime", u8s8_saturation), engine)
        executor.plan = executor.planner.plan_for_shapes(shapes)
        progress(f"running onnxruntime ({candidate})")
        values = {**feeds, **run_reference(proto, feeds, output_names + intermediates, candidate)}
        per_node = True  # the candidate's intermediates are there anyway
        dml_plan = session.planner.plan_for_shapes(shapes)
    steps = quantization_steps(executor.plan)
    progress("running onnxruntime")
    compared = output_names if expected_outputs is None else []  # saved outputs stand in for the reference's
    expected = run_reference(proto, feeds, compared + (intermediates if per_node else []), reference)
    if expected_outputs is not None:
        expected.update(check_saved_outputs(expected_outputs, {n: values[n] for n in output_names}))
    report = ModelReport(
        model=name or (os.fspath(model) if isinstance(model, (str, os.PathLike)) else proto.graph.name),
        reference=reference,
        arithmetic=describe_arithmetic(executor.arithmetic) if candidate == "dml_ep" else f"onnxruntime {candidate}",
        feature_level=str(executor.plan.feature_level),
        atol=atol,
        outputs=[compare_tensors(n, values[n], expected[n], step_of(n, expected[n], steps), atol) for n in output_names],
        plan=dml_plan.summary(),
        dml_plan=dml_plan,
        dml_planner=session.planner,
        candidate=candidate,
        candidate_outputs={n: values[n] for n in output_names},
        reference_outputs={n: expected[n] for n in output_names},
    )
    if per_node or not report.ok:
        if not per_node:
            progress("running onnxruntime for the intermediate values")
            expected.update(run_reference(proto, feeds, intermediates, reference))
        report.nodes = compare_nodes(executor, values, {**feeds, **expected}, steps, atol, progress,
                                     isolate=candidate == "dml_ep", against=reference)
    return report


def check_saved_outputs(saved: dict[str, np.ndarray], produced: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``saved`` arrays of the ``produced`` outputs, each of the same type and shape: saved
    outputs that do not fit were made for another model or other inputs, an input error
    (FeedError) rather than a mismatch."""
    for name, array in produced.items():
        if name not in saved:
            raise FeedError(f"the saved outputs have no {name!r} (they have {', '.join(map(repr, saved)) or 'none'})")
        if saved[name].dtype != array.dtype or saved[name].shape != array.shape:
            raise FeedError(f"saved output {name!r} is {saved[name].dtype} {list(saved[name].shape)}, "
                            f"the model gives {array.dtype} {list(array.shape)} on these inputs")
    return {name: saved[name] for name in produced}


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


def compare_shipped(report: ModelReport, shipped: dict[str, np.ndarray]) -> None:
    """Set ``report.shipped``: each shipped output against the reference's and the candidate's."""
    shipped = check_saved_outputs(shipped, report.reference_outputs)
    report.shipped = [
        ShippedComparison(
            name=o.name,
            reference=compare_tensors(o.name, report.reference_outputs[o.name], shipped[o.name], o.step, report.atol),
            candidate=compare_tensors(o.name, report.candidate_outputs[o.name], shipped[o.name], o.step, report.atol),
        )
        for o in report.outputs
    ]


def ran_plan(executor: Executor) -> Plan:
    """The plan of the executor's run that is being compared."""
    assert executor.plan is not None, "compared after a run"
    return executor.plan


def compare_nodes(executor: Executor, values: dict, reference: dict, steps: dict, atol: int, progress, isolate: bool = True,
                  against: str = "ort") -> list[NodeComparison]:
    """Every plan entry's outputs (as both full runs left them), every DML node in isolation, and
    every group that only a CPU-only QDQ rule fuses in isolation; ``progress(stage, done, total)``
    hears each entry start.

    With ``isolate`` False (``values`` are another onnxruntime's), the nodes the candidate's QDQ
    rules made are judged in isolation instead (:func:`compare_rewritten`). ``against`` names the
    reference (``REFERENCES``), which decides the causes it can have (see the module's notes).
    """
    float_reference, real_ep = against in FLOAT_REFERENCES, against == DML_REFERENCE
    alternatives = [(cause, executor.with_arithmetic(arith))
                    for cause, arith in alternative_arithmetics(executor.arithmetic, saturating=against not in EXACT_PRODUCTS)]
    entries = ran_plan(executor).entries
    nodes = []
    for index, entry in enumerate(entries, 1):
        progress("comparing node", index, len(entries))
        shared = [n for n in entry.outputs if n in values and n in reference]
        comparison = NodeComparison(
            node=node_label(entry.node),
            op_type=entry.node.op_type,
            runs_on=entry.summary(),
            propagated=[compare_tensors(n, values[n], reference[n], step_of(n, reference[n], steps), atol) for n in shared],
        )
        if not isolate:
            compare_rewritten(executor, entry, reference, steps, atol, alternatives, comparison, float_reference)
        elif isinstance(entry, DmlNode) and entry.origin.rules and entry.origin.rules[-1] in DML_GRAPHS:
            compare_dml_graph(executor, entry, reference, steps, atol, alternatives, comparison)
        elif isinstance(entry, DmlNode) and entry.output in reference and all(n in reference for n in entry.value_inputs):
            result = first_output(entry, executor.run_dml(entry, reference))
            expected = reference[entry.output]
            comparison.desc = desc_summary(entry.desc)
            comparison.isolated = compare_tensors(entry.output, result, expected, step_of(entry.output, expected, steps), atol)
            if comparison.inexact_in_isolation:
                labels = classify(entry, reference, result, expected, alternatives, float_reference)
                if (labels == OTHER).any() and exact_for_any_input(entry.desc):
                    labels[labels == OTHER] = CAUSES.index("graph")
                    comparison.graph = (f"{entry.operator} gives every arithmetic's value for the reference's input, so the reference made its "
                                        "output from another graph than the input it exposed "
                                        + ("(a rewrite of the real DML EP's that dml_ep does not model)" if real_ep
                                           else "(a CPU-only rewrite: QDQS8ToU8Transformer, a QDQ fusion)"))
                comparison.put_down(labels, result, expected, atol)
        elif entry.origin.cpu_rule:
            compare_cpu_only_group(executor, entry, reference, steps, atol, comparison, real_ep)
        nodes.append(comparison)
    return nodes


def compare_rewritten(executor: Executor, entry: PlanEntry, reference: dict, steps: dict, atol: int, alternatives,
                      comparison: NodeComparison, float_reference: bool) -> None:
    """Two onnxruntime configurations: a node the candidate's QDQ rules made, run on the reference's
    inputs (a DML node by dml_ep's kernels in onnxruntime's arithmetic, others by onnxruntime's CPU
    kernel: what the candidate computes). A DML node's differences are classified by arithmetic;
    any other node's have the cause "graph"."""
    constants = ran_plan(executor).constants
    if not entry.origin.rules or not entry.outputs:
        return
    output = entry.outputs[0]
    if output not in reference or not all(n in reference for n in entry.value_inputs if n not in constants):
        return
    result = executor.run_entry(entry, reference)[output]
    comparison.isolated = compare_tensors(output, result, reference[output], step_of(output, reference[output], steps), atol)
    if not comparison.differs_in_isolation:
        return
    if isinstance(entry, DmlNode):
        comparison.desc = desc_summary(entry.desc)
        comparison.put_down(classify(entry, reference, result, reference[output], alternatives, float_reference), result,
                            reference[output], atol)
    else:
        comparison.graph = f"onnxruntime's QDQ rule ({entry.origin.rule}) makes {entry.node.op_type} on one side only"
        comparison.causes = {"graph": comparison.isolated.differing}


def compare_dml_graph(executor: Executor, entry: DmlNode, reference: dict, steps: dict, atol: int, alternatives,
                      comparison: NodeComparison) -> None:
    """The DirectML operators the DML EP builds for one node (a graph of its own,
    ``passes/dml_graphs.py``), run together on the reference's inputs of the node; at the last of
    them, whose output is the node's, compared (the values between them are dml_ep's alone).
    Differences are counted by the first alternative arithmetic that gives the reference's value."""
    plan = ran_plan(executor)
    group = [e for e in plan.entries if e.origin is entry.origin]
    made = {n for e in group for n in e.outputs}
    inputs = [n for e in group for n in e.value_inputs if n not in made and n not in plan.constants]
    if group[-1] is not entry or entry.output not in reference or not all(n in reference for n in inputs):
        return

    def run(runner: Executor) -> np.ndarray:
        values = collections.ChainMap({}, reference)
        for member in group:
            values.update(runner.run_entry(member, values))
        return values[entry.output]

    result, expected = run(executor), reference[entry.output]
    comparison.desc = desc_summary(entry.desc)
    comparison.isolated = compare_tensors(entry.output, result, expected, step_of(entry.output, expected, steps), atol)
    if not comparison.inexact_in_isolation:
        return
    unexplained = result != expected
    labels = np.where(unexplained, OTHER, NONE)
    for cause, runner in alternatives:
        explained = unexplained & (run(runner) == expected)
        labels[explained] = CAUSES.index(cause)
        unexplained &= ~explained
    comparison.put_down(labels, result, expected, atol)


def compare_cpu_only_group(executor: Executor, entry: PlanEntry, reference: dict, steps: dict, atol: int, comparison,
                           real_ep: bool = False) -> None:
    """Run DQs -> ``entry`` -> Q, which a CPU-only rule fuses on a CPU reference, on the reference's
    inputs of the DQs; differences of its Q output are the "graph" cause, or against the real DML
    EP (``real_ep``), which runs the group unfused too, "other"."""
    plan = ran_plan(executor)
    group = cpu_only_group(plan, entry)
    output = group[-1].outputs[0]
    made = {n for e in group for n in e.outputs}
    inputs = [n for e in group for n in e.value_inputs if n not in made and n not in plan.constants]
    if not is_q(group[-1].node) or output not in reference or not all(n in reference for n in inputs):
        return
    values = dict(reference)
    for member in group:
        values.update(executor.run_entry(member, values))
    comparison.isolated = compare_tensors(output, values[output], reference[output], step_of(output, reference[output], steps), atol)
    if not real_ep:
        comparison.graph = (f"on CPU onnxruntime's QDQ rule '{entry.origin.cpu_rule}' fuses {entry.node.op_type} with its "
                            f"DQs and Q; on DML it runs as DequantizeLinear -> {entry.node.op_type} -> QuantizeLinear")
    if comparison.differs_in_isolation:
        comparison.causes = {"other" if real_ep else "graph": comparison.isolated.differing}


def cpu_only_group(plan: Plan, entry: PlanEntry) -> list[PlanEntry]:
    """The entries of the DQs feeding ``entry``, ``entry``, any Relu/Clip between it and its Q,
    and the Qs, in plan order."""
    inputs, members = set(entry.value_inputs), [entry]
    outputs = set(entry.outputs)
    readers = [e for e in plan.entries if outputs & set(e.value_inputs)]
    if len(readers) == 1 and readers[0].node.op_type in ("Relu", "Clip"):
        members.append(readers[0])
        outputs = set(readers[0].outputs)
    return [e for e in plan.entries if any(e is m for m in members)
            or is_dq(e.node) and inputs & set(e.outputs)
            or is_q(e.node) and outputs & set(e.value_inputs)]


def exposable_intermediates(model: onnx.ModelProto) -> list[str]:
    """The node outputs onnxruntime can show without changing its graph: not graph outputs (shown
    anyway), nor the float tensors inside QDQ groups (DQ outputs and Q inputs), which would keep
    its QDQ rules from fusing the group."""
    outputs = {o.name for o in model.graph.output}
    inside_groups = {n.output[0] for n in model.graph.node if is_dq(n)} | {n.input[0] for n in model.graph.node if is_q(n)}
    return [n for node in model.graph.node for n in node.output if n and n not in outputs and n not in inside_groups]


def classify(entry: DmlNode, reference: dict, result: np.ndarray, expected: np.ndarray, alternatives,
             float_reference: bool = False) -> np.ndarray:
    """Each element's cause (see :func:`tally`): the first alternative arithmetic that gives the
    reference's value, with the rounding differences at exact ties told apart from the float32 ones.

    ``float_reference``: the reference computed the op in float32 and then quantized (onnxruntime
    without QDQ fusion, "ort-unfused"), which no arithmetic here reproduces; where it gave the
    other integer next to the exact value, its float32 rounding landed on the other side of the half.
    """
    unexplained = result != expected
    labels = np.where(unexplained, OTHER, NONE)

    def put(cause: str, explained: np.ndarray) -> None:
        unexplained[explained] = False
        ties = exact_ties(entry, reference, explained) if cause == "float32 rounding" else np.zeros_like(explained)
        labels[explained & ~ties] = CAUSES.index(cause)
        labels[ties] = CAUSES.index("tie rounding")

    saturable = may_saturate(entry.desc)
    for cause, executor in alternatives:
        if cause == "u8s8 saturation" and not saturable:  # the alternative changes its rounding only
            cause = "float32 rounding"
        put(cause, unexplained & (first_output(entry, executor.run_dml(entry, reference)) == expected))
    if float_reference and unexplained.any():
        put("float32 rounding", unexplained & next_to_exact(entry, reference, unexplained, expected))
    return labels


def may_saturate(desc: OperatorDesc) -> bool:
    """Whether ``desc`` is a product whose operands onnxruntime's GEMM takes as uint8 x int8, the
    pairs an AVX2 CPU without VNNI saturates (no other operator can have that cause)."""
    prepared = operator_of(desc).prepared
    return prepared is not None and Arithmetic("onnxruntime", True).saturates_u8s8(*prepared.onnxruntime_operands(desc))


def tally(labels: np.ndarray) -> dict[str, int]:
    """Elements by cause, in CAUSES' order, from their labels (:func:`classify`)."""
    counts = np.bincount(labels[labels != NONE].ravel(), minlength=len(CAUSES))
    return {cause: int(count) for cause, count in zip(CAUSES, counts) if count}


# DirectML operators whose output is the same in every arithmetic for a given input: data movement,
# a max, int8 Relu, and the dequantization of 8-bit codes (``x - zp`` exact in float32, one correctly rounded product).
EXACT_OPERATORS = frozenset({OP.ELEMENT_WISE_IDENTITY, OP.JOIN, OP.SLICE1, OP.GATHER, OP.MAX_POOLING, OP.MAX_POOLING2, OP.ACTIVATION_RELU})


def exact_for_any_input(desc: OperatorDesc) -> bool:
    """Whether no arithmetic can make ``desc``'s output differ for one input (see EXACT_OPERATORS)."""
    if isinstance(desc, DML_ELEMENT_WISE_DEQUANTIZE_LINEAR_OPERATOR_DESC):
        return desc.InputTensor.DataType.element_size == 1
    return desc.OPERATOR_TYPE in EXACT_OPERATORS  # dml_ep's standalone ACTIVATION_RELU is int8's


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
    tensors = {field: b if isinstance(b, np.ndarray) else values[b] for field, b in entry.inputs.items()}
    exact = ideal_values(entry.desc, tensors, index) if index.size else None
    if exact is not None:
        result.reshape(-1)[index] = test(tensors, index, exact)
    return result


def ideal_values(desc: OperatorDesc, tensors: dict, index: np.ndarray) -> list[Fraction] | None:
    """DirectML's value of a quantized operator before rounding, at the flat output ``index``:
    the dequantized operation divided by the output scale (the zero point, an integer, left out).

    Evaluated in exact fractions, since float rounding must not decide what is a tie; each value is
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


def run_reference(model: onnx.ModelProto, feeds: dict, names: list[str], reference: str) -> dict[str, np.ndarray]:
    """The reference's values of ``names`` (onnxruntime's CPU EP, or the real DML EP), which it
    exposes by listing them as graph outputs."""
    if not names:
        return {}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    listed = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names if n not in listed)
    try:
        session = dml_session(probe) if reference == DML_REFERENCE else cpu_session(probe, reference)
        results = session.run(names, feeds)
    except Exception as exc:  # onnxruntime's exception types share no base class but Exception
        raise ModelError(f"onnxruntime ({reference}) cannot run the model: {ort_message(exc)}") from None
    return dict(zip(names, results))


def quantization_steps(plan: Plan) -> dict[str, float]:
    """One LSB of each float value made by DequantizeLinear with a per-tensor constant scale."""
    steps = {}
    for entry in plan.entries:
        node = entry.node
        if node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx") and node.input[1] in plan.constants:
            scale = plan.constants[node.input[1]]
            if scale.size == 1:
                steps[node.output[0]] = float(scale.reshape(-1)[0])
    return steps


def step_of(name: str, array: np.ndarray, steps: dict[str, float]) -> float | None:
    return 1.0 if array.dtype.kind in "iub" else steps.get(name)


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
            summary[field.name] = list(value) if isinstance(value, tuple) else value
    return summary
