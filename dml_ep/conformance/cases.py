"""Comparison cases: what ``compare`` compares, one at a time. A case is a model on one set of
inputs:

- a model file, on the inputs given (``--input``, ``--input-dir``) or seeded random ones;
- one data set of a directory laid out as the ONNX model zoo: its ``input_<i>.pb``, and the
  ``output_<i>.pb`` it ships, which both sides are checked against;
- one iteration of Polygraphy's files: a feed dict of ``--load-inputs``, and the outputs of
  ``--load-outputs``' runner, compared with in place of running the reference.

:func:`comparison_cases` makes them from ``compare``'s arguments; :func:`compare_cases` compares
them one by one (a case's inputs from :func:`case_feeds`, its comparison by :func:`compare_case`),
reporting each as it comes, then a batch's summary; :func:`compare_json` is ``--json``'s report of
them (a sweep's task stores it too); :func:`write_comparison` writes a batch's files, its
Polygraphy files made by :func:`polygraphy_writers` (``--save-outputs``, ``--save-inputs``).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import re
import sys
import time
from typing import Callable, TextIO

import numpy as np
import onnx

from ..core import files
from ..core.errors import DmlEpError, FeedError
from ..core.graph import Loaded, graph_inputs, load_model, one_line
from ..interop.polygraphy_json import inputs_json, load_inputs, load_run_results, pick_runner, run_results_json
from ..reports.meta import report_meta
from ..reports.report import ModelReport
from ..reports.rewritten_model import rewritten_writer
from ..reports.text import Progress, format_report, format_summary
from ..runtime.inputs import load_directory, load_tensor_protos, make_feeds, naming_random_inputs, zoo_layout
from .compare import compare_model, compare_shipped



@dataclasses.dataclass
class Case:
    """One comparison of ``compare``: a model on one set of inputs."""

    name: str  # in the report: the model, DIR/test_data_set_<i>, or MODEL [iteration <i>]
    model: str
    data_set: str | None = None  # a model zoo data set: its input_<i>.pb, and output_<i>.pb to check
    feeds: dict | None = None  # from --load-inputs
    saved: dict | None = None  # outputs to compare with, from --load-outputs
    runner: str | None = None  # the Polygraphy runner that made ``saved``
    seed: int | None = None  # of its random inputs, where not --seed (--iterations)


def comparison_cases(args: argparse.Namespace) -> list[Case]:
    """One comparison per model, per data set of a model zoo directory, or per iteration of the
    Polygraphy files given (which hold one model's runs)."""
    paths = expand_models(args.models)
    if len(paths) > 1:
        _refuse_several_models(args, len(paths))
    cases = []
    for path in paths:
        cases += _zoo_cases(path, args) if os.path.isdir(path) else polygraphy_cases(path, args)
    return cases


def _refuse_several_models(args: argparse.Namespace, count: int) -> None:
    """The options that hold or show one model's runs, given with ``count`` models: a usage error."""
    if args.load_outputs or args.load_inputs or args.save_outputs or args.save_inputs:
        raise FeedError(f"Polygraphy's files (--load-*, --save-*) hold the runs of one model: give one, not {count}")
    if args.save_rewritten:
        raise FeedError(f"--save-rewritten writes one model's graph: give one model, not {count}")
    if args.model_explorer:
        raise FeedError(f"--model-explorer shows one model: give one, not {count}")


def _zoo_cases(path: str, args: argparse.Namespace) -> list[Case]:
    """One comparison per data set of the model zoo directory ``path``, which brings every input."""
    if args.input or args.input_dir or args.load_inputs or args.load_outputs:
        raise FeedError(f"{path}: a model zoo directory brings its inputs and outputs "
                        "(drop --input, --input-dir, --load-inputs and --load-outputs)")
    layout = zoo_layout(path)
    assert layout is not None, "expand_models gives only model zoo directories"
    model, data_sets = layout
    return [Case(data_set, model, data_set=data_set) for data_set in data_sets]


def polygraphy_cases(path: str, args: argparse.Namespace) -> list[Case]:
    """The comparisons of the model ``path``: one per iteration of ``--load-inputs``/``--load-outputs``, else one."""
    if args.iterations > 1:
        return _iteration_cases(path, args)
    if not (args.load_inputs or args.load_outputs):
        return [Case(path, path)]
    feeds = loaded_inputs(args)
    saved, runner = _saved_outputs(args, feeds) if args.load_outputs else (None, None)
    iterations = saved if saved is not None else feeds
    assert iterations is not None, "--load-inputs or --load-outputs gives them"
    count = len(iterations)
    if not count:
        raise FeedError(f"{args.load_inputs or args.load_outputs}: no iterations")
    return [Case(path if count == 1 else f"{path} [iteration {i}]", path,
                 feeds=None if feeds is None else feeds[i], saved=None if saved is None else saved[i], runner=runner)
            for i in range(count)]


def _iteration_cases(path: str, args: argparse.Namespace) -> list[Case]:
    """``--iterations``: one comparison per seed, SEED, SEED+1, ..., on random inputs only."""
    if args.load_inputs or args.load_outputs or args.input or args.input_dir:
        raise FeedError("--iterations makes random inputs: drop --load-inputs, --load-outputs, --input and --input-dir")
    return [Case(f"{path} [iteration {i}]", path, seed=args.seed + i) for i in range(args.iterations)]


def loaded_inputs(args: argparse.Namespace) -> list[dict] | None:
    """``--load-inputs``' feed dicts (``run``'s and ``compare``'s), None without it; they give every input."""
    if not args.load_inputs:
        return None
    if args.input or args.input_dir:
        raise FeedError("--load-inputs gives every input: drop --input and --input-dir")
    return load_inputs(args.load_inputs)


def _saved_outputs(args: argparse.Namespace, feeds: list[dict] | None) -> tuple[list[dict], str]:
    """``--load-outputs``' iterations and the runner that made them, which must pair with the
    inputs given: one per feed dict of ``--load-inputs``, or the one run on ``--input``/``--input-dir``."""
    file, runner, saved = load_runner(args.load_outputs)
    if feeds is None and not (args.input or args.input_dir):
        raise FeedError("--load-outputs: give the inputs its outputs were made from (--load-inputs, --input or --input-dir)")
    if len(saved) != (1 if feeds is None else len(feeds)):
        given = f"{args.load_inputs} holds {len(feeds)} feed dict(s)" if feeds is not None else "--input and --input-dir give one"
        raise FeedError(f"{file}: runner {runner!r} has {len(saved)} iteration(s), {given}")
    return saved, runner


def load_runner(text: str) -> tuple[str, str, list[dict]]:
    """``--load-outputs FILE[:RUNNER]`` (``run``'s and ``compare``'s): the file, the runner picked
    in it (:func:`dml_ep.interop.polygraphy_json.pick_runner`) and that runner's iterations."""
    file, wanted = split_runner(text)
    runners = load_run_results(file)
    runner = pick_runner(runners, wanted, file)
    return file, runner, runners[runner]


def split_runner(text: str) -> tuple[str, str | None]:
    """``FILE[:RUNNER]``, split at the first colon after a drive letter (``C:\\out.json:onnxrt``)
    unless ``text`` is a file (Polygraphy's runner names hold colons: ``onnxrt-runner-N0-05/06/24-10:11:12``)."""
    colon = text.find(":", 2 if re.match(r"[A-Za-z]:[\\/]", text) else 0)
    if os.path.exists(text) or colon < 0:
        return text, None
    return text[:colon], text[colon + 1:]


def expand_models(patterns: list[str]) -> list[str]:
    """Model paths from files, directories (their *.onnx, or the directory itself when laid out as
    the ONNX model zoo) and glob patterns (each match a file or such a directory)."""
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) and not os.path.exists(pattern) else [pattern]
        found = [model for match in matches for model in _models_in(match)]
        if not found:
            raise FeedError(f"{pattern}: no ONNX models found")
        paths.extend(found)
    return paths


