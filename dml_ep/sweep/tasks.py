"""A sweep's tasks: one ``compare`` (or, with ``plan_only``, one ``inspect``) of one model under one
set of settings, made by :func:`sweep_tasks` as the cross product of models, arithmetics,
onnxruntime releases and feature levels, and run anywhere by :func:`run_task`.

A task is plain data, so that Dask sends it to a worker on another machine; the models it names
must be readable there (a shared path). Its :attr:`SweepTask.key` names it by the model and every
setting that can change the report, so that a sweep resumed on the same database knows what is
done. :func:`run_task` never raises for a model: a model that cannot be compared gives a failed
row with the reason, as a worker that dies or a task past its timeout do (:mod:`dml_ep.sweep.run`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import socket
import time

from ..conformance.cases import Compared, case_feeds, compare_case, compare_json, comparison_cases, expand_models
from ..core import files
from ..core.enums import DML_FEATURE_LEVEL
from ..core.errors import DmlEpError
from ..core.graph import graph_inputs, load_model, one_line
from ..passes import DEFAULT_RELEASE
from ..planning.importer import DEFAULT_FEATURE_LEVEL
from ..planning.planner import Planner
from ..reports import html as html_report
from ..reports.inspect import inspect_json
from ..reports.meta import report_meta, versions
from ..reports.node_table import plan_rows
from ..reports.report import Tolerance
from ..runtime.inputs import input_shapes, naming_random_inputs, parse_val_range

STATUSES = ("ok", "mismatch", "planned", "failed")  # compare within tolerance, out of it; inspect done; no report


@dataclasses.dataclass(frozen=True)
class SweepTask:
    """One model under one set of settings. The fields after ``model`` are compare's options of
    the same names; ``html`` (where to write the task's own page) and ``engine`` (which never
    changes a result) are not part of :attr:`key`."""

    model: str  # an absolute path: a file, or a directory laid out as the ONNX model zoo
    arithmetic: str = "directml"
    ort_release: str | None = DEFAULT_RELEASE  # None: no QDQ rewrites (--no-qdq-fusion)
    feature_level: str = DEFAULT_FEATURE_LEVEL.label
    plan_only: bool = False  # inspect's plan, not a comparison
    reference: str = "ort"
    u8s8_saturation: bool | None = None
    seed: int = 0
    steps: int = 0
    atol: tuple[tuple[str, float], ...] = ()
    rtol: tuple[tuple[str, float], ...] = ()
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # applied to the models that have the input
    val_ranges: tuple[str, ...] = ()  # --val-range texts, likewise
    per_node: bool = False
    html: str | None = dataclasses.field(default=None, compare=False)
    engine: str | None = dataclasses.field(default=None, compare=False)

    def settings(self) -> dict:
        """The settings that make the report, as JSON values (the model apart)."""
        fields = dataclasses.asdict(self)
        for name in ("model", "html", "engine"):
            del fields[name]
        return json.loads(json.dumps(fields))

    @property
    def key(self) -> str:
        """The task's name in a sweep's database: a hash of its model and settings."""
        text = json.dumps({"model": self.model, **self.settings()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def sweep_tasks(models: list[str], arithmetics=("directml",), ort_releases=(DEFAULT_RELEASE,),
                feature_levels=(DEFAULT_FEATURE_LEVEL.label,), html_dir: str | None = None, **options) -> list[SweepTask]:
    """The cross product of ``models`` (files, directories, globs, as compare takes them) and the
    settings, model by model (a feature level in any spelling ``DML_FEATURE_LEVEL.parse`` takes, keyed
    by its label); ``options`` are :class:`SweepTask`'s other fields. With ``html_dir``,
    each task writes its own HTML page there (compare's ``--html``, node by node; inspect's)."""
    if options.get("plan_only"):
        arithmetics = arithmetics[:1]  # a plan does not depend on the arithmetic
    tasks = []
    for path in expand_models(list(models)):
        for arithmetic in arithmetics:
            for release in ort_releases:
                for level in feature_levels:
                    task = SweepTask(os.path.abspath(path), arithmetic, release, DML_FEATURE_LEVEL.parse(level).label, **options)
                    if html_dir:
                        task = dataclasses.replace(task, html=os.path.join(os.path.abspath(html_dir), f"{task.key}.html"))
                    tasks.append(task)
    return list({task.key: task for task in tasks}.values())  # a model given twice is one task


def run_task(task: SweepTask) -> dict:
    """Run ``task`` here: its row for the database (:func:`result_row`), failed with the reason when
    the model could not be compared or planned, or dml_ep failed on it."""
    started = time.time()
    try:
        report, html = (_plan if task.plan_only else _compare)(task)
        reason = _first_error(report)
    except DmlEpError as exc:
        report, html, reason = None, None, one_line(exc)
    except Exception as exc:  # noqa: BLE001  an internal error is a failed task, not a dead sweep
        report, html, reason = None, None, f"internal error: {type(exc).__name__}: {one_line(exc)}"
    return result_row(task, report, reason, started, time.time(), html)


def _compare(task: SweepTask) -> tuple[dict, str | None]:
    """``compare``'s JSON report of the task's model (one comparison per data set of a model zoo
    directory), and its HTML page where asked for (of a model compared once)."""
    args = _arguments(task)
    cases = comparison_cases(args)
    options = dict(reference=task.reference, tolerance=Tolerance(task.steps, dict(task.atol), dict(task.rtol)),
                   per_node=task.per_node or bool(task.html), feature_level=task.feature_level, arithmetic=task.arithmetic,
                   u8s8_saturation=task.u8s8_saturation, qdq_rules=task.ort_release, engine=task.engine)
    done, errors = [], []
    for case in cases:
        try:
            model = load_model(case.model)
            names = _input_names(model)
            args.shape = _inputs_of(names, task.shapes)
            args.val_range = [text for text in task.val_ranges if parse_val_range(text)[0] in (None, *names)]
            feeds, sources = case_feeds(case, model, args)
            with naming_random_inputs(sources):
                report = compare_case(case, model, feeds, options, lambda *_: None)
        except DmlEpError as exc:
            errors.append({"model": case.name, "error": one_line(exc)})
            continue
        done.append(Compared(report, feeds, sources))
    html = None
    if task.html and len(done) == 1 and not errors:
        files.write_files({task.html: files.text_writer(html_report.compare_report(done[0].report))})
        html = task.html
    return compare_json(task.seed, done, errors), html


def _plan(task: SweepTask) -> tuple[dict, str | None]:
    """``inspect --json``'s report of the task's model, and its HTML page where asked for."""
    model = load_model(task.model)
    shapes = _inputs_of(_input_names(model), task.shapes)
    input_shapes(model, shapes)  # checks them
    plan = Planner(model, task.feature_level, qdq_rules=task.ort_release).plan_for_shapes(shapes)
    if task.html:
        files.write_files({task.html: files.text_writer(html_report.plan_report(plan, task.model))})
    return inspect_json(task.model, shapes, plan, plan_rows(plan)), task.html


def _arguments(task: SweepTask) -> argparse.Namespace:
    """compare's arguments for :func:`dml_ep.conformance.cases.comparison_cases` and :func:`dml_ep.conformance.cases.case_feeds`."""
    return argparse.Namespace(models=[task.model], seed=task.seed, iterations=1, input=[], input_dir=None, shape=[],
                              val_range=[], load_inputs=None, load_outputs=None, save_inputs=None, save_outputs=None,
                              save_rewritten=None, model_explorer=None)


