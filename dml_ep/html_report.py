"""The plan, and after ``compare`` the differences, as one HTML page that works offline from disk.

Python writes what is a table (the summary, each output's histogram of differences, the causes);
the page's script draws the graph the real EP runs from the plan embedded as JSON: each plan entry
a box coloured by where it runs (:data:`dml_ep.real_ep.PLACEMENTS`) or by its largest difference,
searchable, zoomable, with its details on click. The graph is laid out in the browser by ELK's
layered algorithm (elkjs, bundled in ``report_assets/`` with its licence), which lays out a
2,000-node graph in about two seconds. Every box carries ``data-node`` (the ONNX node's name) and
``data-placement``, for scripts and tests; the page sets ``data-render-ms`` on ``<html>`` once drawn.
"""

from __future__ import annotations

import html
import json
import math
from importlib import resources

import numpy as np

from .report import ModelReport, TensorComparison, differences, node_label, ulp
from .graph import node_reads
from .node_table import PENDING, PENDING_REASON, counted, node_differences, plan_rows
from .plan import DmlNode, Plan
from .real_ep import PLACEMENTS

PLACEMENT_TEXT = {
    "modelled": "on DirectML, modelled by dml_ep",
    "real-ep-dml": "on DirectML in the real EP, not modelled",
    "cpu": "on the CPU in the real EP",
}
HISTOGRAM_WIDTH, HISTOGRAM_HEIGHT = 240, 70


def plan_report(plan: Plan, title: str) -> str:
    """The page of ``dml-ep inspect --html``."""
    return _page(title, plan, [], {})


def compare_report(report: ModelReport) -> str:
    """The page of ``dml-ep compare --html``: the plan compared, coloured by differences too."""
    assert report.dml_plan is not None, "a report made by compare_model"
    return _page(report.model, report.dml_plan, _comparison_sections(report), node_differences(report))


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


