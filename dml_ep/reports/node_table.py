"""The plan as one row per node, the way every picture of it reads it: ``inspect``'s table and JSON,
the HTML report, Model Explorer's node data and the rewritten model's metadata.

A row names the node (as the rewritten graph has it), where it runs (:data:`dml_ep.realep.placement.PLACEMENTS`),
its DirectML operator or the fallback reason, the rewrite that made it and the model's nodes it
stands for. :func:`node_differences` adds, after ``compare``, each node's largest difference.
"""

from __future__ import annotations

from ..operators.nodes import DmlNode, PlanEntry
from ..planning.plan import Plan, node_macs
from ..realep.placement import CPU_CLASSES
from .report import ModelReport, NodeComparison, TensorComparison, node_label

# A node the plan has not placed yet: its input shapes come with the data (Plan.pending).
PENDING = "pending"
PENDING_REASON = "its input shapes depend on data: planned when run (inspect --input plans it from a run)"
# Fallbacks before a run that dml_ep models: Shape's CPU-output kernel; a node planned from a value a run computes.
MODELLED_FALLBACKS = ("cpu-output", "planned-when-run")


def placement(entry: PlanEntry) -> str:
    """``modelled`` (a DirectML operator dml_ep runs, the DML EP's own CPU-output kernel, Shape's,
    whose values onnxruntime's CPU kernel gives, or a node dml_ep plans when a run computes its CPU
    inputs), ``real-ep-dml`` or ``cpu`` (where the real EP runs a node dml_ep leaves to the CPU fallback)."""
    if isinstance(entry, DmlNode) or entry.kind in MODELLED_FALLBACKS:
        return "modelled"
    return "cpu" if entry.kind in CPU_CLASSES else "real-ep-dml"


def plan_rows(plan: Plan) -> list[dict]:
    """One row per plan entry, in execution order."""
    return [
        {"node": node_label(entry.node),
         "op_type": entry.node.op_type,
         "placement": placement(entry),
         "reason_class": "modelled" if isinstance(entry, DmlNode) else entry.kind,
         "runs_on": entry.summary(),
         "rule": entry.origin.rule,
         "from": [node_label(n) for n in entry.origin.nodes],
         "macs": node_macs(entry.node, plan.values),
         **({"desc": entry.desc.to_dict()} if isinstance(entry, DmlNode) else {"reason": entry.reason})}
        for entry in plan.entries
    ]


def counted(rows: list[dict], key) -> list[dict]:
    """Rows counted by ``key(row)``, the fields that name a row's group: each group's nodes, MACs
    and share of all the rows' MACs, most MACs first."""
    total = sum(row["macs"] for row in rows)
    groups: dict[tuple, dict] = {}
    for row in rows:
        fields = key(row)
        group = groups.setdefault(tuple(fields.values()), {**fields, "nodes": 0, "macs": 0})
        group["nodes"] += 1
        group["macs"] += row["macs"]
    for group in groups.values():
        group["macs_percent"] = 100.0 * group["macs"] / total if total else 0.0
    return sorted(groups.values(), key=lambda g: (-g["macs"], -g["nodes"]))


def node_differences(report: ModelReport) -> dict[str, dict]:
    """Each compared node's largest difference, by node name: ``isolated`` (its DirectML operator
    on onnxruntime's inputs; None when not run alone) and ``propagated`` (its outputs after both
    full runs), in its ``unit`` (:func:`comparisons_in_unit`); for a float unit ("abs") the same in
    ULPs too (``isolated_ulps``, ``propagated_ulps``: TensorComparison.max_ulps, None without one);
    its ``cause``; and whether it is the first node that differs in isolation. Empty when the
    comparison did not go node by node."""
    first = report.first_divergent
    differences = {}
    for node in report.nodes or ():
        unit, compared = comparisons_in_unit(node)
        propagated = [c.max_diff for c in compared["propagated"]]
        propagated_ulps = [c.max_ulps for c in compared["propagated"] if c.max_ulps is not None]
        differences[node.node] = {
            "isolated": node.isolated.max_diff if node.isolated is not None else None,
            "propagated": max(propagated) if propagated else None,
            "unit": unit,
            "isolated_ulps": node.isolated.max_ulps if node.isolated is not None else None,
            "propagated_ulps": max(propagated_ulps) if propagated_ulps and len(propagated_ulps) == len(propagated) else None,
            "cause": node.cause_text or None,
            "first_divergent": node is first,
        }
    return differences


def comparisons_in_unit(node: NodeComparison) -> tuple[str | None, dict[str, list[TensorComparison]]]:
    """A compared node's unit (LSB for a quantized value, else "abs") and its comparisons in it:
    ``isolated`` and ``propagated``. The unit is its first output's, so that a largest difference
    never mixes units (a DynamicQuantizeLinear's float scale stays out of its LSB)."""
    first = node.isolated if node.isolated is not None else next(iter(node.propagated), None)
    unit = first.unit if first is not None else None
    return unit, {"isolated": [node.isolated] if node.isolated is not None else [],
                  "propagated": [c for c in node.propagated if c.unit == unit]}
