"""The plan, and after ``compare`` the differences, as one HTML page that works offline from disk.

The page is the Jinja2 template ``assets/report.html.j2`` (autoescaped), filled here with
data: the summary, each output's histogram of differences (bars, axes and counts), the causes, and
the plan as JSON. The page's script (``report.js``) draws the graph the real EP runs from that JSON:
each plan entry a box coloured by where it runs (:data:`dml_ep.realep.placement.PLACEMENTS`) or by its largest
difference (LSB for a quantized value, ULPs for a float one), searchable, zoomable, with a minimap,
its details on click, and a sortable, filterable node table beside it. Small graphs are laid out by
ELK's layered algorithm (elkjs, bundled in ``assets/`` with its licence), large ones by the
script's own layered layout with long chains collapsed (2,500 nodes in about half a second). Every
box carries ``data-node`` (the ONNX node's name) and ``data-placement``, for scripts and tests; the
page sets ``data-render-ms`` on ``<html>`` once drawn (and again after each redraw, with ``data-draws``)."""

from __future__ import annotations

import json
import math
from importlib import resources

import jinja2
import markupsafe
import numpy as np

from ..core.graph import node_reads
from ..operators.nodes import DmlNode
from ..planning.plan import Plan
from ..realep.placement import PLACEMENTS
from .node_table import PENDING, PENDING_REASON, counted, node_differences, plan_rows
from .report import ModelReport, TensorComparison, differences, node_label, ulp

PLACEMENT_TEXT = {
    "modelled": "on DirectML, modelled by dml_ep",
    "real-ep-dml": "on DirectML in the real EP, not modelled",
    "cpu": "on the CPU in the real EP",
}
HISTOGRAM_WIDTH, HISTOGRAM_HEIGHT = 420, 200


def plan_report(plan: Plan, title: str) -> str:
    """The page of ``dml-ep inspect --html``."""
    return _page(title, plan, None, {})


def compare_report(report: ModelReport) -> str:
    """The page of ``dml-ep compare --html``: the plan compared, coloured by differences too."""
    assert report.dml_plan is not None, "a report made by compare_model"
    return _page(report.model, report.dml_plan, report, node_differences(report))


def graph_data(plan: Plan, rows: list[dict], differences: dict[str, dict]) -> dict:
    """What the page's script draws: the plan entries, then the nodes planned only when run
    (placement ``pending``), the edges between them (each value from the node that makes it to each
    node that reads it), and the graph's inputs and outputs. ``rows`` are the plan's (plan_rows)."""
    nodes = []
    for row, entry in zip(rows, plan.entries):
        node = {"name": row["node"], "op": row["op_type"], "placement": row["placement"], "macs": row["macs"],
                "rule": row["rule"], "from": row["from"], "value_inputs": entry.value_inputs, "value_outputs": entry.outputs}
        if isinstance(entry, DmlNode):
            node["operator"] = entry.summary()
        else:
            node["reason"] = entry.reason
        if row["node"] in differences:
            node["difference"] = _json_safe(differences[row["node"]])
        nodes.append(node)
    for pending in plan.pending:
        nodes.append({"name": node_label(pending), "op": pending.op_type, "placement": PENDING, "macs": 0, "rule": None,
                      "from": [], "reason": PENDING_REASON, "value_inputs": node_reads(pending),
                      "value_outputs": [name for name in pending.output if name]})
    inputs, outputs = [v.name for v in plan.inputs], [v.name for v in plan.outputs]
    producer = {name: index for index, node in enumerate(nodes) for name in node["value_outputs"]}
    edges = {(producer[name], index) for index, node in enumerate(nodes) for name in node["value_inputs"] if name in producer}
    for node in nodes:
        node["reads"] = [name for name in node.pop("value_inputs") if name in inputs]
        node["writes"] = [name for name in node.pop("value_outputs") if name in outputs]
    return {"nodes": nodes, "edges": sorted(edges), "inputs": inputs, "outputs": outputs}


def _json_safe(difference: dict) -> dict:
    """A node's differences for the page's JSON, which has no infinity: a difference without
    bound (NaN on one side only, or shapes that differ: compare_tensors) is written "inf", and the
    page's script reads it back as Infinity."""
    return {key: "inf" if isinstance(value, float) and math.isinf(value) else value for key, value in difference.items()}


