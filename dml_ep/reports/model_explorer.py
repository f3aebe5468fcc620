"""Model Explorer's node data for a model (``dml-ep inspect``/``compare --model-explorer DIR``):
where each of its nodes runs in the real DML EP, its MACs and, after ``compare``, its largest
difference, one JSON file per overlay, made with Model Explorer's own builder
(``model_explorer.node_data_builder``, of the ``model-explorer`` extra).

Model Explorer shows the model as the user wrote it, through its ONNX adapter
(``model-explorer-onnx``); dml_ep's plan is of the graph after onnxruntime's rewrites. Each plan
entry names the model's nodes it stands for (``origin.nodes``), and each of those gets the
entry's placement and largest differences (the DequantizeLinear, Conv and QuantizeLinear fused into
one QLinearConv all get the QLinearConv's); an entry's MACs go once, to its main node (the Conv),
so that Model Explorer's sums over a namespace are the model's. A node no entry stands for
(onnxruntime's rewrites folded it away, or inspect plans it only when run) has no data.

Nodes are keyed by the ids the ONNX adapter gives them: their names after onnx_ir's NameFixPass,
which the adapter runs first (model_explorer_onnx ``_passes.process_model``; ``main.create_node``
takes ``id=onnx_node.name``): an unnamed node is named ``node``, ``node_1``, ..., a repeated name
becomes ``name_1``, .... They are in the graph whose id is the main graph's name (``<main>`` when
onnx_ir reads none: ``ONNXAdapter.convert``). Overlays of the rewritten graph (``--save-rewritten``)
would key each plan entry by the id of its own node in that file, found the same way, with no
origins to follow.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

import onnx

from ..core import files
from ..core.errors import DmlEpError, import_extra
from ..planning.plan import CONV_WEIGHT_INPUT, ELEMENT_WISE, MATMUL_A_INPUT, Plan, node_macs
from ..realep.placement import PLACEMENTS
from .node_table import comparisons_in_unit, placement
from .report import ModelReport, NodeComparison

EXTRA = "model-explorer"
ADAPTER = "model_explorer_onnx"  # the ONNX adapter's module, which Model Explorer loads with --extensions

PLACEMENT_FILE = "placement.json"
MACS_FILE = "macs.json"

# Background colours (Model Explorer reads hex colours): a placement each, a node whose parts run
# in different places; a difference exact, within the tolerance, out of it.
PLACEMENT_COLOURS = {"modelled": "#81c784", "real-ep-dml": "#64b5f6", "cpu": "#e57373"}
MIXED_COLOUR = "#ffb74d"
EXACT, WITHIN, OUT = "#81c784", "#fff176", "#e57373"
MACS_GRADIENT = ("#ffffff", "#ef6c00")  # no MACs to the most of any node


def require() -> None:
    """Fail before any work, in one line naming the extra, when its packages are not installed."""
    for module in ("model_explorer.node_data_builder", "onnx_ir.passes.common"):
        _import(module)


def _import(module: str):
    return import_extra(module, "Model Explorer's node data", EXTRA)


def model_node_ids(model: onnx.ModelProto) -> tuple[str, list[str]]:
    """The id the ONNX adapter gives the model's main graph, and its nodes' (in the model's order)."""
    ir = _import("onnx_ir")
    passes = _import("onnx_ir.passes.common")
    ir_model = ir.serde.deserialize_model(model)
    nodes = list(ir_model.graph)
    passes.NameFixPass()(ir_model)
    name = ir_model.graph.name
    return "<main>" if name is None else name, [node.name for node in nodes]


@dataclasses.dataclass
class Difference:
    """A node's largest difference, in one unit, and whether every comparison it comes from was
    within the tolerance."""

    largest: float
    within_tolerance: bool

    def worse(self, other: Difference | None) -> Difference:
        """The larger of the two (NaN the largest of all), within the tolerance if both are."""
        if other is None:
            return self
        return Difference(max(self.largest, other.largest, key=_order), self.within_tolerance and other.within_tolerance)


def _order(value: float) -> float:
    """NaN (a value only one side has) sorts as the largest difference."""
    return math.inf if math.isnan(value) else value


@dataclasses.dataclass
class NodeData:
    """What the overlays show of one node of the model."""

    placements: set[str] = dataclasses.field(default_factory=set)
    macs: int = 0
    differences: dict[tuple[str, str], Difference] = dataclasses.field(default_factory=dict)  # (kind, unit) ->

    @property
    def placement(self) -> str:
        """Where it runs: one of PLACEMENTS, or those of its parts, as ``modelled + cpu``."""
        return " + ".join(p for p in PLACEMENTS if p in self.placements)


def collect(model: onnx.ModelProto, plan: Plan, reports: Sequence[ModelReport] = ()) -> dict[int, NodeData]:
    """Each node of ``model`` a plan entry stands for, by its index: the placements and MACs of
    ``plan`` (of ``model``), and the largest differences of ``reports`` (compared node by node,
    dml_ep as the candidate) over all of them."""
    data: dict[int, NodeData] = {}
    for entry, indices in zip(plan.entries, origin_indices(model, plan)):
        for index in indices:
            data.setdefault(index, NodeData()).placements.add(placement(entry))
        if indices:
            data[indices[main_node(model, indices)]].macs += node_macs(entry.node, plan.values)
    for report in reports:
        compared = report.dml_plan
        if report.candidate != "dml_ep" or report.nodes is None or compared is None:
            raise DmlEpError(f"{report.model}: Model Explorer's differences are dml_ep's, compared node by node "
                             "(compare_model with per_node=True and candidate dml_ep)")
        assert len(report.nodes) == len(compared.entries), "one comparison per entry of the plan compared"
        for node, indices in zip(report.nodes, origin_indices(model, compared)):
            for key, difference in largest_differences(node).items():
                for index in indices:
                    found = data.setdefault(index, NodeData()).differences
                    found[key] = difference.worse(found.get(key))
    return dict(sorted(data.items()))


def origin_indices(model: onnx.ModelProto, plan: Plan) -> list[list[int]]:
    """For each plan entry, the indices in ``model`` of the nodes it stands for. Origins are copies
    of the model's nodes (:func:`dml_ep.core.graph.skeleton`), found by their contents."""
    index = {node.SerializeToString(deterministic=True): i for i, node in enumerate(model.graph.node)}
    return [[index[node.SerializeToString(deterministic=True)] for node in entry.origin.nodes] for entry in plan.entries]


def main_node(model: onnx.ModelProto, indices: list[int]) -> int:
    """Which of an entry's nodes its MACs go to: its first convolution or matmul, else its first
    element-wise arithmetic, else its first node (a DynamicQuantizeLinear -> MatMulInteger -> Cast ->
    Mul chain's MatMulInteger, not the Mul of its scales)."""
    op_types = [model.graph.node[i].op_type for i in indices]
    for kinds in ({**CONV_WEIGHT_INPUT, **MATMUL_A_INPUT}, ELEMENT_WISE):
        found = next((position for position, op_type in enumerate(op_types) if op_type in kinds), None)
        if found is not None:
            return found
    return 0


def largest_differences(node: NodeComparison) -> dict[tuple[str, str], Difference]:
    """A compared node's largest difference by (kind, unit): ``isolated`` and ``propagated``."""
    unit, compared = comparisons_in_unit(node)
    return {(kind, unit): Difference(max((c.max_diff for c in comparisons), key=_order), all(c.within_tolerance for c in comparisons))
            for kind, comparisons in compared.items() if unit is not None and comparisons}


def difference_file(kind: str, unit: str) -> str:
    return f"diff-{kind}-{unit.lower()}.json"


def node_data(model: onnx.ModelProto, plan: Plan, reports: Sequence[ModelReport] = ()) -> dict[str, Any]:
    """The overlays, as ``ModelNodeData`` by file name: placement and MACs, and after ``reports``
    each largest difference there is, by kind (isolated, propagated) and unit (LSB, abs)."""
    builder = _import("model_explorer.node_data_builder")
    graph_id, ids = model_node_ids(model)
    data = collect(model, plan, reports)

    def overlay(results: dict, **style) -> Any:
        return builder.ModelNodeData(graphsData={graph_id: builder.GraphNodeData(results=results, **style)})

    placements = {ids[i]: builder.NodeDataResult(value=d.placement, bgColor=PLACEMENT_COLOURS.get(d.placement, MIXED_COLOUR))
                  for i, d in data.items()}
    overlays = {
        PLACEMENT_FILE: overlay(placements, showExpandedSummaryOnGroupNode=True, showLabelCountColumnsInChildrenStatsTable=True),
        MACS_FILE: overlay({ids[i]: builder.NodeDataResult(value=d.macs) for i, d in data.items()},
                           gradient=[builder.GradientItem(stop=0, bgColor=MACS_GRADIENT[0]), builder.GradientItem(stop=1, bgColor=MACS_GRADIENT[1])]),
    }
    for key in sorted({key for d in data.values() for key in d.differences}):
        results = {ids[i]: difference_result(builder, d.differences[key]) for i, d in data.items() if key in d.differences}
        overlays[difference_file(*key)] = overlay(results)
    return overlays


def difference_result(builder, difference: Difference) -> Any:
    """A largest difference, coloured exact / within the tolerance / out of it. JSON has no
    infinity or NaN (a shape mismatch, a value only one side has): those are written as text."""
    value = difference.largest
    colour = EXACT if value == 0 else WITHIN if difference.within_tolerance else OUT
    if not math.isfinite(value):
        return builder.NodeDataResult(value=str(value), bgColor=colour)
    return builder.NodeDataResult(value=int(value) if value.is_integer() else value, bgColor=colour)


def write(directory: str, model: onnx.ModelProto, plan: Plan, reports: Sequence[ModelReport] = ()) -> list[str]:
    """Write the overlays into ``directory``, new or empty (all at once or none); their file names."""
    overlays = node_data(model, plan, reports)
    files.write_directory(directory, {name: files.text_writer(data.to_json_string(indent=2)) for name, data in overlays.items()},
                          "--model-explorer")
    return list(overlays)


def open_command(model_path: str, paths: Sequence[str]) -> str:
    """The shell command that opens the model in Model Explorer with the overlays."""
    return shlex.join(["model-explorer", model_path, f"--extensions={ADAPTER}", f"--node_data_paths={','.join(paths)}"])


def write_with_command(directory: str, model_path: str, model: onnx.ModelProto, plan: Plan, reports: Sequence[ModelReport] = ()) -> str:
    """Write the node data into ``directory`` (:func:`write`); the lines that say so and how to open the model with it."""
    names = write(directory, model, plan, reports)
    paths = [os.path.join(directory, name) for name in names]
    return (f"\nwrote {directory}: Model Explorer node data {', '.join(names)}; open the model with it:\n"
            f"  {open_command(model_path, paths)}")
