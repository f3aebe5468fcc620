"""The ``dml-ep`` command: ``inspect`` a model's plan, ``run`` it, ``compare`` it with onnxruntime,
``export`` it as a DxDispatch model to run on real DirectML, ``sweep`` many models and settings on
a Dask cluster and ``report`` a sweep's database.

Exit status (``arguments.EXIT_STATUS``): 0 on success, 1 when ``compare`` (or ``run --load-outputs``) finds an output out of tolerance,
2 on a usage or input error (one line on stderr, ``dml-ep: error: ...``; for ``compare``, when any
model could not be compared), 3 on an internal error, so that a crash never reads as a conformance
verdict, 130 on Ctrl-C and 143 on SIGTERM (nothing partial left behind). ``--debug`` shows the traceback too.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import traceback
from typing import TYPE_CHECKING

from ..core import files
from ..core.choices import DML_REFERENCE
from ..core.errors import DmlEpError
from ..core.sigterm import Terminated, sigterm_raises
from . import arguments
from .arguments import U8S8_SATURATION

if TYPE_CHECKING:
    from ..reports.report import Tolerance

# Each command imports what it needs in its handler (and helpers): --help, --version and usage errors import none of
# numpy, onnx and onnxruntime, and no command imports another's reports, sweeps, Model Explorer or DxDispatch.


def build_parser() -> argparse.ArgumentParser:
    """dml-ep's parser (:mod:`dml_ep.cli.arguments`), each command bound to its handler."""
    return arguments.build_parser({"inspect": cmd_inspect, "run": cmd_run, "compare": cmd_compare, "export": cmd_export,
                                   "sweep": cmd_sweep, "report": cmd_report})