def _models_in(path: str) -> list[str]:
    """``path`` itself (a model, or a model zoo directory), or a directory's *.onnx."""
    if not os.path.isdir(path) or zoo_layout(path):
        return [path]
    return sorted(glob.glob(os.path.join(glob.escape(path), "*.onnx")))


def case_feeds(case: Case, model: onnx.ModelProto, args: argparse.Namespace) -> tuple[dict, dict]:
    """A comparison's feeds, and where each came from."""
    if case.feeds is not None:
        return case.feeds, dict.fromkeys(case.feeds, args.load_inputs)
    if case.data_set:  # every input from the data set: a missing one is an error, not random
        return load_directory(case.data_set, [v.name for v in graph_inputs(model.graph)])
    seed = args.seed if case.seed is None else case.seed
    return make_feeds(model, seed, args.input, args.input_dir, dict(args.shape), args.val_range)


@dataclasses.dataclass
class Compared:
    """A case that ran: its report, the feeds it ran on and where each came from."""

    report: ModelReport
    feeds: dict
    sources: dict


def compare_json(seed: int, done: list[Compared], errors: list[dict]) -> dict:
    """``compare --json``'s report of the comparisons ``done`` and those that failed (``errors``)."""
    models = [{**c.report.to_dict(), "inputs": c.sources} for c in done]
    ok = not errors and all(c.report.ok for c in done)
    return report_meta("compare", seed=seed, ok=ok, models=models, errors=errors)


