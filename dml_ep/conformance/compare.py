"""Conformance of dml_ep with onnxruntime's CPU EP, or with the real DML EP: output by output, and node by node.

Design notes:

- Node by node, onnxruntime exposes every intermediate value (a copy of the model lists them as
  graph outputs). Each DML node also runs *isolated*, fed onnxruntime's values for its inputs, so
  its verdict does not inherit upstream differences.
- QDQ models: the reference applies onnxruntime's QDQ rules for CPU nodes, dml_ep those for DML
  nodes. Intermediates are matched by name (the rules keep the Q outputs' names); the float
  tensors inside QDQ groups (DQ outputs, Q inputs) are never listed as reference outputs, since
  that would keep onnxruntime from fusing the group. A group a CPU-only rule fuses on the
  reference (Mul -> QLinearMul) but DML runs as DQ -> op -> Q is run in isolation as a whole
  (fed onnxruntime's inputs of its DQs); its differences have the cause "graph".
- Saved outputs (Polygraphy's RunResults) can stand in for the reference's graph outputs. A model
  zoo data set's shipped outputs are compared with both sides, and fault the candidate only where
  the reference matches them (:class:`ShippedComparison`).

The report's data is :mod:`dml_ep.reports.report`; the causes are :mod:`dml_ep.conformance.causes`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
from typing import Callable

import numpy as np
import onnx

from ..core.choices import CANDIDATES
from ..core.errors import DmlEpError, FeedError, ModelError, ShapeError
from ..core.graph import Loaded, draws_random_values, load_model, ort_message
from ..numerics.arithmetic import Arithmetic
from ..operators.dml_graph import DmlGraph
from ..operators.nodes import DmlNode, PlanEntry
from ..operators.registration import Registration, graph_of, row_of
from ..ort.reference import DML_REFERENCE, cpu_session, dml_session, fused_away, require_dml
from ..passes import CPU, DEFAULT_RELEASE, relu_clip_quant
from ..passes.qdq_util import is_dq, is_q
from ..planning.importer import DEFAULT_FEATURE_LEVEL
from ..planning.plan import Plan
from ..planning.planner import Planner
from ..reports.report import (CAUSES, DEVICE_PRECISION, EXACT, NONE, OTHER, ModelReport, NodeComparison, ShippedComparison, Tolerance, compare_tensors, desc_summary,
                              node_label)
from ..runtime.executor import Executor
from ..runtime.session import InferenceSession
from .float32_chains import FLOAT32_CHAIN, float32_chain, reads_float32
from .causes import (EXACT_PRODUCTS, FLOAT_REFERENCES, alternative_arithmetics, classify, describe_arithmetic, exact_for_any_input, first_output,
                     SKIP_SUM_ROUNDING, graph_precision, precision_rule, rounded_skip_sum, product_causes, within, within_float_sum)


@np.errstate(all="ignore")  # its nodes run in isolation on values of any kind: an overflow to inf is a result, not a warning
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
    tolerance: Tolerance = EXACT,
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
    refused before any work where it cannot run (:func:`dml_ep.ort.reference.require_dml`).

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
    u8s8_saturation = _mimicked_saturation(u8s8_saturation, reference, candidate)
    proto = load_model(model)
    session = InferenceSession(
        Loaded(proto), feature_level=feature_level, arithmetic=arithmetic, u8s8_saturation=u8s8_saturation, qdq_rules=qdq_rules,
        engine=engine,
    )
    feeds = session.check_feeds(feeds)
    output_names = [o.name for o in proto.graph.output]
    intermediates = exposable_intermediates(proto, reference) if per_node or candidate != "dml_ep" else []
    if candidate == "dml_ep":
        executor = session.executor
        progress("running dml_ep")
        values = executor.run(feeds, keep_all=True)
        dml_plan = executor.plan
    else:
        cpu_planner = Planner(proto, feature_level, qdq_rules=qdq_rules, provider=CPU)
        executor = Executor(cpu_planner, Arithmetic("onnxruntime", u8s8_saturation), engine)
        values, dml_plan = _run_candidate(proto, feeds, candidate, executor, session, output_names + intermediates, progress)
        per_node = True  # the candidate's intermediates are there anyway
    steps = quantization_steps(executor.plan)
    progress("running onnxruntime")
    expected = _reference_values(proto, feeds, reference, intermediates if per_node else [], expected_outputs, {n: values[n] for n in output_names})
    report = ModelReport(
        model=name or _model_name(model, proto),
        reference=reference,
        arithmetic=describe_arithmetic(executor.arithmetic) if candidate == "dml_ep" else f"onnxruntime {candidate}",
        feature_level=str(executor.plan.feature_level),
        tolerance=tolerance,
        outputs=[compare_tensors(n, values[n], expected[n], step_of(n, expected[n], steps), tolerance) for n in output_names],
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
            expected.update(run_reference(proto, feeds, exposable_intermediates(proto, reference), reference))
        report.nodes = compare_nodes(executor, values, {**feeds, **expected}, steps, tolerance, progress,
                                     isolate=candidate == "dml_ep", against=reference)
    return report


def _mimicked_saturation(u8s8_saturation: bool | None, reference: str, candidate: str) -> bool | None:
    """``u8s8_saturation`` as given; by default none where the side dml_ep's arithmetic mimics (the
    reference, or in candidate mode the candidate) has exact u8s8 products, else the host's (None)."""
    mimicked = reference if candidate == "dml_ep" else candidate
    return False if u8s8_saturation is None and mimicked in EXACT_PRODUCTS else u8s8_saturation