def _page(title: str, plan: Plan, report: ModelReport | None, differences: dict[str, dict]) -> str:
    rows = plan_rows(plan)
    # every "<" escaped (JSON reads \u003c back as "<"): "</script" would end the data block, and "<!--" or
    # "<script" in a name would make the browser's parser read on past its "</script>" (a hostile model's names);
    # so it goes into the page as it is (Markup), where autoescaping would write &#34; for each quote
    data = json.dumps(graph_data(plan, rows, differences), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    assets = resources.files(__package__) / "assets"
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = environment.from_string((assets / "report.html.j2").read_text(encoding="utf-8"))
    return template.render(
        title=title, summary=_summary(plan, rows), comparison=_comparison(report) if report is not None else None,
        compared=bool(differences), data=markupsafe.Markup(data),
        css=(assets / "report.css").read_text(encoding="utf-8"), elk=(assets / "elk.bundled.js").read_text(encoding="utf-8"),
        script=(assets / "report.js").read_text(encoding="utf-8"))


def _summary(plan: Plan, rows: list[dict]) -> dict:
    """Feature level and rules, then nodes and MACs by placement and by op type."""
    by_placement = {g["placement"]: g for g in counted(rows, lambda row: {"placement": row["placement"]})}
    none = {"nodes": 0, "macs": 0, "macs_percent": 0.0}
    by_op_type = counted(rows, lambda row: {"op_type": row["op_type"], "placement": row["placement"],
                                            "runs_on": row["runs_on"] if row["placement"] == "modelled" else "-"})
    return {
        "feature_level": str(plan.feature_level),
        "rules": f"onnxruntime {plan.qdq_rules} rewrites" if plan.qdq_rules else "QDQ rules off",
        "nodes": len(rows),
        "pending": len(plan.pending),
        "assumed": ", ".join(f"{k}={v}" for k, v in plan.assumed.items()),
        "placements": [{"placement": p, "text": PLACEMENT_TEXT[p], "nodes": g["nodes"], "macs": f"{g['macs']:,}",
                        "percent": f"{g['macs_percent']:.1f}%"} for p, g in ((p, by_placement.get(p, none)) for p in PLACEMENTS)],
        "op_types": [[g["op_type"], g["placement"], g["runs_on"], g["nodes"], f"{g['macs']:,}", f"{g['macs_percent']:.1f}%"]
                     for g in by_op_type],
    }


def _comparison(report: ModelReport) -> dict:
    """Each output against the reference with its histogram of differences, the causes, and the
    first node that differs in isolation."""
    outputs = [{"name": output.name,
                "caption": output.problem or f"{output.dtype} {output.shape}, {output.exact_percent:.2f}% exact, "
                                             f"max diff {output.max_diff:g} {output.unit}",
                "histogram": _histogram(output, report.candidate_outputs.get(output.name), report.reference_outputs.get(output.name))}
               for output in report.outputs]
    return {"reference": report.reference, "candidate": report.candidate, "arithmetic": report.arithmetic, "tolerance": report.tolerance.describe(),
            "ok": report.ok, "outputs": outputs, "first": report.first_divergent,
            "causes": ", ".join(f"{cause} {count}" for cause, count in report.cause_counts.items())}


def _histogram(output: TensorComparison, candidate: np.ndarray | None, reference: np.ndarray | None) -> dict | None:
    """The output's elements by difference, as bars on a log scale (the equal ones outnumber the
    rest by orders of magnitude), each with its count written above it: in signed LSB for a
    quantized output, else in float32 ULPs of the reference's value, when the two have the same
    shape; None otherwise."""
    if output.histogram is not None:
        counts = {"0": output.equal, **output.histogram}
        bins = {label: counts[label] for label in ("-2", "-1", "0", "+1", "+2", "other")}
        x_label = "difference, dml_ep - onnxruntime, in LSB"
    elif candidate is not None and reference is not None and candidate.shape == reference.shape and reference.dtype.kind == "f":
        bins = _ulp_bins(candidate, reference)
        x_label = "|difference| in float32 ULPs of the reference's value"
    else:
        return None
    left, top, base = 52, 20, HISTOGRAM_HEIGHT - 34
    most = math.log10(max(max(bins.values()), 1)) or 1.0
    height_of = lambda count: 0.0 if not count else max(1.5, (base - top) * (math.log10(count) + 0.3) / (most + 0.3))  # noqa: E731
    width = (HISTOGRAM_WIDTH - left - 4) / len(bins)
    bars = [{"label": label, "count": count, "kind": "equal" if label == "0" else "differ", "x": round(left + index * width + 4, 1),
             "width": round(width - 8, 1), "height": round(height_of(count), 1), "y": round(base - height_of(count), 1),
             "middle": round(left + (index + 0.5) * width, 1)}
            for index, (label, count) in enumerate(bins.items())]
    ticks = [{"y": round(base - height_of(10 ** power), 1), "label": f"{10 ** power:,}"} for power in range(int(most) + 1)]
    return {"width": HISTOGRAM_WIDTH, "height": HISTOGRAM_HEIGHT, "left": left, "top": top, "base": base, "bars": bars, "ticks": ticks,
            "x_label": x_label, "y_label": "elements (log scale)"}


def _ulp_bins(candidate: np.ndarray, reference: np.ndarray) -> dict[str, int]:
    """Elements by |difference| in float32 ULPs of the reference's value (NaN against NaN equal)."""
    expected = reference.astype(np.float32)
    ulps = np.abs(differences(candidate, expected)[1]) / ulp(np.abs(expected), np.float32)  # no inf - inf: no warning
    return {"0": int(np.count_nonzero(ulps == 0)), "1 ulp": int(np.count_nonzero((ulps > 0) & (ulps <= 1))),
            "2": int(np.count_nonzero((ulps > 1) & (ulps <= 2))), "3-16": int(np.count_nonzero((ulps > 2) & (ulps <= 16))),
            "> 16": int(np.count_nonzero(ulps > 16))}
