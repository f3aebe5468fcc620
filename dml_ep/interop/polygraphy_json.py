"""Polygraphy's JSON files, read and written without Polygraphy: the ``RunResults`` of ``polygraphy
run --save-outputs`` and the input data of ``--save-inputs``.

Polygraphy's encoder (``polygraphy/json/serde.py``, as of 0.53) marks each object of its classes
with a ``"polygraphy_class"`` key and writes no version field. The files hold:

- RunResults: ``{"lst": [[runner name, [IterationResult, ...]], ...], "polygraphy_class": "RunResults"}``,
  where an IterationResult is ``{"outputs": {name: LazyArray}, "runtime": seconds or null,
  "runner_name": ..., "polygraphy_class": "IterationResult"}`` and a LazyArray
  ``{"values": ndarray, "polygraphy_class": "LazyArray"}``;
- input data: a list of feed dicts ``[{name: ndarray}, ...]``, one per iteration;
- an ndarray is ``{"array": base64 of np.save's bytes, "polygraphy_class": "ndarray"}``.

Where Polygraphy is given a path without an extension it writes a directory of per-iteration
files instead (``0000000000.json``, ...); both forms are read. Polygraphy's older markers
(``"__polygraphy_encoded_<class>"``) and pickled or torch payloads are not.
"""

from __future__ import annotations

import base64
import glob
import io
import json
import os

import numpy as np

from ..core.errors import FeedError
from ..runtime.inputs import read_npy

MARKER = "polygraphy_class"
LAZY = ("LazyArray", "LazyNumpyArray")  # the class, and its name in older Polygraphy releases


def encode_array(array: np.ndarray) -> dict:
    data = io.BytesIO()
    np.save(data, np.asarray(array), allow_pickle=False)
    return {"array": base64.b64encode(data.getvalue()).decode(), MARKER: "ndarray"}


def run_results_json(runners: dict[str, list[dict[str, np.ndarray]]]) -> str:
    """RunResults holding each runner's iterations (a dict of outputs each), as Polygraphy's
    ``RunResults.save`` writes them; no runtimes (null), since dml_ep times nothing."""
    lst = [
        [name, [{"outputs": {output: {"values": encode_array(array), MARKER: "LazyArray"} for output, array in outputs.items()},
                 "runtime": None, "runner_name": name, MARKER: "IterationResult"} for outputs in iterations]]
        for name, iterations in runners.items()
    ]
    return json.dumps({"lst": lst, MARKER: "RunResults"}, indent=4)


def inputs_json(feeds: list[dict[str, np.ndarray]]) -> str:
    """Input data, one feed dict per iteration, as ``polygraphy run --save-inputs`` writes it."""
    return json.dumps([{name: encode_array(array) for name, array in feed.items()} for feed in feeds], indent=4)


def load_run_results(path: str) -> dict[str, list[dict[str, np.ndarray]]]:
    """Each runner's iterations in a RunResults file (or a directory of per-iteration ones), in order."""
    runners: dict[str, list[dict[str, np.ndarray]]] = {}
    for file, document in _documents(path):
        try:
            if not isinstance(document, dict) or document.get(MARKER) != "RunResults":
                raise ValueError(f"holds {_what(document)}, not Polygraphy's RunResults (polygraphy run --save-outputs)")
            for name, iterations in document["lst"]:
                for iteration in iterations:
                    if iteration.get(MARKER) != "IterationResult":
                        raise ValueError(f"runner {name!r} holds {_what(iteration)}, not an IterationResult")
                    runners.setdefault(name, []).append({n: _array(a, LAZY) for n, a in iteration["outputs"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FeedError(f"{file}: {_reason(exc)}") from None
    return runners


def load_inputs(path: str) -> list[dict[str, np.ndarray]]:
    """The feed dicts in an input data file (a list of them, or one), or a directory of such files."""
    feeds = []
    for file, document in _documents(path):
        try:
            for feed in document if isinstance(document, list) else [document]:
                if not isinstance(feed, dict) or MARKER in feed:
                    raise ValueError(f"holds {_what(feed)}, not Polygraphy's input data (polygraphy run --save-inputs)")
                feeds.append({name: _array(array) for name, array in feed.items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FeedError(f"{file}: {_reason(exc)}") from None
    if not feeds:  # a run per feed dict: none would be no run at all
        raise FeedError(f"{path}: no iterations (Polygraphy's input data holds a feed dict per iteration)")
    return feeds


def pick_runner(runners: dict[str, list], wanted: str | None, path: str) -> str:
    """The runner named ``wanted``, or the one whose name starts with it; by default the only
    runner, leaving out dml_ep's own (``compare --save-outputs`` writes both)."""
    names = list(runners)
    if not names:  # none to name
        raise FeedError(f"{path}: holds no runner's outputs (Polygraphy's RunResults of no run)")
    if wanted is None:
        found = [n for n in names if n != "dml_ep"] or names
    else:
        found = [n for n in names if n == wanted] or [n for n in names if n.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    which = f"runners {', '.join(repr(n) for n in names)}"
    if wanted is None:
        problem = f"holds {which}: name one as {path}:RUNNER"
    else:
        problem = f"no runner {wanted!r} (it has {which})" if not found else f"{wanted!r} matches several runners ({', '.join(map(repr, found))})"
    raise FeedError(f"{path}: {problem}")


def _documents(path: str):
    """``(file, decoded JSON)`` for a file, or for each ``*.json`` file of a directory in order."""
    files = sorted(glob.glob(os.path.join(glob.escape(path), "*.json"))) if os.path.isdir(path) else [path]
    if not files:
        raise FeedError(f"{path}: a directory without *.json files")
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                yield file, json.load(f)
        except FileNotFoundError:
            raise FeedError(f"{file}: no such file") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FeedError(f"{file}: not JSON ({exc})") from None
        except RecursionError as exc:  # the json module recurses once per level of nesting
            raise FeedError(f"{file}: JSON nested too deep to read ({exc})") from None


def _array(value, kinds=("ndarray",)) -> np.ndarray:
    """An encoded ndarray, or with ``LAZY`` as ``kinds`` the one a LazyArray holds."""
    if not isinstance(value, dict) or value.get(MARKER) not in kinds:
        raise ValueError(f"expected a Polygraphy {kinds[0]}, found {_what(value)}")
    if kinds == LAZY:
        return _array(value["values"])
    try:
        return read_npy(io.BytesIO(base64.b64decode(value["array"], validate=True)))
    except (ValueError, OSError, EOFError) as exc:  # bad base64 (binascii.Error), or bytes that are no .npy
        raise ValueError(f"an ndarray that cannot be decoded ({exc})") from None


def _what(value) -> str:
    if isinstance(value, dict):
        return f"a Polygraphy {value[MARKER]}" if MARKER in value else "an object"
    return f"a JSON {type(value).__name__}"


def _reason(exc: Exception) -> str:
    return f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