def _reference_values(proto: onnx.ModelProto, feeds: dict, reference: str, intermediates: list[str], saved: dict | None,
                      produced: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's values of the graph outputs (``produced``, the candidate's), or the ``saved``
    outputs standing in for them, and of ``intermediates``."""
    compared = list(produced) if saved is None else []
    expected = run_reference(proto, feeds, compared + intermediates, reference)
    if saved is not None:
        expected.update(check_saved_outputs(saved, produced))
    return expected


def _model_name(model, proto: onnx.ModelProto) -> str:
    """How the report names a model given without a name: its path, else its graph's name."""
    return os.fspath(model) if isinstance(model, (str, os.PathLike)) else proto.graph.name


def _run_candidate(proto: onnx.ModelProto, feeds: dict, candidate: str, executor: Executor, session: InferenceSession,
                   names: list[str], progress) -> tuple[dict, Plan]:
    """Another onnxruntime configuration as the candidate, whose graph ``executor`` plans (the CPU
    EP's): its plan set for the feeds' shapes; the candidate's values of ``names``, and the plan
    the DML EP would run (dml_ep's session's), for the report."""
    shapes = {k: v.shape for k, v in feeds.items() if isinstance(v, np.ndarray)}
    executor.plan = executor.planner.plan_for_shapes(shapes)
    progress(f"running onnxruntime ({candidate})")
    values = {**feeds, **run_reference(proto, feeds, names, candidate)}
    return values, session.planner.plan_for_shapes(shapes)


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


def compare_shipped(report: ModelReport, shipped: dict[str, np.ndarray]) -> None:
    """Set ``report.shipped``: each shipped output against the reference's and the candidate's."""
    shipped = check_saved_outputs(shipped, report.reference_outputs)
    report.shipped = [
        ShippedComparison(
            name=o.name,
            reference=compare_tensors(o.name, report.reference_outputs[o.name], shipped[o.name], o.step, report.tolerance),
            candidate=compare_tensors(o.name, report.candidate_outputs[o.name], shipped[o.name], o.step, report.tolerance),
        )
        for o in report.outputs
    ]


def ran_plan(executor: Executor) -> Plan:
    """The plan of the executor's run that is being compared."""
    assert executor.plan is not None, "compared after a run"
    return executor.plan


