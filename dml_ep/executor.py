"""Runs a plan: DirectML descs on dml_ep's kernels, fallback nodes on onnxruntime's CPU EP.

Each fallback node gets one single-node onnxruntime session, made with the executor, with its
constant inputs as initializers, so every model onnxruntime runs, dml_ep runs.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx

from .arithmetic import Arithmetic
from .errors import FallbackError, OutOfMemoryError
from .graph import ort_message
from .kernels import run_kernel
from .plan import DmlNode, FallbackNode, Plan, PlanEntry
from .reference import cpu_session


class Executor:
    def __init__(self, plan: Plan, arithmetic: Arithmetic):
        self.plan = plan
        self.arithmetic = arithmetic
        self._fallback_sessions = {id(entry): fallback_session(entry, plan) for entry in plan.fallback_nodes}
        self._last_readers = _last_readers(plan)

    def with_arithmetic(self, arithmetic: Arithmetic) -> "Executor":
        """The same plan under another arithmetic, sharing the fallback sessions already made."""
        other = copy.copy(self)
        other.arithmetic = arithmetic
        return other

    def run(self, feeds: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
        """Execute every entry; returns the graph outputs, or with ``keep_all`` every value.

        Without ``keep_all`` each intermediate is dropped after the last entry that reads it, as a
        runtime's allocation planner would, so peak memory follows the live tensors only.
        """
        values = dict(feeds)
        for index, entry in enumerate(self.plan.entries):
            try:
                values.update(self.run_entry(entry, values))
            except MemoryError:
                raise OutOfMemoryError("not enough memory to run this node on this machine", node=entry.node) from None
            if not keep_all:
                for name in self._last_readers.get(index, ()):
                    values.pop(name, None)
        return values

    def run_entry(self, entry: PlanEntry, values: dict) -> dict[str, np.ndarray]:
        """One entry's outputs, its inputs read from ``values``."""
        if isinstance(entry, DmlNode):
            return {entry.output: self.run_dml(entry, values)}
        return self.run_fallback(entry, values)

    def run_dml(self, entry: DmlNode, values: dict) -> np.ndarray:
        tensors = {
            field: binding if isinstance(binding, np.ndarray) else values[binding]
            for field, binding in entry.inputs.items()
        }
        result = run_kernel(entry.desc, tensors, self.arithmetic, entry.cache)
        return np.ascontiguousarray(result).reshape(entry.output_shape)

    def run_fallback(self, entry: FallbackNode, values: dict) -> dict[str, np.ndarray]:
        feeds = {name: values[name] for name in entry.value_inputs if name not in self.plan.constants}
        try:
            results = self._fallback_sessions[id(entry)].run(entry.outputs, feeds)
        except Exception as exc:  # onnxruntime's exception types share no base class but Exception
            raise FallbackError(f"onnxruntime failed running this fallback node: {ort_message(exc, with_node=False)}", node=entry.node) from None
        return dict(zip(entry.outputs, results))


def _last_readers(plan: Plan) -> dict[int, list[str]]:
    """For each entry index, the intermediate values it is the last to read (graph outputs stay)."""
    keep = {o.name for o in plan.outputs}
    last = {}
    for index, entry in enumerate(plan.entries):
        for name in entry.value_inputs:
            last[name] = index
    readers = {}
    for name, index in last.items():
        if name not in keep:
            readers.setdefault(index, []).append(name)
    return readers


def fallback_session(entry: FallbackNode, plan: Plan):
    """The node's onnxruntime session, made with the executor: like onnxruntime loading a model, it
    refuses a node whose types or attributes are invalid then, not at the first run."""
    try:
        return cpu_session(single_node_model(entry.node, plan), threads=1, spinning=False)
    except Exception as exc:  # onnxruntime's InvalidGraph, Fail, ...
        raise FallbackError(f"onnxruntime refuses this fallback node: {ort_message(exc, with_node=False)}", node=entry.node) from None


def single_node_model(node: onnx.NodeProto, plan: Plan) -> onnx.ModelProto:
    """A model holding just ``node``: constant inputs as initializers, the rest as graph inputs."""
    inputs, initializers = [], []
    for name in dict.fromkeys(n for n in node.input if n):
        if name in plan.constants:
            initializers.append(onnx.numpy_helper.from_array(plan.constants[name], name))
        else:
            info = plan.values[name]
            inputs.append(onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(info.dtype), info.shape))
    outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = onnx.helper.make_graph([node], f"fallback_{node.name or node.op_type}", inputs, outputs, initializers)
    model = onnx.helper.make_model(graph, opset_imports=plan.model.opset_import, ir_version=plan.model.ir_version)
    model.functions.extend(plan.model.functions)
    return model
