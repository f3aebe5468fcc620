"""The text ``inspect`` prints of a plan: the summary (:func:`inspect_summary`: node counts and
estimated MACs by op type and by fallback reason, the totals on DirectML and on the fallback, the
symbolic dimensions assumed, the shapes onnxruntime refused in a subgraph, the nodes planned only
when run), ``--nodes``' listing of every plan entry (:func:`nodes_text`) and ``--descs``' operator
descs (:func:`descs_text`); and ``--json``'s report (:func:`inspect_json`), which a sweep's
``--plan-only`` tasks store too.

The summary is for a terminal: no line passes INSPECT_WIDTH, long names shortened with an ellipsis
(in the middle, where names differ at both ends). ``--nodes``, ``--descs`` and the JSON keep whole
names.
"""

from __future__ import annotations

import textwrap

from ..operators.nodes import DmlNode
from ..passes.dml_fusion import NAME as DML_FUSION
from ..planning.plan import Plan, node_macs
from ..realep.placement import CPU_CLASSES, REASON_CLASSES
from .meta import report_meta
from .node_table import counted
from .report import node_label
from .text import printable, rules_text, table

INSPECT_WIDTH = 160  # the longest line of inspect's summary (--nodes, --descs and the JSON keep whole names)
PENDING_SHOWN = 5  # pending nodes the summary names


def inspect_json(model_path: str, shapes: dict, plan: Plan, rows: list[dict]) -> dict:
    """``inspect --json``'s report of ``plan`` (``rows``: its :func:`dml_ep.reports.node_table.plan_rows`),
    planned for the ``--shape`` sizes ``shapes``."""
    return report_meta("inspect", model=model_path, input_shapes=shapes, assumed=plan.assumed,
                       pending=[node_label(n) for n in plan.pending], refused=plan.refused, nodes=rows,
                       summary=plan.summary(), by_op_type=by_op_type(rows), by_reason=by_reason(plan),
                       by_reason_class=by_reason_class(rows))


def by_op_type(rows: list[dict]) -> list[dict]:
    """Plan entries counted by op type and where they run (a DirectML operator, or ``fallback``),
    most MACs first."""
    return counted(rows, lambda row: {"op_type": row["op_type"], "runs_on": row["runs_on"] if row["reason_class"] == "modelled" else "fallback"})


def by_reason_class(rows: list[dict]) -> list[dict]:
    """Plan entries counted by reason class (dml_ep.realep.placement.REASON_CLASSES), in that table's order:
    where the real EP runs them and why."""
    groups = counted(rows, lambda row: {"reason_class": row["reason_class"]})
    return sorted(groups, key=lambda g: list(REASON_CLASSES).index(g["reason_class"]))


def by_reason(plan: Plan) -> list[dict]:
    """Fallback entries counted by reason, most MACs first. Unless the plan fused a QDQ group, a
    reason goes without the note on why no QDQ rule fused its node, when no rule would on any
    provider (the note stays in ``--nodes`` and the JSON's rows)."""
    qdq = _qdq_rewritten(plan)
    groups: dict[str, dict] = {}
    for entry in plan.fallback_nodes:
        reason, note = entry.reason, entry.origin.note
        if note and not qdq and entry.origin.cpu_rule is None:
            reason = reason.removesuffix(f" ({note})")
        group = groups.setdefault(reason, {"reason": reason, "nodes": 0, "macs": 0})
        group["nodes"] += 1
        group["macs"] += node_macs(entry.node, plan.values)
    return sorted(groups.values(), key=lambda g: (-g["macs"], -g["nodes"]))


def _qdq_rewritten(plan: Plan) -> int:
    """How many plan entries onnxruntime's passes made (not counting the DML EP's activation fusion)."""
    return sum(1 for e in plan.entries if set(e.origin.rules) - {DML_FUSION})