def compare_nodes(executor: Executor, values: dict, reference: dict, steps: dict, tolerance: Tolerance, progress, isolate: bool = True,
                  against: str = "ort") -> list[NodeComparison]:
    """Every plan entry's outputs (as both full runs left them), every DML node in isolation, and
    every group that only a CPU-only QDQ rule fuses in isolation; ``progress(stage, done, total)``
    hears each entry start.

    With ``isolate`` False (``values`` are another onnxruntime's), the nodes the candidate's QDQ
    rules made are judged in isolation instead (:func:`compare_rewritten`). ``against`` names the
    reference (``REFERENCES``), which decides the causes it can have (see the module's notes).
    """
    isolation = Isolation(executor, reference, steps, tolerance, against, isolate)
    entries = ran_plan(executor).entries
    nodes = []
    for index, entry in enumerate(entries, 1):
        progress("comparing node", index, len(entries))
        shared = [n for n in entry.outputs if n in values and n in reference]
        comparison = NodeComparison(
            node=node_label(entry.node),
            op_type=entry.node.op_type,
            runs_on=entry.summary(),
            propagated=[compare_tensors(n, values[n], reference[n], step_of(n, reference[n], steps), tolerance) for n in shared],
        )
        try:
            isolation.judge(entry, comparison)
        except ShapeError as error:  # the reference's inputs have other shapes than those dml_ep planned the node for
            comparison = dataclasses.replace(comparison, isolated=None, desc=None, causes={}, causes_out_of_tolerance={}, graph=None,
                                             not_isolated=f"not run in isolation: the reference's inputs have other shapes ({error.rule})")
        isolation.record(entry, comparison)
        nodes.append(comparison)
    return nodes


class Isolation:
    """How :func:`compare_nodes` runs each plan entry in isolation against ``against``'s values
    (``reference``), and what the entries before it found."""

    def __init__(self, executor: Executor, reference: dict, steps: dict, tolerance: Tolerance, against: str, isolate: bool):
        self.executor, self.reference, self.steps, self.tolerance, self.isolate = executor, reference, steps, tolerance, isolate
        self.float_reference, self.real_ep = against in FLOAT_REFERENCES, against == DML_REFERENCE
        self.alternatives = [(cause, executor.with_arithmetic(arith))
                             for cause, arith in alternative_arithmetics(executor.arithmetic, saturating=against not in EXACT_PRODUCTS)]
        self.judged: set[int] = set()  # the entries found inexact in isolation: where their differences start
        self.differing: dict[str, int] = {}  # each value compared so far: its differing elements

    @functools.cached_property
    def producers(self) -> dict[str, tuple[int, PlanEntry]]:
        """Each value's plan index and maker (made once, where a hidden chain needs it)."""
        return {name: (i, e) for i, e in enumerate(ran_plan(self.executor).entries) for name in e.outputs}

    def judge(self, entry: PlanEntry, comparison: NodeComparison) -> None:
        """``entry`` run in isolation as what it is, its differences' causes put down in ``comparison``."""
        executor, reference, steps, tolerance, alternatives = self.executor, self.reference, self.steps, self.tolerance, self.alternatives
        graph = graph_of(entry.origin) if isinstance(entry, DmlNode) else None
        if not self.isolate:
            compare_rewritten(executor, entry, reference, steps, tolerance, alternatives, comparison, self.float_reference)
        elif isinstance(entry, DmlNode) and graph is not None:
            compare_dml_graph(executor, entry, graph, reference, steps, tolerance, alternatives, comparison)
        elif isinstance(entry, DmlNode) and entry.output in reference and all(n in reference for n in entry.value_inputs):
            compare_dml_node(executor, entry, reference, steps, tolerance, alternatives, comparison, self.float_reference, self.real_ep,
                             not self.real_ep and reads_float32(entry, self.producers, reference))
        elif entry.origin.cpu_rule:
            compare_cpu_only_group(executor, entry, reference, steps, tolerance, comparison, self.real_ep)
        elif draws_random_values(entry.node) and any(c.differing for c in comparison.propagated):
            comparison.isolated = comparison.propagated[0]  # its inputs are at most a shape: the draws differ
            comparison.causes = {"random values": comparison.isolated.differing}
        elif starts_a_difference(entry, comparison, self.differing):
            compare_hidden_chain(executor, hidden_chain(entry, reference, ran_plan(executor).constants, self.producers), reference, steps,
                                 tolerance, comparison, alternatives, self.judged, self.real_ep)

    def record(self, entry: PlanEntry, comparison: NodeComparison) -> None:
        """What ``entry``'s comparison tells the entries after it."""
        if comparison.inexact_in_isolation:
            self.judged.add(id(entry))
        self.differing.update((c.name, c.differing) for c in comparison.propagated)