def _page(title: str, plan: Plan, comparison: list[str], differences: dict[str, dict]) -> str:
    rows = plan_rows(plan)
    # every "<" escaped (JSON reads \u003c back as "<"): "</script" would end the data block, and "<!--" or
    # "<script" in a name would make the browser's parser read on past its "</script>" (a hostile model's names)
    data = json.dumps(graph_data(plan, rows, differences), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    assets = resources.files(__package__) / "report_assets"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dml_ep: {html.escape(title)}</title>",
        f"<style>{(assets / 'report.css').read_text(encoding='utf-8')}</style>",
        "</head><body>",
        f"<header><h1>{html.escape(title)}</h1></header>",
        *_summary_sections(plan, rows),
        *comparison,
        '<section id="graph-section"><h2>The graph the real EP runs</h2>',
        '<div id="toolbar"><input id="search" type="search" placeholder="search nodes (name, op type, operator)" size="40">'
        ' <span id="matches"></span> <label>colour by <select id="colour-by"><option value="placement">placement</option>'
        + ('<option value="isolated">largest difference, isolated</option>'
           '<option value="propagated">largest difference, propagated</option>' if differences else "")
        + '</select></label> <button id="fit">whole graph</button> <span id="legend"></span></div>',
        '<div id="graph-view"><svg id="graph" xmlns="http://www.w3.org/2000/svg"><g id="viewport"></g></svg>'
        '<aside id="details" hidden></aside></div>',
        '<p id="status">laying out the graph...</p></section>',
        f'<script type="application/json" id="plan-data">{data}</script>',
        f"<script>{(assets / 'elk.bundled.js').read_text(encoding='utf-8')}</script>",
        f"<script>{(assets / 'report.js').read_text(encoding='utf-8')}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _summary_sections(plan: Plan, rows: list[dict]) -> list[str]:
    """Feature level and rules, then nodes and MACs by placement and by op type."""
    rules = f"onnxruntime {plan.qdq_rules} rewrites" if plan.qdq_rules else "QDQ rules off"
    lines = ['<section id="summary"><h2>Summary</h2>',
             f"<p>{html.escape(str(plan.feature_level))}, {html.escape(rules)}: {len(rows)} node(s) planned.</p>"]
    if plan.pending:
        lines.append(f"<p>{len(plan.pending)} node(s) are planned only when run, their input shapes depend on data (drawn dashed, "
                     "white): give <code>--input</code> to plan from a run.</p>")
    if plan.assumed:
        taken = ", ".join(f"{k}={v}" for k, v in plan.assumed.items())
        lines.append(f"<p>Planned with the symbolic dimensions taken as {html.escape(taken)}.</p>")
    by_placement = {g["placement"]: g for g in counted(rows, lambda row: {"placement": row["placement"]})}
    none = {"nodes": 0, "macs": 0, "macs_percent": 0.0}
    lines.append(_table(["placement", "nodes", "MACs", "% of MACs"],
                        [[f'<span class="swatch {p}"></span>{PLACEMENT_TEXT[p]}', g["nodes"], f"{g['macs']:,}", f"{g['macs_percent']:.1f}%"]
                         for p, g in ((p, by_placement.get(p, none)) for p in PLACEMENTS)], escape=False))
    by_op_type = counted(rows, lambda row: {"op_type": row["op_type"], "placement": row["placement"],
                                            "runs_on": row["runs_on"] if row["placement"] == "modelled" else "-"})
    lines.append("<h3>By op type</h3>")
    lines.append(_table(["op type", "placement", "runs on", "nodes", "MACs", "% of MACs"],
                        [[g["op_type"], g["placement"], g["runs_on"], g["nodes"], f"{g['macs']:,}", f"{g['macs_percent']:.1f}%"]
                         for g in by_op_type]))
    return lines + ["</section>"]


def _comparison_sections(report: ModelReport) -> list[str]:
    """Each output against the reference with its histogram of differences, the causes, and the
    first node that differs in isolation."""
    lines = ['<section id="comparison"><h2>Compared with onnxruntime</h2>',
             f"<p>reference: {html.escape(report.reference)}; candidate: {html.escape(report.candidate)}, "
             f"{html.escape(report.arithmetic)}; tolerance {html.escape(report.tolerance.describe())}: <b>{'OK' if report.ok else 'MISMATCH'}</b></p>",
             '<div class="outputs">']
    for output in report.outputs:
        lines.append(f'<figure class="output" data-output="{html.escape(output.name)}"><figcaption>{html.escape(output.name)}: '
                     + (html.escape(output.problem) if output.problem else
                        f"{output.dtype} {output.shape}, {output.exact_percent:.2f}% exact, max diff {output.max_diff:g} {output.unit}")
                     + f"</figcaption>{_histogram(output, report.candidate_outputs.get(output.name), report.reference_outputs.get(output.name))}</figure>")
    lines.append("</div>")
    counts = report.cause_counts
    lines.append("<p>Causes (nodes differing in isolation): "
                 + (html.escape(", ".join(f"{cause} {count}" for cause, count in counts.items())) or "none") + "</p>")
    first = report.first_divergent
    if first is not None:
        lines.append(f'<p>First node differing in isolation: <a href="#" class="goto" data-goto="{html.escape(first.node)}">'
                     f"{html.escape(first.node)}</a> ({html.escape(first.op_type)}), {html.escape(first.cause_text or 'no cause named')}</p>")
    return lines + ["</section>"]


def _histogram(output: TensorComparison, candidate: np.ndarray | None, reference: np.ndarray | None) -> str:
    """The output's elements by difference, as SVG bars on a log scale (the equal ones outnumber the
    rest by orders of magnitude): in signed LSB for a quantized output, else in float32 ULPs of the
    reference's value, when the two have the same shape."""
    if output.histogram is not None:
        counts = {"0": output.equal, **output.histogram}
        bins = {label: counts[label] for label in ("-2", "-1", "0", "+1", "+2", "other")}
    elif candidate is not None and reference is not None and candidate.shape == reference.shape and reference.dtype.kind == "f":
        bins = _ulp_bins(candidate, reference)
    else:
        return '<p class="note">no histogram: the two outputs differ in type or shape</p>'
    most = math.log1p(max(bins.values())) or 1.0
    width = HISTOGRAM_WIDTH / len(bins)
    bars = []
    for index, (label, count) in enumerate(bins.items()):
        height = 0 if not count else max(1.0, (HISTOGRAM_HEIGHT - 20) * math.log1p(count) / most)
        x = index * width
        bars.append(f'<g data-bin="{label}" data-count="{count}"><title>{label}: {count:,}</title>'
                    f'<rect x="{x + 2:.1f}" y="{HISTOGRAM_HEIGHT - 14 - height:.1f}" width="{width - 4:.1f}" height="{height:.1f}" '
                    f'class="{"equal" if label == "0" else "differ"}"/>'
                    f'<text x="{x + width / 2:.1f}" y="{HISTOGRAM_HEIGHT - 2}">{label}</text></g>')
    return (f'<svg class="histogram" width="{HISTOGRAM_WIDTH}" height="{HISTOGRAM_HEIGHT}" '
            f'viewBox="0 0 {HISTOGRAM_WIDTH} {HISTOGRAM_HEIGHT}">{"".join(bars)}</svg>')


def _ulp_bins(candidate: np.ndarray, reference: np.ndarray) -> dict[str, int]:
    """Elements by |difference| in float32 ULPs of the reference's value (NaN against NaN equal)."""
    expected = reference.astype(np.float32)
    ulps = np.abs(differences(candidate, expected)[1]) / ulp(np.abs(expected), np.float32)  # no inf - inf: no warning
    return {"0": int(np.count_nonzero(ulps == 0)), "1 ulp": int(np.count_nonzero((ulps > 0) & (ulps <= 1))),
            "2": int(np.count_nonzero((ulps > 1) & (ulps <= 2))), "3-16": int(np.count_nonzero((ulps > 2) & (ulps <= 16))),
            "> 16": int(np.count_nonzero(ulps > 16))}


def _table(header: list[str], rows: list[list], escape: bool = True) -> str:
    cell = (lambda v: html.escape(str(v))) if escape else str
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
