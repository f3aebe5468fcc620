"""Runs a model: each node planned for the tensors that reach it, DirectML descs on dml_ep's
kernels, fallback nodes on onnxruntime's CPU EP.

Each fallback node gets one single-node onnxruntime session, made when first needed, with its
constant inputs as initializers and its other inputs' shapes left open, so every model
onnxruntime runs, dml_ep runs, whatever shapes reach it.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx

from .arithmetic import Arithmetic
from .engines import get_engine
from .errors import FallbackError, OutOfMemoryError, ShapeError
from .graph import ort_message, type_proto, value_info_of
from .kernels import run_kernel
from .plan import DmlNode, FallbackNode, Plan, PlanEntry
from .planner import Planner
from .reference import cpu_session


class Executor:
    """Runs a planner's model in one arithmetic, on one integer engine (a name of
    ``dml_ep.engines.ENGINES``; default: the fastest exact one)."""

    def __init__(self, planner: Planner, arithmetic: Arithmetic, engine: str | None = None):
        self.planner = planner
        self.arithmetic = arithmetic
        self.engine = get_engine(engine)
        self._last_run = None  # (entries, value infos) of the last run
        self._fallback_sessions = {}
        self._last_readers = _last_readers(planner)
        self._graph_outputs = set(planner.output_names)

    @property
    def plan(self) -> Plan | None:
        """The plan of the last run (None before any), made when asked for."""
        if self._last_run is None:
            return None
        if not isinstance(self._last_run, Plan):
            self._last_run = self.planner.plan_of(*self._last_run)
        return self._last_run

    @plan.setter
    def plan(self, plan: Plan) -> None:
        self._last_run = plan

    def with_arithmetic(self, arithmetic: Arithmetic) -> "Executor":
        """The same model under another arithmetic, sharing the plans and fallback sessions made."""
        other = copy.copy(self)
        other.arithmetic = arithmetic
        return other

    def prepare(self, plan: Plan) -> None:
        """Make the fallback sessions of ``plan`` now: like onnxruntime loading a model, refuse a
        node whose types or attributes are invalid before the first run."""
        for entry in plan.fallback_nodes:
            self._fallback_session(entry)

    def run(self, feeds: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
        """Plan and execute every node on the tensors that reach it; returns the graph outputs, or
        with ``keep_all`` every value. ``self.plan`` is then the plan of this run.

        Without ``keep_all`` each intermediate is dropped after the last node that reads it, as a
        runtime's allocation planner would, so peak memory follows the live tensors only.
        """
        planner = self.planner
        values = dict(feeds)
        values.update((name, planner.constants[name]) for name in self._graph_outputs if name in planner.constants)
        infos = {name: value_info_of(name, value) for name, value in values.items()}
        entries = []
        for index in range(len(planner.nodes)):
            entry = planner.entry(index, infos)
            try:
                results = self.run_entry(entry, values)
            except MemoryError:
                raise OutOfMemoryError("not enough memory to run this node on this machine", node=entry.node) from None
            values.update(results)
            infos.update((name, value_info_of(name, value)) for name, value in results.items())
            entries.append(entry)
            if not keep_all:
                for name in self._last_readers.get(index, ()):
                    values.pop(name, None)
        self._last_run = (entries, infos)
        for name in self._graph_outputs & values.keys():  # as onnxruntime returns them
            value = values[name]
            if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
                values[name] = value.copy()
        return values

    def run_entry(self, entry: PlanEntry, values: dict) -> dict[str, np.ndarray]:
        """One entry's outputs, its inputs read from ``values``."""
        if isinstance(entry, DmlNode):
            return {entry.output: self.run_dml(entry, values)}
        return self.run_fallback(entry, values)

    def run_dml(self, entry: DmlNode, values: dict) -> np.ndarray:
        tensors = {}
        for field, binding in entry.inputs.items():
            tensor = binding if isinstance(binding, np.ndarray) else values[binding]
            planned = entry.input_shapes.get(field)
            if planned is not None and tensor.shape != planned:
                raise ShapeError(f"{field} was planned for shape {list(planned)} and got {list(tensor.shape)}", node=entry.node)
            tensors[field] = tensor
        result = run_kernel(entry.desc, tensors, self.arithmetic, self.engine, entry.cache)
        return result.reshape(entry.output_shape)  # a view where it can be: kernels may write channels last

    def run_fallback(self, entry: FallbackNode, values: dict) -> dict[str, np.ndarray]:
        feeds = {name: values[name] for name in entry.value_inputs if name not in self.planner.constants}
        try:
            results = self._fallback_session(entry).run(entry.outputs, feeds)
        except Exception as exc:  # onnxruntime's exception types share no base class but Exception
            raise FallbackError(f"onnxruntime failed running this fallback node: {ort_message(exc, with_node=False)}", node=entry.node) from None
        return dict(zip(entry.outputs, results))

    def _fallback_session(self, entry: FallbackNode):
        session = self._fallback_sessions.get(id(entry.node))
        if session is None:
            session = self._fallback_sessions[id(entry.node)] = fallback_session(entry, self.planner)
        return session


def _last_readers(planner: Planner) -> dict[int, list[str]]:
    """For each node index, the intermediate values it is the last to read (graph outputs stay)."""
    keep = set(planner.output_names)
    last = {}
    for index, reads in enumerate(planner.reads):
        for name in reads:
            last[name] = index
    readers = {}
    for name, index in last.items():
        if name not in keep:
            readers.setdefault(index, []).append(name)
    return readers


def fallback_session(entry: FallbackNode, planner: Planner):
    """The node's onnxruntime session: made once, it refuses a node whose types or attributes are
    invalid as onnxruntime loading the model would."""
    try:
        return cpu_session(single_node_model(entry, planner), threads=1, spinning=False)
    except Exception as exc:  # onnxruntime's InvalidGraph, Fail, ...
        raise FallbackError(f"onnxruntime refuses this fallback node: {ort_message(exc, with_node=False)}", node=entry.node) from None


def single_node_model(entry: FallbackNode, planner: Planner) -> onnx.ModelProto:
    """A model holding just the entry's node: constant inputs (and constants its subgraphs read) as
    initializers, the rest as graph inputs of their static type with open shapes."""
    node = entry.node
    inputs, initializers = [], []
    for name in entry.value_inputs:
        if name in planner.constants:
            initializers.append(onnx.numpy_helper.from_array(planner.constants[name], name))
        else:
            inputs.append(onnx.helper.make_value_info(name, type_proto(planner.static[name].type)))
    outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = onnx.helper.make_graph([node], f"fallback_{node.name or node.op_type}", inputs, outputs, initializers)
    model = onnx.helper.make_model(graph, opset_imports=planner.model.opset_import, ir_version=planner.model.ir_version)
    model.functions.extend(planner.model.functions)
    return model