def main(argv=None) -> int:
    args = arguments.parse(build_parser(), argv)
    try:
        with sigterm_raises():
            if args.command != "report":
                _import_runtime()
            return args.handler(args)
    except (KeyboardInterrupt, Terminated) as stop:
        _traceback(args)
        print(f"dml-ep: {'interrupted' if isinstance(stop, KeyboardInterrupt) else 'terminated'}", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else 143
    except BrokenPipeError:  # the reader went away (``| head``): not an error, and nothing more to print
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (DmlEpError, OSError) as exc:
        from ..core.graph import one_line

        _traceback(args)
        print(f"dml-ep: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        from ..core.graph import one_line

        _traceback(args)
        hint = "" if args.debug else " (--debug shows the traceback)"
        print(f"dml-ep: error: internal error: {type(exc).__name__}: {one_line(exc)}{hint}", file=sys.stderr)
        return 3


def _import_runtime() -> None:
    """onnxruntime, which every command but ``report`` runs, imported first: one that is installed
    but does not import (a broken or mismatched build) is the installation's error, said in one line
    with exit 2, not an internal error of dml_ep's halfway through a command."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise DmlEpError(f"onnxruntime is installed but does not import ({exc}): reinstall dml_ep[cpu] "
                         "(onnxruntime) or dml_ep[directml] (onnxruntime-directml)") from None


def _traceback(args) -> None:
    """With ``--debug``, the traceback, before the one-line error: the exit status stays the one it
    would be (a Python exception's 1 would read as a mismatch)."""
    if args.debug:
        traceback.print_exc()


# --- inspect -------------------------------------------------------------------------------


def cmd_inspect(args) -> int:
    """A summary of the plan (:mod:`dml_ep.reports.inspect`); with ``--nodes``, every plan entry and
    the nodes onnxruntime's rewrites made; with ``--descs``, each DirectML operator's desc; then
    the files asked for: JSON, HTML, the rewritten model, Model Explorer's node data."""
    from ..reports import model_explorer
    from ..reports.inspect import ascii_if_needed, by_op_type, by_reason, by_reason_class, descs_text, inspect_json, inspect_summary, nodes_text
    from ..reports.node_table import plan_rows
    from ..reports.rewritten_model import rewritten_writer
    from ..reports.text import Progress
    from ..runtime.inspection import inspect_plan

    _check_outputs(args)
    _check_model_explorer(args)
    out = _text_output(args)
    shapes = dict(args.shape)
    model, planner, plan = inspect_plan(args.model, shapes, args.feature_level, args.qdq_rules, Progress(args.model, enabled=not args.quiet),
                                        args.seed, args.input, args.input_dir, args.val_range)
    rows = plan_rows(plan)
    summary = inspect_summary(plan, rows, plan.summary(), by_op_type(rows), by_reason(plan), by_reason_class(rows))
    print(ascii_if_needed("\n".join(summary), out), file=out)
    if args.nodes:
        print(nodes_text(plan, rows), file=out)
    descs = descs_text(plan, rows) if args.descs else None
    if descs:
        print(descs, file=out)
    writers, said = {}, ""
    if args.json:
        writers[args.json] = files.json_writer(inspect_json(args.model, shapes, plan, rows))
    if args.html:
        from ..reports import html as html_report

        writers[args.html] = files.text_writer(html_report.plan_report(plan, args.model))
    if args.save_rewritten:
        writers[args.save_rewritten], said = rewritten_writer(args.save_rewritten, planner, plan)
    files.write_files(writers)
    if said:
        print(said, file=out)
    if args.model_explorer:
        print(model_explorer.write_with_command(args.model_explorer, args.model, model, plan), file=out)
    return 0


def _check_model_explorer(args) -> None:
    """Before any work: Model Explorer's packages are there, and ``--model-explorer DIR`` is new or empty."""
    from ..reports import model_explorer

    if args.model_explorer:
        model_explorer.require()
        files.check_new_directory(args.model_explorer, "--model-explorer")


# --- run -----------------------------------------------------------------------------------


def cmd_run(args) -> int:
    """Run with dml_ep, once per feed dict of ``--load-inputs`` (:mod:`dml_ep.conformance.runs`);
    outputs and files are written only once every run has succeeded, all or none. With
    ``--load-outputs``, each run's outputs are checked against the saved ones (exit status 1 when
    one is out of tolerance)."""
    from ..conformance.runs import check_runs, npy_writers, outputs_table, polygraphy_files, run_each, run_feeds, saved_runs
    from ..core.graph import load_model

    if args.output_dir:
        files.check_writable(args.output_dir, directory=True)
    _check_outputs(args)
    model = load_model(args.model)
    paths = _output_dir_files(args, [o.name for o in model.graph.output]) if args.output_dir else None
    iterations = run_feeds(model, args)
    if args.output_dir and len(iterations) != 1:
        raise DmlEpError(f"--output-dir holds one run's outputs; {args.load_inputs} holds {len(iterations)} feed dicts")
    saved = saved_runs(args.load_outputs, len(iterations)) if args.load_outputs else None
    runs = run_each(model, iterations, _arithmetic(args))
    ok = check_runs(runs, *saved, _tolerance(args), sys.stdout) if saved else True
    writers = polygraphy_files(runs, iterations, args.save_outputs, args.save_inputs)
    if paths is not None or saved is None:
        print(outputs_table(runs[-1], paths))
    if paths is not None:
        os.makedirs(args.output_dir, exist_ok=True)
        writers.update(npy_writers(runs[-1], paths))
    files.write_files(writers)
    return 0 if ok else 1


def _output_dir_files(args, names: list[str]) -> dict[str, str]:
    """``--output-dir``'s file of each output, checked as the command's other outputs are
    (:func:`_check_outputs`), before any work."""
    from ..runtime.inputs import output_files

    paths = output_files(args.output_dir, names)
    inputs = _inputs_read(args)
    for path in paths.values():
        files.check_not_input(path, inputs)
    files.check_distinct([*_outputs(args), *((f"--output-dir's {os.path.basename(path)}", path) for path in paths.values())])
    return paths


def _tolerance(args) -> Tolerance:
    """``--steps``, ``--atol`` and ``--rtol`` (run, compare)."""
    from ..reports.report import Tolerance

    return Tolerance(args.steps, dict(args.atol), dict(args.rtol))


def _arithmetic(args) -> dict:
    """How dml_ep plans and computes (run, export, compare): the keyword arguments of its session."""
    return dict(feature_level=args.feature_level, arithmetic=args.arithmetic, u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation],
                qdq_rules=args.qdq_rules, engine=args.engine)


# --- export --------------------------------------------------------------------------------


def cmd_export(args) -> int:
    """Write the DxDispatch model, then say what it holds and how to run it. Its folder is checked
    first, as the writer will check it: a run is not wasted on a folder that cannot be written."""
    from ..core.graph import Loaded, load_model
    from ..interop import dxdispatch
    from ..runtime.inputs import make_feeds, naming_random_inputs

    _check_outputs(args)
    files.check_new_directory(args.dxdispatch, "export")
    model = load_model(args.model)
    feeds, sources = make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)
    with naming_random_inputs(sources):
        made = dxdispatch.export(Loaded(model), args.dxdispatch, feeds, source=args.model, **_arithmetic(args))
    operators = sum(len(sequence) for sequence in made.sequences)
    print(f"wrote {args.dxdispatch}: {operators} DirectML operator(s) in {len(made.sequences)} dispatch sequence(s), "
          f"{len(made.model['resources'])} resources ({len(made.captured)} captured from the CPU fallback), "
          f"{len(made.outputs)} output(s) written by DxDispatch, expected values in expected/")
    print(f"run on DirectML: cd {args.dxdispatch} && {dxdispatch.COMMAND_LINE}   (README.txt says how to diff)")
    return 0


# --- compare -------------------------------------------------------------------------------


def cmd_compare(args) -> int:
    """Compare each model (each data set, each Polygraphy iteration: :func:`dml_ep.conformance.cases.compare_cases`),
    printing each report as it comes; with several, one that fails is reported and the others
    still run. Then the files asked for, and a status: 2 if any failed, 1 if any mismatched."""
    from ..conformance.cases import compare_cases, write_comparison

    _check_compare(args)
    out = _text_output(args)
    options = dict(reference=args.reference, candidate=args.candidate, tolerance=_tolerance(args),
                   per_node=_per_node(args) or bool(args.html) or bool(args.model_explorer), **_arithmetic(args))
    batch = compare_cases(args, options, out)
    write_comparison(args, batch, out)
    if batch.errors:
        return 2
    return 0 if all(r.ok for r in batch.reports) else 1


def _per_node(args) -> bool:
    """``--per-node``, or Polygraphy's ``--onnx-outputs mark all``."""
    return args.per_node or bool(args.onnx_outputs)


def _check_compare(args) -> None:
    """Before any work: the files to write can be, the options go together, the real DML EP is there
    when it is the reference (once, not once per model)."""
    from ..ort.reference import require_dml

    if args.onnx_outputs and args.onnx_outputs != ["mark", "all"]:
        raise DmlEpError(f"--onnx-outputs {' '.join(args.onnx_outputs)}: dml_ep takes only 'mark all' (every intermediate value, as --per-node)")
    if args.only_differing and not _per_node(args):
        raise DmlEpError("--only-differing selects the rows of --per-node's table: give --per-node too")
    _check_outputs(args)
    if args.model_explorer and args.candidate != "dml_ep":
        raise DmlEpError(f"--model-explorer shows dml_ep's plan and differences: drop --candidate {args.candidate}")
    _check_model_explorer(args)
    if args.reference == DML_REFERENCE:
        require_dml()


# --- sweep, report --------------------------------------------------------------------------


def cmd_sweep(args) -> int:
    """Run the sweep (:func:`dml_ep.sweep.run.sweep`), then list its rows, write the summary page
    asked for, and a status: 2 if a task failed, else 1 if one is out of tolerance."""
    from ..sweep.db import SweepDatabase, database_path
    from ..sweep.page import write_summary_page
    from ..sweep.run import rows_text, sweep

    db = database_path(args.db, args.report)
    outputs = [("--db" if args.db else "the database (--db's default)", db), ("--report", args.report), ("--html-dir", args.html_dir)]
    files.check_distinct([(what, path) for what, path in outputs if path])  # the page written over the database, ...
    _check_writable(args, db, args.report)  # and distinct, as checked above with --html-dir
    if args.html_dir:
        files.check_writable(args.html_dir, directory=True)
        files.check_not_input(args.html_dir, _inputs_read(args))
    releases = [None if release == "none" else release for release in args.ort_releases]
    rows = sweep(args.models, args.arithmetics, releases, args.feature_levels, db=db, scheduler=args.scheduler, workers=args.workers,
                 sequential=args.sequential, timeout=args.timeout, rerun_failed=args.rerun_failed, html_dir=args.html_dir,
                 progress=not args.quiet, plan_only=args.plan_only, reference=args.reference,
                 u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation], seed=args.seed, steps=args.steps,
                 atol=tuple(args.atol), rtol=tuple(args.rtol), shapes=tuple(args.shape), val_ranges=tuple(args.val_range),
                 per_node=args.per_node, engine=args.engine)
    print(rows_text(rows))
    print(f"database: {db}")
    if args.report:  # of every row of the database, not only this sweep's
        with SweepDatabase(db) as database:
            print(write_summary_page(database.rows(), db, args.report))
    statuses = {row["status"] for row in rows}
    return 2 if "failed" in statuses else 1 if "mismatch" in statuses else 0


