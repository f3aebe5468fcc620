"""onnxruntime's profiling for dml_ep's sessions (``SessionOptions.enable_profiling``).

A profile is onnxruntime's: a Chrome trace (a JSON list of complete events, ``"ph": "X"``, ``ts``
and ``dur`` in microseconds from the profile's start), written by ``end_profiling`` to
``<profile_file_prefix>_<local start time>_<milliseconds>.json``. "Session" events time loading the
model, initializing the session and each run (``model_run``); a "Node" event per step of dml_ep's
plan (``<node name>_kernel_time``) has onnxruntime's args ``op_name``, ``provider``,
``node_index``, ``input_type_shape`` and ``output_type_shape``, and dml_ep's: the DirectML
operator (``dml_operator``, ``dml_fused_activation``, ``feature_level``) and the model's nodes it
stands for, or the fallback's ``fallback_reason``. onnxruntime's arena and thread-pool statistics
have no counterpart in dml_ep and are left out. Fallback nodes that run as one onnxruntime
session (:func:`dml_ep.planning.steps.fallback_partitions`) are one event, their nodes listed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Mapping

import numpy as np

from ..core import files
from ..operators.nodes import DmlNode, PlanEntry
from ..planning.planner import Planner
from .executor import StepHook

# The providers a node runs on, as onnxruntime names them (here, below the session, for the profile's events to name them too)
DML_PROVIDER, CPU_PROVIDER = "DmlExecutionProvider", "CPUExecutionProvider"
_ORT_ELEMENT_NAMES = {"float32": "float", "float64": "double"}  # onnxruntime's names where numpy's differ


def now() -> tuple[int, int]:
    """The start of a profile: the wall clock (what ``get_profiling_start_time_ns`` gives and the
    file is named after) and the monotonic clock events are timed by, in nanoseconds."""
    return time.time_ns(), time.perf_counter_ns()


def profile_path(prefix: str, start_ns: int) -> str:
    """onnxruntime's name for a profile started at ``start_ns`` (local time, milliseconds)."""
    seconds, nanoseconds = divmod(start_ns, 10**9)
    return f"{prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S', time.localtime(seconds))}_{nanoseconds // 10**6:03d}.json"


class Profile:
    """The events of one session's profile, from ``began`` (:func:`now`) until :meth:`write`.

    The folder of the file is checked when the profile starts (onnxruntime would write no file,
    and say nothing), so that a run is not profiled for nothing. Events are appended from any
    thread (a list's append is atomic)."""

    def __init__(self, prefix: str, began: tuple[int, int]):
        self.start_ns, self._origin = began
        self.path = profile_path(prefix, self.start_ns)
        files.check_folder(self.path, os.path.dirname(os.path.abspath(self.path)))
        self._events: list[dict] = []
        self._pid = os.getpid()

    def record(self, category: str, name: str, started: int, args: dict | None = None, ended: int | None = None) -> None:
        """One event, from ``started`` to ``ended`` (default: now), on the ``time.perf_counter_ns`` clock."""
        ended = time.perf_counter_ns() if ended is None else ended
        self._events.append({"cat": category, "pid": self._pid, "tid": threading.get_native_id(), "dur": (ended - started) // 1000,
                             "ts": (started - self._origin) // 1000, "ph": "X", "name": name, "args": args or {}})

    def node_hook(self, planner: Planner, feature_level) -> StepHook:
        """The executor's step hook: a "Node" event per step of a run."""
        def step_done(index: int, group: tuple[int, ...] | None, entry: PlanEntry, values: Mapping[str, Any],
                      results: Mapping[str, Any], started: int) -> None:
            ended = time.perf_counter_ns()
            nodes = [planner.nodes[i] for i in group] if group else [entry.node]
            args = node_args(entry, nodes, index, [values.get(n, planner.constants.get(n)) for n in _read_from_outside(nodes)],
                             list(results.values()), feature_level)
            self.record("Node", f"{nodes[0].name}_kernel_time", started, args, ended)
        return step_done

    def write(self) -> str:
        """Write the profile in a new file (one of the same name is never replaced: a suffix makes
        the name new); its path."""
        text = "[\n" + ",\n".join(json.dumps(event) for event in self._events) + "\n]\n"
        stem, path = self.path[:-len(".json")], self.path
        for suffix in range(1, 1000):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to any new file
                break
            except FileExistsError:
                path = f"{stem}-{suffix}.json"
        else:
            raise OSError(f"cannot write {self.path}: it and 999 suffixed names exist")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
        except OSError as exc:
            os.remove(path)
            raise OSError(f"cannot write {path}: {exc.strerror or exc}") from None
        return path


def node_args(entry: PlanEntry, nodes: list, index: int, inputs: list, outputs: list, feature_level) -> dict:
    """A "Node" event's args: onnxruntime's, then where dml_ep ran the step and why."""
    args: dict[str, Any] = {
        "op_name": "+".join(dict.fromkeys(node.op_type for node in nodes)),
        "provider": DML_PROVIDER if isinstance(entry, DmlNode) else CPU_PROVIDER,
        "node_index": str(index),
        "input_type_shape": [_type_shape(value) for value in inputs if isinstance(value, np.ndarray)],
        "output_type_shape": [_type_shape(value) for value in outputs if isinstance(value, np.ndarray)],
    }
    if isinstance(entry, DmlNode):
        args["dml_operator"] = entry.operator
        activation = getattr(entry.desc, "FusedActivation", None)
        if activation is not None:
            args["dml_fused_activation"] = str(activation.OPERATOR_TYPE)
        args["feature_level"] = str(feature_level)
        args["model_nodes"] = [node.name for node in entry.origin.nodes]
    else:
        args["fallback_reason"] = entry.reason
        if len(nodes) > 1:
            args["partition"] = [node.name for node in nodes]
    return args


def _read_from_outside(nodes: list) -> list[str]:
    """The inputs of ``nodes`` that none of them makes, in order."""
    made = {name for node in nodes for name in node.output}
    return [name for name in dict.fromkeys(name for node in nodes for name in node.input) if name and name not in made]


def _type_shape(array: np.ndarray) -> dict:
    """onnxruntime's ``{"float": [2, 3]}``."""
    return {_ORT_ELEMENT_NAMES.get(array.dtype.name, array.dtype.name): list(array.shape)}