def inspect_summary(plan: Plan, rows: list[dict], summary: dict, op_types: list[dict], reasons: list[dict],
                    classes: list[dict]) -> list[str]:
    """inspect's default report, no line over INSPECT_WIDTH: long names shortened with an ellipsis;
    ``op_types``, ``reasons`` and ``classes`` as :func:`by_op_type`, :func:`by_reason` and
    :func:`by_reason_class` count them."""
    lines = [_heading(plan, rows, summary)]
    total = sum(r["macs"] for r in rows)
    if op_types:
        lines += [""] + _fitted_table(
            ["op type", "nodes", "runs on", "MACs", "% of MACs"],
            [[g["op_type"], g["nodes"], f"DirectML ({g['runs_on']})" if g["runs_on"] != "fallback" else "CPU fallback",
              f"{g['macs']:,}", f"{g['macs_percent']:.1f}%" if total else "-"] for g in op_types],
            right={1, 3, 4}, shrink=[0, 2])
    if classes:
        lines += [""] + _fitted_table(["where the real EP runs it, and why", "class", "nodes", "MACs"],
                                      [[("CPU: " if g["reason_class"] in CPU_CLASSES else "DirectML: ") + REASON_CLASSES[g["reason_class"]],
                                        g["reason_class"], g["nodes"], f"{g['macs']:,}"] for g in classes],
                                      right={2, 3}, shrink=[0])
    if reasons:
        lines += [""] + _fitted_table(["fallback reason", "nodes", "MACs"],
                                      [[g["reason"], g["nodes"], f"{g['macs']:,}"] for g in reasons],
                                      right={1, 2}, shrink=[0])
    lines += ["", f"{summary['feature_level']}: {summary['dml']['nodes']} of the model's {summary['model_nodes']} node(s) on DirectML "
                  f"({summary['dml']['operators']} operator(s)), {summary['fallback']['nodes']} on the CPU fallback"]
    macs = (f"estimated MACs: {summary['dml']['macs']:,} on DirectML ({summary['dml']['macs_percent']:.1f}%), "
            f"{summary['fallback']['macs']:,} on the fallback")
    lines += _with_assumed(macs, plan.assumed)
    if plan.refused:  # the model as given types fine: these shapes fail inside a branch or body that a run may never enter
        lines += textwrap.wrap(printable(f"onnxruntime's shape inference refuses these input shapes inside a subgraph, which a run "
                                         f"may not enter; the nodes they reach are planned when run: {plan.refused}"),
                               INSPECT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    if plan.pending:
        lines.append(f"{len(plan.pending)} node(s) are planned only when run, their input shapes depend on data "
                     "(give --input to plan from a run; --nodes lists them):")
        lines.append("  " + _fit_list([node_label(n) for n in plan.pending], INSPECT_WIDTH - 2, most=PENDING_SHOWN))
    return lines


def _heading(plan: Plan, rows: list[dict], summary: dict) -> str:
    """The feature level, the rewrites (when any applied) and how many nodes were planned."""
    head = summary["feature_level"]
    if _qdq_rewritten(plan):
        head += f", {rules_text(plan.qdq_rules)}"
    head += f": {len(rows)} node(s) planned"
    rewritten = sum(1 for r in rows if r["rule"])
    if rewritten:
        head += f", {rewritten} made by onnxruntime's graph rewrites (--nodes lists them)"
    return head


def _with_assumed(macs: str, assumed: dict[str, int]) -> list[str]:
    """The MACs line and, when symbolic dimensions were taken as some size, which and how to give
    them: MACs counted on sizes the user never chose are an estimate to be warned of."""
    if not assumed:
        return [macs]
    sizes = [f"{dim}={size}" for dim, size in assumed.items()]
    macs += ", with the symbolic dimensions taken as "
    advice = ": give the shapes you run with (--shape NAME=D0,D1,... or --input)"
    note = f"symbolic dimensions {', '.join(assumed)} were taken as {', '.join(sizes)}{advice}"
    if len(note) > INSPECT_WIDTH:
        note = f"{len(sizes)} symbolic dimensions were taken as "
        note += _fit_list(sizes, INSPECT_WIDTH - len(note) - len(advice)) + advice
    return [macs + _fit_list(sizes, INSPECT_WIDTH - len(macs)), note]


def nodes_text(plan: Plan, rows: list[dict]) -> str:
    """``--nodes``: every plan entry, where it runs or why it falls back; the nodes onnxruntime's
    rewrites made and the model's nodes they stand for; the nodes planned only when run."""
    blocks = ["\n" + table(["node", "op type", "runs on", "rule"], [[r["node"], r["op_type"], r["runs_on"], r["rule"] or ""] for r in rows])]
    rewritten = [r for r in rows if r["rule"]]
    if rewritten:
        blocks.append(f"\nmade by onnxruntime's graph rewrites ({rules_text(plan.qdq_rules)}), from the model's nodes:")
        blocks.append("\n".join(printable(f"  {r['node']} ({r['op_type']}) <- {r['rule']}: {', '.join(r['from']) or '-'}") for r in rewritten))
    if plan.pending:
        blocks.append("\nplanned only when run, their input shapes depend on data:")
        blocks.append("\n".join(printable(f"  {node_label(n)} ({n.op_type})") for n in plan.pending))
    return "\n".join(blocks)


def descs_text(plan: Plan, rows: list[dict]) -> str | None:
    """``--descs``: each DirectML operator's desc, field by field, under its node; None without any."""
    blocks = []
    for row, entry in zip(rows, plan.entries):
        if isinstance(entry, DmlNode):
            blocks.append("\n" + printable(f"{row['node']}: {entry.operator}"))
            blocks.append("\n".join("  " + line for line in entry.desc.describe()))
    return "\n".join(blocks) if blocks else None


def _fitted_table(header: list[str], rows: list[list], right: set[int], shrink: list[int]) -> list[str]:
    """:func:`table` within INSPECT_WIDTH, the ``shrink`` columns cut as far as it takes."""
    return table(header, rows, right=right, width=INSPECT_WIDTH, shrink=shrink).splitlines()


def _fit_list(items: list[str], width: int, most: int | None = None) -> str:
    """``items`` joined by ", ", as many as fit in ``width`` (at most ``most``, each then shortened
    in the middle to share the width), then "and N more" for the others."""
    count = min(len(items), most or len(items))
    room = width - (len(f" and {len(items)} more") if len(items) > 1 else 0)
    each = max(16, room // max(count, 1) - 2 if most else room)
    shown: list[str] = []
    for index, item in enumerate(items[:count]):
        more = len(items) - index - 1
        candidate = shown + [_shorten_middle(item, each)]
        if shown and len(", ".join(candidate) + (f" and {more} more" if more else "")) > width:
            break
        shown = candidate
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _shorten_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by an ellipsis if too long (names
    differ at both ends)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:keep - keep // 2] + "…" + text[len(text) - keep // 2:]


def ascii_if_needed(text: str, out) -> str:
    """``text`` with its ellipses as "~" (as wide) where ``out``'s encoding has none."""
    try:
        "…".encode(getattr(out, "encoding", None) or "utf-8")
        return text
    except (UnicodeEncodeError, LookupError):
        return text.replace("…", "~")
