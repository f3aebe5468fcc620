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
import contextlib
import functools
import glob
import os
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING

from . import arguments
from ..core import files
from .arguments import U8S8_SATURATION
from ..core.choices import DEFAULT_DB, DML_REFERENCE
from ..core.errors import DmlEpError

if TYPE_CHECKING:
    import numpy as np

    from ..conformance.cases import Case, Compared
    from ..planning.plan import Plan
    from ..planning.planner import Planner
    from ..reports.report import ModelReport, Tolerance
    from ..reports.text import Progress

# Each command imports what it needs in its handler (and helpers): --help, --version and usage errors import none of
# numpy, onnx and onnxruntime, and no command imports another's reports, sweeps, Model Explorer or DxDispatch.


def build_parser() -> argparse.ArgumentParser:
    """dml-ep's parser (:mod:`dml_ep.cli.arguments`), each command bound to its handler."""
    return arguments.build_parser({"inspect": cmd_inspect, "run": cmd_run, "compare": cmd_compare, "export": cmd_export,
                                   "sweep": cmd_sweep, "report": cmd_report})


def main(argv=None) -> int:
    args = arguments.parse(build_parser(), argv)
    try:
        with _sigterm_raises():
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


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that what it was writing is cleaned up as on Ctrl-C."""


@contextlib.contextmanager
def _sigterm_raises():
    """While a command runs in the main thread, SIGTERM raises :class:`Terminated` (by default it
    would end the process at once, leaving a partial file or staging folder behind)."""
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    def terminate(signum, frame):
        raise Terminated
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- inspect -------------------------------------------------------------------------------


def cmd_inspect(args) -> int:
    """A summary of the plan (:mod:`dml_ep.reports.inspect`); with ``--nodes``, every plan entry and
    the nodes onnxruntime's rewrites made; with ``--descs``, each DirectML operator's desc; then
    the files asked for: JSON, HTML, the rewritten model, Model Explorer's node data."""
    from ..core.graph import load_model
    from ..runtime.inputs import input_shapes
    from ..reports.inspect import ascii_if_needed, by_op_type, by_reason, by_reason_class, descs_text, inspect_json, inspect_summary, nodes_text
    from ..reports.node_table import plan_rows
    from ..reports.text import Progress

    _check_writable(args)
    _check_model_explorer(args)
    out = _text_output(args)
    progress = Progress(args.model, enabled=not args.quiet)
    progress("loading")
    model = load_model(args.model)
    shapes = dict(args.shape)
    input_shapes(model, shapes)  # checks them
    try:
        planner, plan = _planned(model, shapes, args, progress)
    finally:
        progress.clear()
    rows = plan_rows(plan)
    summary = plan.summary()
    op_types, reasons, classes = by_op_type(rows), by_reason(plan), by_reason_class(rows)
    print(ascii_if_needed("\n".join(inspect_summary(plan, rows, summary, op_types, reasons, classes)), out), file=out)
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
        writers[args.save_rewritten], said = _rewritten(args.save_rewritten, planner, plan)
    files.write_files(writers)
    if said:
        print(said, file=out)
    if args.model_explorer:
        _write_model_explorer(args.model_explorer, args.model, model, plan, [], out)
    return 0


def _planned(model, shapes: dict, args, progress: Progress) -> tuple[Planner, Plan]:
    """The plan for ``shapes``; or, given ``--input`` or ``--input-dir``, from the tensors of a run
    on those inputs, which also plans the nodes whose input shapes depend on data."""
    from ..runtime.inputs import naming_random_inputs
    from ..core.graph import Loaded
    from ..runtime.inputs import make_feeds
    from ..planning.planner import Planner
    from ..runtime.session import InferenceSession

    progress("applying onnxruntime's rewrites")
    if not (args.input or args.input_dir):
        planner = Planner(model, args.feature_level, qdq_rules=args.qdq_rules)
        progress("planning")
        return planner, planner.plan_for_shapes(shapes)
    feeds, sources = make_feeds(model, args.seed, args.input, args.input_dir, shapes, args.val_range)
    session = InferenceSession(Loaded(model), feature_level=args.feature_level, qdq_rules=args.qdq_rules)
    progress("running")
    with naming_random_inputs(sources):
        session.run(None, feeds)
    return session.planner, session.plan


def _rewritten(path: str, planner, plan) -> tuple[files.Writer, str]:
    """``--save-rewritten``'s writer, and the line that says what the file holds once written."""
    from ..reports.rewritten_model import model_writer, rewritten_model

    rewritten = rewritten_model(planner, plan)
    said = (f"\n{'stdout' if path == '-' else path}: the rewritten model, {len(rewritten.graph.node)} node(s), "
            "each with where it runs in its metadata (dml_ep.*)")
    return model_writer(rewritten), said