def compare_dml_node(executor: Executor, entry: DmlNode, reference: dict, steps: dict, tolerance: Tolerance, alternatives,
                     comparison: NodeComparison, float_reference: bool, real_ep: bool, float32_inputs: bool = False) -> None:
    """One DML node run on the reference's inputs; its differences classified by arithmetic, and
    "graph" where its operator gives every arithmetic's value for that input, or it read float32 values (``float32_inputs``)."""
    result = first_output(entry, executor.run_dml(entry, reference))
    expected = reference[entry.output]
    comparison.desc = desc_summary(entry.desc)
    comparison.isolated = compare_tensors(entry.output, result, expected, step_of(entry.output, expected, steps), tolerance)
    if not comparison.inexact_in_isolation or np.shape(result) != np.shape(expected):  # other shapes: the comparison's problem says so
        return
    labels = classify(entry, reference, result, expected, alternatives, float_reference, float32_inputs)
    comparison.graph = FLOAT32_CHAIN if float32_inputs and (labels == CAUSES.index("graph")).any() else None
    if (labels == OTHER).any() and exact_for_any_input(entry.desc):
        labels[labels == OTHER] = CAUSES.index("graph")
        comparison.graph = (f"{entry.operator} gives every arithmetic's value for the reference's input, so the reference made its "
                            "output from another graph than the input it exposed "
                            + ("(a rewrite of the real DML EP's that dml_ep does not model)" if real_ep
                               else "(a CPU-only rewrite: QDQS8ToU8Transformer, a QDQ fusion)"))
    comparison.put_down(labels, result, expected, tolerance)
    comparison.precision_rule = precision_rule(entry.desc, comparison.causes)


