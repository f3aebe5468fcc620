"""The text ``compare`` prints: one report per comparison (:func:`format_report`), the summary of a
batch (:func:`format_summary`) and, on stderr, where a long comparison is (:class:`Progress`); with
the plain tables that ``inspect`` and ``run`` print too.

A percentage of equal elements reads 100% only when every element is equal: a near miss never
rounds up to it.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Collection, Sequence

import rich.cells

if TYPE_CHECKING:  # imported when a Progress is made: run has none, and rich's console and bars take 50 ms to import
    import rich.console
    import rich.progress

from ..core.graph import is_quantized
from ..ort.reference import DML_REFERENCE
from .report import ModelReport, NodeComparison, ShippedComparison, TensorComparison


def format_report(report: ModelReport, per_node: bool, only_differing: bool = False) -> str:
    """One comparison: each output's agreement (with ``per_node``, each node's; ``only_differing``:
    of the nodes not bit-exact), how much ran on DirectML, the shipped outputs' verdicts, the
    result and what to try where it points at the host's onnxruntime; and when it failed (or with
    ``per_node``) the causes and the first node that differs in isolation."""
    lines = [_heading(report)]
    lines += _indent(table(
        ["output", "dtype", "shape", "elements", "exact %", "max diff"],
        [[o.name, o.dtype, _shape(o), o.elements, _percent(o), _max_diff(o)] for o in report.outputs],
    ))
    if per_node and report.nodes:
        lines += _node_table(report.nodes, only_differing)
    if report.candidate == "dml_ep":
        plan = report.plan
        lines.append(f"  on DirectML: {plan['dml']['nodes']} of the model's {plan['model_nodes']} node(s) as "
                     f"{plan['dml']['operators']} operator(s), {plan['dml']['macs_percent']:.1f}% of the MACs "
                     f"({rules_text(plan['qdq_rules'])})")
    if report.shipped is not None:
        lines += _format_shipped(report, report.shipped)
    lines.append(_result_line(report))
    lines += _hints(report)
    lines += [printable(f"  {o.name}: {o.problem}") for o in report.outputs if not o.within_tolerance and o.problem]
    if report.nodes is not None and (per_node or not report.ok):
        lines += _causes(report)
    return "\n".join(lines)


def _heading(report: ModelReport) -> str:
    """The model and what was compared: dml_ep's arithmetic and feature level, or onnxruntime's configuration."""
    real_ep = report.reference == DML_REFERENCE
    reference = f"{report.reference} (the real DML EP)" if real_ep else report.reference
    if report.candidate == "dml_ep":
        return (f"{report.model}: reference {reference}, arithmetic {report.arithmetic}, "
                f"{report.feature_level}, tolerance {report.tolerance.describe()}")
    return f"{report.model}: onnxruntime {report.candidate} against reference {reference}, tolerance {report.tolerance.describe()}"


def _node_table(nodes: list[NodeComparison], only_differing: bool) -> list[str]:
    """``--per-node``'s table: each node's agreement as run (propagated) and in isolation, and its
    cause; ``only_differing``: of the nodes not bit-exact either way."""
    heading = "  node by node (isolated: fed onnxruntime's inputs):"
    if only_differing:
        shown = [n for n in nodes if n.inexact_in_isolation or any(c.differing for c in n.propagated)]
        heading = f"  node by node, the {len(shown)} of {len(nodes)} not bit-exact (isolated: fed onnxruntime's inputs):"
        if not shown:
            return ["", heading]
        nodes = shown
    rows = [[n.node, n.op_type, "fallback" if n.runs_on.startswith("fallback") else "DML",
             ", ".join(_percent(c) for c in n.propagated) or "-",
             _percent(n.isolated) if n.isolated else "-",
             _max_diff(n.isolated) if n.isolated else "-",
             n.cause_text] for n in nodes]
    header = ["node", "op type", "runs on", "exact %", "isolated exact %", "isolated max diff", "cause"]
    return ["", heading] + _indent(table(header, rows), "    ")


def _result_line(report: ModelReport) -> str:
    """The verdict, and why a mismatch is one; an OK says so when nothing ran on DirectML, since
    then the comparison checked onnxruntime's CPU EP (or dml_ep's fallback) against itself."""
    bad = [o for o in report.outputs if not o.within_tolerance]
    faulted = [s for s in report.shipped or () if s.faults_candidate]
    if not report.ok:
        reasons = [f"{len(bad)} of {len(report.outputs)} output(s) out of tolerance"] if bad else []
        if faulted:
            reasons.append(f"{len(faulted)} shipped output(s) missed where onnxruntime matches")
        return f"  result: MISMATCH ({'; '.join(reasons)})"
    if report.on_dml or report.candidate != "dml_ep":
        return "  result: OK"
    if report.reference == DML_REFERENCE:
        return "  result: OK, but dml_ep ran nothing on DirectML: its CPU fallback matches the real DML EP"
    return "  result: OK, but nothing ran on DirectML: both sides ran onnxruntime's CPU EP"


def _hints(report: ModelReport) -> list[str]:
    """What to try when the mismatch is the host's onnxruntime's own (its uint8 x int8 products
    saturate on AVX2 CPUs without VNNI), or when the model has nothing quantized to emulate."""
    hints = []
    causes = report.cause_counts
    if not report.ok and causes and max(causes, key=causes.__getitem__) == "u8s8 saturation" and report.reference == "ort":
        hints.append("  hint: the first cause is this host's onnxruntime: its uint8 x int8 products saturate to int16 (an AVX2 "
                     "CPU without VNNI; DirectML's do not). --reference ort-exact compares with exact products; "
                     "--arithmetic onnxruntime makes dml_ep saturate as this onnxruntime does")
    planner = report.dml_planner
    if planner is not None and not any(is_quantized(node) for node in planner.source.graph.node):
        hints.append("  note: the model has no quantized node, and dml_ep emulates the DML EP on quantized models; quantize it with "
                     "onnxruntime.quantization (quantize_dynamic, quantize_static or MatMulNBitsQuantizer)")
    return hints


def _causes(report: ModelReport) -> list[str]:
    """The causes counted over the nodes that differ in isolation, and the first such node."""
    lines = [f"  causes (nodes differing in isolation): {counts_text(report.cause_counts) or 'none'}"]
    if report.reference == DML_REFERENCE and "other" in report.cause_counts:
        lines.append("  other: not judged (reference is the real DML EP: no arithmetic of dml_ep's reproduces these values)")
    within = counts_text(report.within_tolerance_cause_counts)
    if within and not report.ok:
        lines.append(f"  within tolerance in isolation but not bit-exact, differences later nodes grow: {within}")
    first = report.first_divergent
    if first is not None:
        lines += _describe_divergent(first)
    return lines


def _format_shipped(report: ModelReport, shipped: list[ShippedComparison]) -> list[str]:
    """The data set's shipped outputs against both sides; they judge the candidate only where the
    reference matches them (:class:`dml_ep.reports.report.ShippedComparison`)."""
    candidate = "dml_ep" if report.candidate == "dml_ep" else f"onnxruntime {report.candidate}"
    rows = []
    for s in shipped:
        if s.faults_candidate:
            verdict = f"MISMATCH: {report.reference} matches it, {candidate} does not"
        elif s.reference.within_tolerance:
            verdict = "ok"
        else:
            verdict = f"not judged: {report.reference} differs from it"
        rows.append([s.name, _percent(s.reference), _max_diff(s.reference), _percent(s.candidate), _max_diff(s.candidate), verdict])
    header = ["output", f"{report.reference} exact %", "max diff", f"{candidate} exact %", "max diff", "verdict"]
    return ["", "  shipped outputs (output_<i>.pb), against each side:"] + _indent(table(header, rows), "    ")


def _describe_divergent(node: NodeComparison) -> list[str]:
    """The first node differing in isolation: its operator's desc (or where it runs), how its
    elements differ, and why."""
    c = node.isolated
    assert c is not None, "a node differing in isolation was compared in isolation"
    histogram = "  ".join(f"{k}: {v}" for k, v in (c.histogram or {}).items())
    if node.desc:
        what = f"    {node.desc['Type']}: " + ", ".join(f"{k} {v}" for k, v in node.desc.items() if k != "Type")
    else:
        what = f"    {node.runs_on}"
    out = node.causes_out_of_tolerance
    beyond = f"; out of tolerance: {counts_text(out)}" if out and out != node.causes else ""
    return [
        printable(f"  first node differing in isolation: {node.node} ({node.op_type})"),
        what,
        f"    exact {_percent(c)}, {c.differing} of {c.elements} elements differ, "
        f"max {c.max_diff:g} {c.unit}, mean {c.mean_diff:.2f} {c.unit}",
        f"    histogram: {histogram}" if histogram else "    histogram: -",
        f"    cause: {node.cause_text} ({counts_text(node.causes)} element(s){beyond})",
    ]


def counts_text(causes: dict[str, int]) -> str:
    """Counts by cause on one line: ``graph 2, tie rounding 1``."""
    return ", ".join(f"{k} {v}" for k, v in causes.items())


def format_summary(reports: list[ModelReport], errors: list[dict]) -> str:
    """A batch's summary: a row per comparison, those that could not run with their error."""
    rows = []
    for r in reports:
        elements = sum(o.elements for o in r.outputs)
        equal = sum(o.equal for o in r.outputs)
        worst = max(r.outputs, key=lambda o: o.max_diff)
        causes = counts_text(r.cause_counts)
        result = ("ok" if r.on_dml else "ok, nothing on DirectML") if r.ok else "MISMATCH" + (f" ({causes})" if causes else "")
        on_dml = f"{r.plan['dml']['macs_percent']:.1f}%" if r.candidate == "dml_ep" else "-"
        rows.append([r.model, len(r.outputs), elements, _percent_of(equal, elements), _max_diff(worst), on_dml, result])
    rows += [[e["model"], "-", "-", "-", "-", "-", f"error: {e['error']}"] for e in errors]
    header = ["model", "outputs", "elements", "exact %", "max diff", "MACs on DML", "result"]
    return "\nsummary:\n" + "\n".join(_indent(table(header, rows)))