def _input_names(model) -> list[str]:
    return [value.name for value in graph_inputs(model.graph)]


def _inputs_of(names: list[str], shapes) -> dict[str, tuple[int, ...]]:
    """The ``--shape`` sizes of the inputs ``names`` (a model's): a sweep's models need not share names."""
    return {name: tuple(shape) for name, shape in shapes if name in names}


def _first_error(report: dict) -> str | None:
    errors = report.get("errors") or []
    return errors[0]["error"] if errors else None


def result_row(task: SweepTask, report: dict | None, reason: str | None, started: float, finished: float,
               html: str | None = None) -> dict:
    """A task's row: its settings, status (:data:`STATUSES`), the summary the sweep's page sorts by
    (exact-match %, largest difference, causes, MACs on DirectML), times, where it ran, versions, and
    the whole report. ``reason`` fails it (a model that could not be compared, a timeout, a
    worker that died), even with a report of the comparisons that did run."""
    row = {"key": task.key, "model": task.model, "mode": "plan" if task.plan_only else "compare",
           "arithmetic": task.arithmetic, "ort_release": task.ort_release or "none", "feature_level": task.feature_level,
           "settings": task.settings(), "status": "failed", "reason": reason, "exact_percent": None, "max_diff": None,
           "max_diff_unit": None, "causes": {}, "dml_macs_percent": None, "dml_nodes": None, "model_nodes": None,
           "started": started, "finished": finished, "seconds": finished - started, "host": socket.gethostname(),
           "pid": os.getpid(), "versions": {**versions(), "platform": platform.platform()}, "html": html,
           "report": report if report is not None else report_meta("compare", seed=task.seed, ok=False, models=[],
                                                                      errors=[{"model": task.model, "error": reason}])}
    if report is None:
        return row
    row.update(_plan_columns(report))
    if task.plan_only:
        row["status"] = "failed" if reason else "planned"
        return row
    row.update(_comparison_columns(report))
    if not reason:
        row["status"] = "ok" if report["ok"] else "mismatch"
    return row


def _plan_columns(report: dict) -> dict:
    """The plan's columns of a row, MACs and nodes on DirectML, from inspect's summary or the first comparison's plan."""
    summaries = [m["plan"] for m in report.get("models", [])] or ([report["summary"]] if "summary" in report else [])
    if not summaries:
        return {}
    return dict(dml_macs_percent=summaries[0]["dml"]["macs_percent"], dml_nodes=summaries[0]["dml"]["nodes"],
                model_nodes=summaries[0]["model_nodes"])


def _comparison_columns(report: dict) -> dict:
    """The comparisons' columns of a row, over every output of every comparison: exact-match %, the
    largest difference and its unit (where there are outputs), and the count of each cause."""
    columns: dict = {}
    outputs = [o for m in report["models"] for o in m["outputs"]]
    if outputs:
        elements = sum(o["elements"] for o in outputs)
        worst = max(outputs, key=lambda o: o["max_diff"])
        columns.update(exact_percent=100.0 * sum(o["equal"] for o in outputs) / elements if elements else 100.0,
                       max_diff=worst["max_diff"], max_diff_unit=worst["unit"])
    causes: dict[str, int] = {}
    for m in report["models"]:
        for cause, count in m["cause_counts"].items():
            causes[cause] = causes.get(cause, 0) + count
    columns["causes"] = causes
    return columns


def failed_row(task: SweepTask, reason: str, started: float | None = None) -> dict:
    """The row of a task that gave no result of its own: a worker that died running it, a timeout."""
    now = time.time()
    row = result_row(task, None, reason, now if started is None else started, now)
    row.update(host=None, pid=None)
    return row