def compare_rewritten(executor: Executor, entry: PlanEntry, reference: dict, steps: dict, tolerance: Tolerance, alternatives,
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
    comparison.isolated = compare_tensors(output, result, reference[output], step_of(output, reference[output], steps), tolerance)
    if not comparison.differs_in_isolation:
        return
    if isinstance(entry, DmlNode):
        comparison.desc = desc_summary(entry.desc)
        comparison.put_down(classify(entry, reference, result, reference[output], alternatives, float_reference), result,
                            reference[output], tolerance)
        comparison.precision_rule = precision_rule(entry.desc, comparison.causes)
    else:
        comparison.graph = f"onnxruntime's QDQ rule ({entry.origin.rule}) makes {entry.node.op_type} on one side only"
        comparison.causes = {"graph": comparison.isolated.differing}


def compare_dml_graph(executor: Executor, entry: DmlNode, graph: DmlGraph, reference: dict, steps: dict, tolerance: Tolerance, alternatives,
                      comparison: NodeComparison) -> None:
    """The DirectML operators the DML EP builds for one node (a graph of its own, ``graph``, a row
    of ``registration.GRAPHS``), run together on the reference's inputs of the node; at the last of
    them, whose output is the node's, compared (the values between them are dml_ep's alone).
    Differences are counted by the first alternative arithmetic that gives the reference's value,
    then "DirectML device precision" within the summed envelopes of its operators; those of a graph
    with exact products by the product's causes (:func:`~dml_ep.conformance.causes.product_causes`)."""
    plan = ran_plan(executor)
    group = [e for e in plan.entries if e.origin is entry.origin]
    made = {n for e in group for n in e.outputs}
    inputs = [n for e in group for n in e.value_inputs if n not in made and n not in plan.constants]
    if group[-1] is not entry or entry.output not in reference or not all(n in reference for n in inputs):
        return

    result, expected = run_on_reference(executor, group, reference), reference[entry.output]
    comparison.desc = desc_summary(entry.desc)
    comparison.isolated = compare_tensors(entry.output, result, expected, step_of(entry.output, expected, steps), tolerance)
    if not comparison.inexact_in_isolation:
        return
    unexplained = result != expected
    labels = np.where(unexplained, OTHER, NONE)
    whole = entry.origin.whole
    descs = [e.desc for e in group if isinstance(e, DmlNode)]
    if graph.differs is not None:  # another function than the reference's node: that is the cause
        labels[unexplained], comparison.graph = CAUSES.index("graph"), graph.differs
    elif graph.exact_products is not None and whole is not None:  # its causes are the product's, whichever arithmetic reproduces them
        products = graph.exact_products(whole, plan.constants, reference, result.dtype, executor.arithmetic)
        labels = np.where(unexplained, product_causes(products, expected, unexplained), labels)
    else:  # then the graph's device precision (its operators' envelopes summed) around the "directml" value
        directml = label_graph_by_arithmetic(group, reference, expected, unexplained, labels, alternatives, comparison)
        point_value = result if directml is None else directml  # None: ``result`` is the "directml" arithmetic's
        labels[unexplained & within(graph_precision(descs), point_value, expected)] = CAUSES.index(DEVICE_PRECISION)
    comparison.put_down(labels, result, expected, tolerance)
    comparison.precision_rule = precision_rule(descs, comparison.causes)


def starts_a_difference(entry: PlanEntry, comparison: NodeComparison, differing: dict[str, int]) -> bool:
    """Whether ``entry``'s outputs differ while the inputs both runs show (``differing``: each
    value compared so far, its differing elements) are equal: where a difference starts."""
    return any(c.differing for c in comparison.propagated) and not any(differing.get(name) for name in entry.value_inputs)


def run_on_reference(runner: Executor, members: list[PlanEntry], reference: dict) -> np.ndarray:
    """The last of ``members`` (entries in plan order) run by ``runner`` after the others, on the
    reference's values of what they read from outside: its output."""
    return values_on_reference(runner, members, reference)[members[-1].outputs[0]]


def values_on_reference(runner: Executor, members: list[PlanEntry], reference: dict) -> collections.ChainMap:
    """The reference's values with those ``members`` make in turn, run by ``runner`` on them."""
    values = collections.ChainMap({}, reference)
    for member in members:
        values.update(runner.run_entry(member, values))
    return values


def label_graph_by_arithmetic(group: list[PlanEntry], reference: dict, expected: np.ndarray, unexplained: np.ndarray, labels: np.ndarray,
                              alternatives, comparison: NodeComparison) -> np.ndarray | None:
    """:func:`label_by_arithmetic` of a DirectML graph; for a float16 SkipLayerNormalization's (``rounded_skip_sum``) first on
    the graph's float16 sum (the normalization's own rounding), then what only the float32 sum explains as "graph"."""
    rounded = rounded_skip_sum(group[-1], reference) if isinstance(group[-1], DmlNode) else None
    if rounded is None:
        return label_by_arithmetic(group, reference, expected, unexplained, labels, alternatives)
    directml = label_by_arithmetic(group, rounded, expected, unexplained, labels, alternatives)
    label_by_arithmetic(group, reference, expected, unexplained, labels, [("graph", r) for _, r in alternatives if r.arithmetic.onnxruntime])
    comparison.graph = SKIP_SUM_ROUNDING if (labels == CAUSES.index("graph")).any() else None
    return directml


def label_by_arithmetic(members: list[PlanEntry], reference: dict, expected: np.ndarray, unexplained: np.ndarray, labels: np.ndarray,
                        alternatives) -> np.ndarray | None:
    """Each ``unexplained`` element (cleared as it is explained) labelled with the cause of the
    first alternative arithmetic whose run of ``members`` (:func:`run_on_reference`) gives the
    reference's value. Returns the "directml" arithmetic's output where an alternative is that
    arithmetic, else None."""
    directml = None
    for cause, runner in alternatives:
        output = run_on_reference(runner, members, reference)
        if not runner.arithmetic.onnxruntime:
            directml = output
        explained = unexplained & (output == expected)
        labels[explained] = CAUSES.index(cause)
        unexplained &= ~explained
    return directml


def compare_cpu_only_group(executor: Executor, entry: PlanEntry, reference: dict, steps: dict, tolerance: Tolerance, comparison,
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
    comparison.isolated = compare_tensors(output, values[output], reference[output], step_of(output, reference[output], steps), tolerance)
    if not real_ep:
        kind = float_product(entry.node)
        comparison.graph = (f"on CPU onnxruntime's QDQ rule '{entry.origin.cpu_rule}' fuses {entry.node.op_type} with its "
                            f"DQs and Q{f' (integer {kind})' if kind else ''}; on DML it runs as DequantizeLinear -> "
                            f"{entry.node.op_type} -> QuantizeLinear{f' (float {kind} then quantize)' if kind else ''}")
    if comparison.differs_in_isolation:
        comparison.causes = {"other" if real_ep else "graph": comparison.isolated.differing}


def compare_hidden_chain(executor: Executor, chain: list[PlanEntry] | None, reference: dict, steps: dict, tolerance: Tolerance,
                         comparison: NodeComparison, alternatives, judged: set[int], real_ep: bool = False) -> None:
    """A node whose output differs though the inputs both runs show are equal, and which could not
    be run alone (a value it reads is not the reference's to show): run on the reference's inputs
    with the nodes before it that make those
    values (``chain``, the node last: :func:`hidden_chain`; None: no isolation). What another
    arithmetic explains takes its cause; what none explains is the reference's other graph
    ("graph"): a CPU-only rewrite, such as a QDQ group fused into an integer operator (int8
    activations, after QDQS8ToU8Transformer), or a chain of float16 ops that lack float16 kernels
    run in float32 (InsertCastTransformer); against the real DML EP, "other"."""
    if chain is None or chain[-1].outputs[0] not in reference or any(id(e) in judged for e in chain):
        return  # a difference already judged where it starts (a group a CPU-only rule fuses: compare_cpu_only_group)
    output, expected = chain[-1].outputs[0], reference[chain[-1].outputs[0]]
    values = values_on_reference(executor, chain, reference)
    result = values[output]
    comparison.isolated = compare_tensors(output, result, expected, step_of(output, expected, steps), tolerance)
    if not comparison.inexact_in_isolation:
        return
    unexplained = result != expected
    labels = np.where(unexplained, OTHER, NONE)
    on_dml = any(isinstance(member, DmlNode) for member in chain)
    if on_dml:  # the fallback nodes run onnxruntime's kernels in every arithmetic
        label_by_arithmetic(chain, reference, expected, unexplained, labels, alternatives)
    in_float32 = not real_ep and float32_chain(chain, reference, values)  # the reference's order is MLAS's: the rest is float32 inputs
    if isinstance(chain[-1], DmlNode) and unexplained.any() and not in_float32:  # a float sum of products: the reference's own order
        summed = within_float_sum(chain[-1], values, expected, unexplained)
        labels[summed] = CAUSES.index("float summation order")
        unexplained &= ~summed
    if not real_ep and unexplained.any():
        labels[unexplained] = CAUSES.index("graph")
        names = " -> ".join(dict.fromkeys(e.node.op_type for e in chain))
        comparison.graph = (f"run on the reference's inputs, {names} give other values in every arithmetic: the reference ran another graph "
                            f"({FLOAT32_CHAIN if in_float32 else other_graph(chain, expected, ran_plan(executor).constants)})")
    comparison.put_down(labels, result, expected, tolerance)


def float_product(node: onnx.NodeProto) -> str | None:
    """The float product ``node`` is, as its row names it (``Registration.float_product``), or None."""
    row = row_of(node)
    return None if row is None else row.float_product


def float_products(chain: list[PlanEntry]) -> list[tuple[DmlNode, Registration]]:
    """The DML nodes of ``chain`` that are float products, with their rows."""
    rows = [(entry, row_of(entry.node)) for entry in chain if isinstance(entry, DmlNode)]
    return [(entry, row) for entry, row in rows if row is not None and row.float_product]


def other_graph(chain: list[PlanEntry], expected: np.ndarray, constants: dict) -> str:
    """What the reference likely ran instead of ``chain``, as compare names it: a float16 chain in
    float32; a DQ -> float product -> Q as an integer product; a product of dequantized constant
    weights as MatMulNBits; else a CPU-only rewrite."""
    products = float_products(chain)
    if expected.dtype == np.float16 and not products:
        return ("the CPU EP computes float16 ops without float16 kernels in float32 across nodes, InsertCastTransformer; "
                "on DirectML each rounds to float16")
    makers = {e.outputs[0]: e.node for e in chain if e.outputs}
    quantized = {e.node.input[0] for e in chain if is_q(e.node)}
    for entry, row in products:
        kind = row.float_product
        if entry.outputs[0] in quantized:
            return f"float {kind} then quantize on DirectML, integer {kind} in the reference: onnxruntime's CPU QDQ fusion, after QDQS8ToU8Transformer"
        weight = makers.get(entry.node.input[1]) if len(entry.node.input) > 1 else None
        if row.weight_to_matmul_nbits and weight is not None and is_dq(weight) and weight.input[0] in constants:
            return (f"float {kind} of the dequantized weight on DirectML; the reference's DQMatMulToMatMulNBits (onnxruntime 1.25+) "
                    "makes a MatMulNBits of it, which quantizes A to int8 at accuracy level 4")
    return "a CPU-only rewrite: a QDQ group fused into an integer operator, QDQS8ToU8Transformer, a fusion"


HIDDEN_CHAIN = 64  # nodes a chain run on the reference's inputs may hold (the reference may rename every int8 Q/DQ value)


def hidden_chain(entry: PlanEntry, reference: dict, constants: dict, producers: dict) -> list[PlanEntry] | None:
    """``entry`` and the entries before it that make the values it reads which the reference does
    not show (``producers``: each value's plan index and entry), in plan order, ``entry`` last;
    None where such a value has no maker, or the chain grows past :data:`HIDDEN_CHAIN` (a node whose
    inputs the reference made in another graph far back: isolated closer to that graph)."""
    chain: dict[int, tuple[int, PlanEntry]] = {}
    pending = [producers[entry.outputs[0]]]
    while pending:
        index, member = pending.pop()
        if id(member) in chain:
            continue
        if len(chain) == HIDDEN_CHAIN:
            return None
        chain[id(member)] = index, member
        for name in member.value_inputs:
            if name in reference or name in constants:
                continue
            producer = producers.get(name)
            if producer is None:
                return None
            pending.append(producer)
    return [member for _, member in sorted(chain.values(), key=lambda item: item[0])]


def cpu_only_group(plan: Plan, entry: PlanEntry) -> list[PlanEntry]:
    """The entries of the DQs feeding ``entry``, ``entry``, any Relu/Clip between it and its Q,
    and the Qs, in plan order."""
    inputs, members = set(entry.value_inputs), [entry]
    outputs = set(entry.outputs)
    readers = [e for e in plan.entries if outputs & set(e.value_inputs)]
    # a Relu or Clip that ReluQuantFusion or ClipQuantFusion removes before a Q: onnxruntime's rewrite, as passes model it
    if len(readers) == 1 and readers[0].node.op_type in relu_clip_quant.NAME:
        members.append(readers[0])
        outputs = set(readers[0].outputs)
    return [e for e in plan.entries if any(e is m for m in members)
            or is_dq(e.node) and inputs & set(e.outputs)
            or is_q(e.node) and outputs & set(e.value_inputs)]


def exposable_intermediates(model: onnx.ModelProto, reference: str = "ort") -> list[str]:
    """The node outputs onnxruntime can show without changing its graph: not graph outputs (shown
    anyway), nor the float tensors inside QDQ groups (DQ outputs and Q inputs), which would keep
    its QDQ rules from fusing the group, nor the values its other fusions remove (:func:`fused_away`;
    the CPU EP's, also for the real DML EP, which runs the same fusions of float ops)."""
    outputs = {o.name for o in model.graph.output}
    hidden = {n.output[0] for n in model.graph.node if is_dq(n)} | {n.input[0] for n in model.graph.node if is_q(n)}
    hidden |= fused_away(model, "ort" if reference == DML_REFERENCE else reference)
    return [n for node in model.graph.node for n in node.output if n and n not in outputs and n not in hidden]


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
        # an ONNX DequantizeLinear's scale (input 1): a fact of the ONNX graph, not of a DirectML operator
        if is_dq(node) and node.domain in ("", "ai.onnx") and node.input[1] in plan.constants:
            scale = plan.constants[node.input[1]]
            if scale.size == 1:
                steps[node.output[0]] = float(scale.reshape(-1)[0])
    return steps


def step_of(name: str, array: np.ndarray, steps: dict[str, float]) -> float | None:
    return 1.0 if array.dtype.kind in "iub" else steps.get(name)