def rules_text(release: str | None) -> str:
    """Which of onnxruntime's rewrites a plan had: the release's, or none of the QDQ ones."""
    return f"onnxruntime {release} rewrites" if release else "QDQ rules off"


# --- formatting helpers --------------------------------------------------------------------


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\x1b``): a model's names reach the terminal,
    where an escape sequence, a carriage return or a newline would rewrite what it shows."""
    return CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", text)


def table(header: list[str], rows: list[list], right: Collection[int] = (), width: int | None = None,
          shrink: Sequence[int] = ()) -> str:
    """``rows`` under ``header``, columns two spaces apart (the ``right`` ones right-aligned), no
    trailing spaces, control characters escaped (:func:`printable`), widths in terminal cells (rich's).
    With ``width``, the ``shrink`` columns, in that order, are cut with an ellipsis as far as it takes
    for no line to pass it (none below its header or 16 characters), the others kept whole."""
    cells = [[printable(str(c)) for c in row] for row in rows]
    lengths = [[rich.cells.cell_len(c) for c in row] for row in [header, *cells]]
    widths = [max(row[i] for row in lengths) for i in range(len(header))]
    over = sum(widths) + 2 * (len(widths) - 1) - (width or sum(widths))
    for column in shrink:
        cut = max(0, min(over, widths[column] - max(len(header[column]), 16)))
        widths[column] -= cut
        over -= cut
    return "\n".join(_line(row, length, widths, right) for row, length in zip([header, *cells], lengths))


def _line(cells: list[str], lengths: list[int], widths: list[int], right: Collection[int]) -> str:
    """One row of :func:`table`, each cell cut to its column with an ellipsis and aligned as rich's
    table does (``Lines.justify``). Laid out here, not by rich's table, which took 4.6 s for 10,000 rows."""
    laid = []
    for index, (cell, length, width) in enumerate(zip(cells, lengths, widths)):
        if index in right and cell != cell.rstrip():  # rich right-aligns a cell without its trailing spaces
            cell = cell.rstrip()
            length = rich.cells.cell_len(cell)
        if length > width:
            cell = rich.cells.set_cell_size(cell, width - 1) + "…"
            length = width
        laid.append(" " * (width - length) + cell if index in right else cell + " " * (width - length))
    return "  ".join(laid).rstrip()


def _indent(text: str, prefix: str = "  ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


def _percent(c: TensorComparison) -> str:
    return _percent_of(c.equal, c.elements)


def _percent_of(equal: int, elements: int) -> str:
    """100% only when every element is equal: a near miss never rounds up to it."""
    if equal == elements:
        return "100%"
    return f"{min(100.0 * equal / elements, 99.999):.3f}%"


def _shape(c: TensorComparison) -> str:
    """The shape, or dml_ep's and the reference's side by side where they differ."""
    return f"{c.candidate_shape} vs {c.shape}" if c.candidate_shape is not None else str(c.shape)


def _max_diff(c: TensorComparison) -> str:
    if c.problem:
        return "-"
    if c.unit == "LSB":
        return f"{c.max_diff:g} {c.unit}"
    return f"{c.max_diff:.3g}" + (f" ({c.max_ulps:.3g} ulp)" if c.max_ulps else "")


class Progress:
    """Where a long comparison is, on stderr. On a terminal, rich's progress bar (stage, count,
    time left), erased once done; elsewhere (a log), a line every few seconds with the count and
    the time left, so that a short run (or its one-line error) stays quiet."""

    INTERVAL = 5.0

    def __init__(self, prefix: str, enabled: bool = True):
        import rich.console

        self.prefix = prefix
        self.enabled = enabled
        self.console = rich.console.Console(stderr=True)
        self.bar: rich.progress.Progress | None = None  # on a terminal, once a stage is heard
        self.task: rich.progress.TaskID | None = None
        self.stage = ""
        self.stage_started = self.last = time.monotonic()  # of the stage; of the start, then of the last line written

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if stage != self.stage:
            self.stage, self.stage_started = stage, now
            if self.bar is not None and self.task is not None:
                self.bar.remove_task(self.task)
                self.task = None
        if self.console.is_terminal:
            self._draw(done, total)
        elif now - self.last >= self.INTERVAL:
            left = f", about {(now - self.stage_started) * (total - done) / done:.0f} s left" if total and done else ""
            self.console.file.write(f"{self.prefix}: {stage}" + (f" {done}/{total}" if total else "") + f"{left}...\n")
            self.console.file.flush()
            self.last = now

    def _draw(self, done: int, total: int) -> None:
        import rich.progress

        if self.bar is None:
            self.bar = rich.progress.Progress(
                rich.progress.TextColumn("{task.description}"), rich.progress.BarColumn(), rich.progress.MofNCompleteColumn(),
                rich.progress.TimeRemainingColumn(), console=self.console, transient=True)
            self.bar.start()
        if self.task is None:
            self.task = self.bar.add_task(f"{self.prefix}: {self.stage}", total=total or None)
        self.bar.update(self.task, completed=done, total=total or None)

    def clear(self) -> None:
        """Erase the terminal's progress bar before the report or an error takes its place."""
        if self.bar is not None:
            self.bar.stop()
            self.bar, self.task, self.stage = None, None, ""