def cmd_report(args) -> int:
    """Every row of a sweep's database as a table; with ``--html``, the summary page."""
    from ..sweep.db import SweepDatabase
    from ..sweep.page import write_summary_page
    from ..sweep.run import rows_text

    with SweepDatabase(args.db, readonly=True) as database:  # checked before anything is read, read with limits
        if args.html:
            files.check_writable(args.html, inputs=[args.db])
        rows = database.rows()
    print(rows_text(rows))
    if args.html:
        print(write_summary_page(rows, args.db, args.html))
    return 0


# --- arguments -----------------------------------------------------------------------------


def _inputs_read(args) -> list[str]:
    """The paths a command reads (models, zoo directories, --input files, --input-dir, Polygraphy
    files), which nothing it writes may replace."""
    from ..conformance.cases import split_runner

    models = [found for pattern in getattr(args, "models", None) or [args.model] for found in glob.glob(pattern) or [pattern]]
    given = [text.partition("=")[2] for text in getattr(args, "input", [])]
    polygraphy = [getattr(args, "load_inputs", None), split_runner(args.load_outputs)[0] if getattr(args, "load_outputs", None) else None]
    return [path for path in (*models, *given, getattr(args, "input_dir", None), *polygraphy) if path]


def _written(args) -> list[str]:
    """The files a command writes besides its outputs: its JSON report, its rewritten model, its
    HTML page. One of them at most on stdout."""
    paths = [path for path in (getattr(args, "json", None), getattr(args, "save_rewritten", None), getattr(args, "html", None)) if path]
    if paths.count("-") > 1:
        raise DmlEpError("only one of --json, --save-rewritten and --html can be - (stdout): give the others a file")
    return paths