def _check_model_explorer(args) -> None:
    """Before any work: Model Explorer's packages are there, and ``--model-explorer DIR`` is new or empty."""
    from ..reports import model_explorer

    if args.model_explorer:
        model_explorer.require()
        files.check_new_directory(args.model_explorer, "--model-explorer")


def _write_model_explorer(directory: str, model_path: str, model, plan, reports: list[ModelReport], out) -> None:
    """Write the node data, and say how to open the model with it."""
    from ..reports import model_explorer

    names = model_explorer.write(directory, model, plan, reports)
    paths = [os.path.join(directory, name) for name in names]
    print(f"\nwrote {directory}: Model Explorer node data {', '.join(names)}; open the model with it:", file=out)
    print(f"  {model_explorer.open_command(model_path, paths)}", file=out)


# --- run -----------------------------------------------------------------------------------


def cmd_run(args) -> int:
    """Run with dml_ep, once per feed dict of ``--load-inputs``; outputs and files are written only
    once every run has succeeded, all or none. With ``--load-outputs``, each run's outputs are
    checked against the saved ones (exit status 1 when one is out of tolerance)."""
    import numpy as np

    from ..runtime.inputs import naming_random_inputs
    from ..core.graph import Loaded, load_model
    from ..runtime.inputs import make_feeds
    from ..interop.polygraphy_json import inputs_json, load_inputs, run_results_json
    from ..runtime.session import InferenceSession
    from ..reports.text import table

    if args.output_dir:
        files.check_writable(args.output_dir, directory=True)
    _check_writable(args)
    model = load_model(args.model)
    paths = _output_dir_files(args, [o.name for o in model.graph.output]) if args.output_dir else {}
    if args.load_inputs:
        if args.input or args.input_dir:
            raise DmlEpError("--load-inputs gives every input: drop --input and --input-dir")
        iterations = [(feeds, dict.fromkeys(feeds, args.load_inputs)) for feeds in load_inputs(args.load_inputs)]
    else:
        iterations = [make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)]
    if args.output_dir and len(iterations) != 1:
        raise DmlEpError(f"--output-dir holds one run's outputs; {args.load_inputs} holds {len(iterations)} feed dicts")
    saved = _saved_for_run(args, len(iterations))
    session = InferenceSession(Loaded(model), **_arithmetic(args))
    names = [o.name for o in session.get_outputs()]
    runs = []
    for feeds, sources in iterations:
        with naming_random_inputs(sources):
            runs.append(dict(zip(names, session.run(None, feeds))))
    ok = True
    if saved is not None:
        runner, expected = saved
        ok = _check_runs(runs, expected, runner, _tolerance(args))
    writers = {}
    if args.save_outputs:
        writers[args.save_outputs] = files.text_writer(run_results_json({"dml_ep": runs}))
    if args.save_inputs:
        writers[args.save_inputs] = files.text_writer(inputs_json([feeds for feeds, _ in iterations]))
    results = runs[-1]
    if not args.output_dir:
        if saved is None:
            print(table(["output", "shape", "dtype"], [[n, list(r.shape), r.dtype] for n, r in results.items()]))
        files.write_files(writers)
        return 0 if ok else 1
    arrays = {name: _savable(array) for name, array in results.items()}
    print(table(["output", "shape", "dtype", "file"], [[n, list(r.shape), r.dtype if arrays[n].dtype == r.dtype else f"{r.dtype} (saved as {arrays[n].dtype})",
                                                        os.path.basename(paths[n])] for n, r in results.items()]))
    os.makedirs(args.output_dir, exist_ok=True)
    writers.update({paths[name]: functools.partial(np.save, arr=array) for name, array in arrays.items()})
    files.write_files(writers)
    return 0 if ok else 1


def _output_dir_files(args, names: list[str]) -> dict[str, str]:
    """``--output-dir``'s file of each output, checked as the command's other outputs are
    (:func:`_check_writable`), before any work."""
    from ..runtime.inputs import npy_file_names

    paths = {name: os.path.join(args.output_dir, file) for name, file in npy_file_names(names).items()}
    inputs = _inputs_read(args)
    for path in paths.values():
        files.check_not_input(path, inputs)
    files.check_distinct([*_outputs(args), *((f"--output-dir's {os.path.basename(path)}", path) for path in paths.values())])
    return paths