@dataclasses.dataclass
class Comparisons:
    """``compare``'s batch: its cases, those that ran, the errors of those that failed (as the
    summary lists them) and the first model compared."""

    cases: list[Case]
    done: list[Compared]
    errors: list[dict]
    model: onnx.ModelProto | None

    @property
    def reports(self) -> list[ModelReport]:
        return [c.report for c in self.done]


def compare_cases(args: argparse.Namespace, options: dict, out: TextIO) -> Comparisons:
    """Compare the cases of ``compare``'s arguments (:func:`comparison_cases`) one by one with
    :func:`dml_ep.conformance.compare.compare_model`'s ``options``, each report printed on ``out``
    once made, then, of several, the summary; of several, one that fails gives its error (said on
    stderr) for the summary, and the others still run. Progress on stderr unless ``args.quiet``.
    The first model compared (every case's, for ``--model-explorer``) is kept alone: a batch's
    loaded models, weights and all, are not held to its end."""
    cases = comparison_cases(args)
    if args.html and len(cases) != 1:
        raise DmlEpError(f"--html draws one comparison; these arguments make {len(cases)} (one per model, data set or "
                         "Polygraphy iteration)")
    batch = Comparisons(cases, [], [], None)
    for index, case in enumerate(cases, 1):
        prefix = f"[{index}/{len(cases)}] {case.name}" if len(cases) > 1 else case.name
        compared = _compare_one(case, options, prefix, len(cases) > 1, args, out)
        if isinstance(compared, tuple):
            batch.done.append(compared[0])
            batch.model = compared[1] if batch.model is None else batch.model
        else:
            batch.errors.append(compared)
    if len(cases) > 1:
        print(format_summary(batch.reports, batch.errors), file=out)
    return batch