# The options naming what a command writes, and those of them written whole, new or empty.
OUTPUT_OPTIONS = ("json", "html", "save_rewritten", "save_outputs", "save_inputs", "model_explorer", "dxdispatch", "report", "db")
WHOLE_FOLDERS = ("--model-explorer", "--dxdispatch")


def _outputs(args, *more: str | None) -> list[tuple[str, str]]:
    """Each path the command writes and its option; ``more``, paths given by no option (a default), by themselves."""
    named = [(f"--{dest.replace('_', '-')}", getattr(args, dest)) for dest in OUTPUT_OPTIONS if getattr(args, dest, None)]
    given = {path for _, path in named}
    return [*named, *((path, path) for path in more if path and path not in given)]


def _check_outputs(args) -> None:
    """Before any work: :func:`_check_writable`, and no two of the command's outputs are one file,
    and none is in a folder it writes whole (:func:`dml_ep.core.files.check_distinct`)."""
    files.check_distinct(_check_writable(args), WHOLE_FOLDERS)


def _check_writable(args, *more: str | None) -> list[tuple[str, str]]:
    """Before any work: each file the command writes (its options', and ``more``) can be written and
    replaces none that it reads; the outputs, each with its option (:func:`_outputs`)."""
    _written(args)  # one on stdout at most
    inputs = _inputs_read(args)
    outputs = _outputs(args, *more)
    for what, path in outputs:
        if what not in WHOLE_FOLDERS:
            files.check_writable(path, inputs=inputs)
    return outputs


def _text_output(args):
    """Where the report's text goes: stderr when its JSON or model takes stdout (``-``)."""
    return sys.stderr if "-" in _written(args) else sys.stdout


if __name__ == "__main__":
    sys.exit(main())