def _saved_for_run(args, count: int) -> tuple[str, list[dict]] | None:
    """``run --load-outputs``' runner and its iterations, one per run."""
    from ..conformance.cases import split_runner
    from ..interop.polygraphy_json import load_run_results, pick_runner

    if not args.load_outputs:
        return None
    file, wanted = split_runner(args.load_outputs)
    runners = load_run_results(file)
    runner = pick_runner(runners, wanted, file)
    if len(runners[runner]) != count:
        raise DmlEpError(f"{file}: runner {runner!r} has {len(runners[runner])} iteration(s), this run makes {count}")
    return runner, runners[runner]


def _check_runs(runs: list[dict], expected: list[dict], runner: str, tolerance: Tolerance) -> bool:
    """Each run's outputs against ``runner``'s, as compare judges graph outputs (an integer output
    in steps of 1); a table per iteration, then the verdict."""
    import numpy as np

    from ..reports.report import compare_tensors
    from ..reports.text import table

    ok = True
    for index, (outputs, saved) in enumerate(zip(runs, expected)):
        missing = [name for name in outputs if name not in saved]
        if missing:
            raise DmlEpError(f"runner {runner!r}, iteration {index}: no output {missing[0]!r} (it has {', '.join(saved) or 'none'})")
        compared = [compare_tensors(n, a, np.asarray(saved[n]), 1.0 if a.dtype.kind in "iub" else None, tolerance, sides=("dml_ep", repr(runner)))
                    for n, a in outputs.items()]
        ok &= all(c.within_tolerance for c in compared)
        print(f"dml_ep against runner {runner!r}" + (f", iteration {index}" if len(runs) > 1 else "") + f", tolerance {tolerance.describe()}:")
        print("\n".join("  " + line for line in table(["output", "dtype", "shape", "exact %", "max diff", "verdict"], [
            [c.name, c.dtype, c.shape, f"{c.exact_percent:.2f}", "-" if c.problem else f"{c.max_diff:g}",
             "ok" if c.within_tolerance else f"MISMATCH{': ' + c.problem if c.problem else ''}"] for c in compared]).splitlines()))
    print(f"  result: {'OK' if ok else 'MISMATCH'}")
    return ok


def _tolerance(args) -> Tolerance:
    """``--steps``, ``--atol`` and ``--rtol`` (run, compare)."""
    from ..reports.report import Tolerance

    return Tolerance(args.steps, dict(args.atol), dict(args.rtol))


def _savable(array: np.ndarray) -> np.ndarray:
    """int4 and uint4 (ml_dtypes) as int8 and uint8 of the same values: np.save writes them as raw
    bytes (|V1) that np.load reads back as no numbers."""
    import numpy as np

    if array.dtype.name in ("int4", "uint4"):
        return array.astype(np.int8 if array.dtype.name == "int4" else np.uint8)
    return array


def _arithmetic(args) -> dict:
    """How dml_ep plans and computes (run, export, compare): the keyword arguments of its session."""
    return dict(feature_level=args.feature_level, arithmetic=args.arithmetic, u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation],
                qdq_rules=args.qdq_rules, engine=args.engine)


# --- export --------------------------------------------------------------------------------


def cmd_export(args) -> int:
    """Write the DxDispatch model, then say what it holds and how to run it. Its folder is checked
    first, as the writer will check it: a run is not wasted on a folder that cannot be written."""
    from ..interop import dxdispatch
    from ..runtime.inputs import naming_random_inputs
    from ..core.graph import Loaded, load_model
    from ..runtime.inputs import make_feeds

    _check_writable(args)
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
    """Compare each model (each data set, each Polygraphy iteration: :func:`comparison_cases`),
    printing each report as it comes; with several, one that fails is reported and the others
    still run. Then the files asked for, and a status: 2 if any failed, 1 if any mismatched."""
    from ..conformance.cases import compare_cases, comparison_cases
    from ..reports.text import format_summary

    _check_compare(args)
    out = _text_output(args)
    cases = comparison_cases(args)
    if args.html and len(cases) != 1:
        raise DmlEpError(f"--html draws one comparison; these arguments make {len(cases)} (one per model, data set or "
                         "Polygraphy iteration)")
    options = dict(reference=args.reference, candidate=args.candidate, tolerance=_tolerance(args),
                   per_node=_per_node(args) or bool(args.html) or bool(args.model_explorer), **_arithmetic(args))
    done, errors, model = compare_cases(cases, options, args, out)
    reports = [c.report for c in done]
    if len(cases) > 1:
        print(format_summary(reports, errors), file=out)
    _write_comparison(args, cases, done, errors, model, out)
    if errors:
        return 2
    return 0 if all(r.ok for r in reports) else 1


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
    _check_writable(args)
    if args.model_explorer and args.candidate != "dml_ep":
        raise DmlEpError(f"--model-explorer shows dml_ep's plan and differences: drop --candidate {args.candidate}")
    _check_model_explorer(args)
    if args.reference == DML_REFERENCE:
        require_dml()