def _compare_one(case: Case, options: dict, prefix: str, several: bool, args: argparse.Namespace,
                 out: TextIO) -> tuple[Compared, onnx.ModelProto] | dict:
    """One case of :func:`compare_cases`: its :class:`Compared` and its model, or, of several, its
    error as the summary lists it; progress and timing name it by ``prefix``."""
    started = time.monotonic()
    progress = Progress(prefix, enabled=not args.quiet)
    if several and not args.quiet:
        print(f"{prefix} ...", file=sys.stderr, flush=True)
    try:
        progress("loading")
        model = load_model(case.model)
        feeds, sources = case_feeds(case, model, args)
        with naming_random_inputs(sources):
            report = compare_case(case, model, feeds, options, progress)
    except DmlEpError as exc:
        progress.clear()
        if not several or args.debug:
            raise
        message = one_line(exc)
        if not message.startswith(str(case.name)):  # model-file errors already name the file
            message = f"{case.name}: {message}"
        print(f"dml-ep: error: {message}", file=sys.stderr)
        return {"model": case.name, "error": message}
    progress.clear()
    print(format_report(report, args.per_node or bool(args.onnx_outputs), args.only_differing), file=out)
    if several and not args.quiet:
        print(f"{prefix}: done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return Compared(report, feeds, sources), model


def compare_case(case: Case, model: onnx.ModelProto, feeds: dict[str, np.ndarray], options: dict,
                 progress: Callable[..., None]) -> ModelReport:
    """Compare ``model`` (the case's, loaded) on ``feeds`` with :func:`dml_ep.conformance.compare.compare_model`'s
    ``options``; against the Polygraphy runner's outputs when the case has them, and with a model
    zoo data set's shipped outputs checked against both sides."""
    report = compare_model(Loaded(model), feeds, name=case.name, progress=progress, expected_outputs=case.saved, **options)
    if case.runner:
        report.reference = f"Polygraphy runner {case.runner!r}"
    if case.data_set:
        compare_shipped(report, load_tensor_protos(case.data_set, [o.name for o in model.graph.output], "output")[0])
    return report


def write_comparison(args: argparse.Namespace, batch: Comparisons, out: TextIO) -> None:
    """The files ``compare`` was asked for. Those that stand for every comparison (Polygraphy's,
    Model Explorer's) are not written when any failed; the others hold the ones that ran."""
    from ..reports import html as html_report, model_explorer

    reports = batch.reports
    if args.json:
        files.write_files({args.json: files.json_writer(compare_json(args.seed, batch.done, batch.errors))})
    if args.save_rewritten and reports:  # one model (comparison_cases): the graph of its first comparison
        planner, plan = reports[0].dml_planner, reports[0].dml_plan
        assert planner is not None and plan is not None, "compare_model keeps dml_ep's plan"
        writer, said = rewritten_writer(args.save_rewritten, planner, plan)
        files.write_files({args.save_rewritten: writer})
        print(said, file=out)
    if _writing([path for path in (args.save_outputs, args.save_inputs) if path], batch.errors):
        files.write_files(polygraphy_writers(args, batch))
    if args.html and reports:
        files.write_files({args.html: files.text_writer(html_report.compare_report(reports[0]))})
    if _writing([args.model_explorer] if args.model_explorer else [], batch.errors):
        model, plan = batch.model, reports[0].dml_plan
        assert model is not None and plan is not None, "every case compared, by compare_model"
        print(model_explorer.write_with_command(args.model_explorer, batch.cases[0].model, model, plan, reports), file=out)


def _writing(paths: list[str], errors: list[dict]) -> bool:
    """Whether to write ``paths``: not when a comparison failed (then said on stderr), as each
    stands for every comparison."""
    if paths and errors:
        print(f"dml-ep: not writing {', '.join(paths)}: {len(errors)} comparison(s) failed", file=sys.stderr)
        return False
    return bool(paths)


def polygraphy_writers(args: argparse.Namespace, batch: Comparisons) -> dict[str, files.Writer]:
    """``--save-outputs`` and ``--save-inputs``' files, one iteration per comparison: the runners
    named as Polygraphy would see them (``dml_ep``, ``onnxruntime-REFERENCE`` or the runner loaded)."""
    writers = {}
    if args.save_outputs:
        candidate = "dml_ep" if args.candidate == "dml_ep" else f"onnxruntime-{args.candidate}"
        reference = batch.cases[0].runner or f"onnxruntime-{args.reference}"
        if reference == candidate:
            reference += "-reference"
        runs = {candidate: [r.candidate_outputs for r in batch.reports], reference: [r.reference_outputs for r in batch.reports]}
        writers[args.save_outputs] = files.text_writer(run_results_json(runs))
    if args.save_inputs:
        writers[args.save_inputs] = files.text_writer(inputs_json([c.feeds for c in batch.done]))
    return writers
