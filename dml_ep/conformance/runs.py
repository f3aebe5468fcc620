"""``dml-ep run``'s work: dml_ep run once per feed dict (Polygraphy's ``--load-inputs``, else the
inputs given or seeded random ones), its outputs checked against a Polygraphy runner's saved ones
(``--load-outputs``) as ``compare`` judges graph outputs, and the files the runs make."""

from __future__ import annotations

import argparse
import functools
import os
from typing import TextIO

import numpy as np
import onnx

from ..core import files
from ..core.errors import DmlEpError
from ..core.graph import Loaded
from ..interop.polygraphy_json import inputs_json, run_results_json
from ..reports.report import Tolerance, compare_tensors
from ..reports.text import table
from ..runtime.inputs import make_feeds, naming_random_inputs
from ..runtime.session import InferenceSession
from .cases import load_runner, loaded_inputs


def run_feeds(model: onnx.ModelProto, args: argparse.Namespace) -> list[tuple[dict, dict]]:
    """Each run's feeds and where each came from: one per feed dict of ``--load-inputs``, else one
    of the inputs given (or seeded random ones)."""
    loaded = loaded_inputs(args)
    if loaded is not None:
        return [(feeds, dict.fromkeys(feeds, args.load_inputs)) for feeds in loaded]
    return [make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)]


def saved_runs(load_outputs: str, count: int) -> tuple[str, list[dict]]:
    """``--load-outputs``' runner and its iterations, one per run of the ``count`` made."""
    file, runner, saved = load_runner(load_outputs)
    if len(saved) != count:
        raise DmlEpError(f"{file}: runner {runner!r} has {len(saved)} iteration(s), this run makes {count}")
    return runner, saved


def run_each(model: onnx.ModelProto, iterations: list[tuple[dict, dict]], options: dict) -> list[dict[str, np.ndarray]]:
    """Each run's outputs by name: ``model`` run with dml_ep (a session of ``options``) on each feed
    dict of ``iterations``, one session for them all."""
    session = InferenceSession(Loaded(model), **options)
    names = [o.name for o in session.get_outputs()]
    runs = []
    for feeds, sources in iterations:
        with naming_random_inputs(sources):
            runs.append(dict(zip(names, session.run(None, feeds))))
    return runs


def check_runs(runs: list[dict], runner: str, expected: list[dict], tolerance: Tolerance, out: TextIO) -> bool:
    """Each run's outputs against ``runner``'s, as compare judges graph outputs (an integer output
    in steps of 1); a table per iteration on ``out`` as it is checked, then the verdict."""
    ok = True
    for index, (outputs, saved) in enumerate(zip(runs, expected)):
        missing = [name for name in outputs if name not in saved]
        if missing:
            raise DmlEpError(f"runner {runner!r}, iteration {index}: no output {missing[0]!r} (it has {', '.join(saved) or 'none'})")
        compared = [compare_tensors(n, a, np.asarray(saved[n]), 1.0 if a.dtype.kind in "iub" else None, tolerance, sides=("dml_ep", repr(runner)))
                    for n, a in outputs.items()]
        ok &= all(c.within_tolerance for c in compared)
        print(f"dml_ep against runner {runner!r}" + (f", iteration {index}" if len(runs) > 1 else "") + f", tolerance {tolerance.describe()}:",
              file=out)
        print("\n".join("  " + line for line in table(["output", "dtype", "shape", "exact %", "max diff", "verdict"], [
            [c.name, c.dtype, c.shape, f"{c.exact_percent:.2f}", "-" if c.problem else f"{c.max_diff:g}",
             "ok" if c.within_tolerance else f"MISMATCH{': ' + c.problem if c.problem else ''}"] for c in compared]).splitlines()), file=out)
    print(f"  result: {'OK' if ok else 'MISMATCH'}", file=out)
    return ok


def polygraphy_files(runs: list[dict], iterations: list[tuple[dict, dict]], save_outputs: str | None,
                     save_inputs: str | None) -> dict[str, files.Writer]:
    """``--save-outputs`` (the runs, as runner ``dml_ep``'s) and ``--save-inputs``' files, where asked for."""
    writers = {}
    if save_outputs:
        writers[save_outputs] = files.text_writer(run_results_json({"dml_ep": runs}))
    if save_inputs:
        writers[save_inputs] = files.text_writer(inputs_json([feeds for feeds, _ in iterations]))
    return writers


def outputs_table(outputs: dict[str, np.ndarray], paths: dict[str, str] | None = None) -> str:
    """The outputs' names, shapes and dtypes; with ``paths`` (``--output-dir``), each one's file,
    and the dtype it is saved as where that is not its own (:data:`SAVED_AS`)."""
    if paths is None:
        return table(["output", "shape", "dtype"], [[n, list(r.shape), r.dtype] for n, r in outputs.items()])
    saved = {name: np.dtype(SAVED_AS.get(array.dtype.name, array.dtype)) for name, array in outputs.items()}
    return table(["output", "shape", "dtype", "file"], [[n, list(r.shape), r.dtype if saved[n] == r.dtype else f"{r.dtype} (saved as {saved[n]})",
                                                        os.path.basename(paths[n])] for n, r in outputs.items()])


# ml_dtypes' int4 and uint4, saved as int8 and uint8 of the same values: np.save writes them as raw bytes (|V1) that
# np.load reads back as no numbers.
SAVED_AS = {"int4": np.int8, "uint4": np.uint8}


def npy_writers(outputs: dict[str, np.ndarray], paths: dict[str, str]) -> dict[str, files.Writer]:
    """``--output-dir``'s files: each output at its path, as np.save can write it (:data:`SAVED_AS`)."""
    return {paths[name]: functools.partial(np.save, arr=_savable(array)) for name, array in outputs.items()}


def _savable(array: np.ndarray) -> np.ndarray:
    wider = SAVED_AS.get(array.dtype.name)
    return array if wider is None else array.astype(wider)