def _write_comparison(args, cases: list[Case], done: list[Compared], errors: list[dict], model, out) -> None:
    """The files ``compare`` was asked for. Those that stand for every comparison (Polygraphy's,
    Model Explorer's) are not written when any failed; the others hold the ones that ran."""
    from ..reports import html as html_report
    from ..conformance.cases import compare_json, polygraphy_writers

    reports = [c.report for c in done]
    if args.json:
        files.write_files({args.json: files.json_writer(compare_json(args.seed, done, errors))})
    if args.save_rewritten and reports:  # one model (comparison_cases): the graph of its first comparison
        writer, said = _rewritten(args.save_rewritten, reports[0].dml_planner, reports[0].dml_plan)
        files.write_files({args.save_rewritten: writer})
        print(said, file=out)
    if _writing([path for path in (args.save_outputs, args.save_inputs) if path], errors):
        files.write_files(polygraphy_writers(args, cases, reports, [c.feeds for c in done]))
    if args.html and reports:
        files.write_files({args.html: files.text_writer(html_report.compare_report(reports[0]))})
    if _writing([args.model_explorer] if args.model_explorer else [], errors):
        _write_model_explorer(args.model_explorer, cases[0].model, model, reports[0].dml_plan, reports, out)


def _writing(paths: list[str], errors: list[dict]) -> bool:
    """Whether to write ``paths``: not when a comparison failed (then said on stderr), as each
    stands for every comparison."""
    if paths and errors:
        print(f"dml-ep: not writing {', '.join(paths)}: {len(errors)} comparison(s) failed", file=sys.stderr)
        return False
    return bool(paths)


# --- sweep, report --------------------------------------------------------------------------


def cmd_sweep(args) -> int:
    """Run the sweep (:func:`dml_ep.sweep.run.sweep`), then list its rows, write the summary page
    asked for, and a status: 2 if a task failed, else 1 if one is out of tolerance."""
    from ..sweep.db import SweepDatabase
    from ..sweep.run import rows_text, sweep

    db = args.db or (os.path.splitext(args.report)[0] + ".db" if args.report else DEFAULT_DB)
    outputs = [("--db" if args.db else "the database (--db's default)", db), ("--report", args.report), ("--html-dir", args.html_dir)]
    files.check_distinct([(what, path) for what, path in outputs if path])  # the page written over the database, ...
    _check_writable(args, db, args.report)
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
            _write_summary_page(database.rows(), db, args.report)
    statuses = {row["status"] for row in rows}
    return 2 if "failed" in statuses else 1 if "mismatch" in statuses else 0


def cmd_report(args) -> int:
    """Every row of a sweep's database as a table; with ``--html``, the summary page."""
    from ..sweep.db import SweepDatabase
    from ..sweep.run import rows_text

    with SweepDatabase(args.db, readonly=True) as database:  # checked before anything is read, read with limits
        if args.html:
            files.check_writable(args.html, inputs=[args.db])
        rows = database.rows()
    print(rows_text(rows))
    if args.html:
        _write_summary_page(rows, args.db, args.html)
    return 0


def _write_summary_page(rows: list[dict], db: str, path: str) -> None:
    from ..sweep.page import summary_page

    files.write_files({path: files.text_writer(summary_page(rows, os.path.basename(db), path))})
    print(f"wrote {path}: the summary page of {len(rows)} task(s)")


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


def _check_writable(args, *more: str | None) -> None:
    """Before any work: each file the command writes (its options', and ``more``) can be written and
    replaces none that it reads; no two of its outputs are one file, and none is in a folder it
    writes whole (:func:`dml_ep.core.files.check_distinct`)."""
    _written(args)  # one on stdout at most
    inputs = _inputs_read(args)
    outputs = _outputs(args, *more)
    for what, path in outputs:
        if what not in WHOLE_FOLDERS:
            files.check_writable(path, inputs=inputs)
    files.check_distinct(outputs, WHOLE_FOLDERS)


def _text_output(args):
    """Where the report's text goes: stderr when its JSON or model takes stdout (``-``)."""
    return sys.stderr if "-" in _written(args) else sys.stdout


if __name__ == "__main__":
    sys.exit(main())
