"""Runs a model: the steps planning makes (``dml_ep.planning.steps``: each node planned for the
tensors that reach it), DirectML descs on dml_ep's kernels, fallback nodes on onnxruntime's CPU EP.

Fallback nodes run in onnxruntime sessions made when first needed, with their constant inputs as
initializers and their other inputs' shapes left open, so every model onnxruntime runs, dml_ep
runs, whatever shapes reach it. Nodes that fall back whatever their shapes (no DirectML operator
is modelled for their op) share one session while each reads only values made before the first
of them or by them (:func:`dml_ep.planning.steps.fallback_partitions`); a run that keeps every value (compare's
node-by-node view) runs each node on its own. The sessions share one memory arena, and few of them get a thread pool
(:func:`fallback_session`).
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np
import onnx

from ..core.errors import FallbackError, NodeError, OutOfMemoryError, ShapeError
from ..core.graph import NodeIO, node_io, node_reads, ort_message
from ..core.memory import paused_gc, reuse_freed_memory
from ..numerics.arithmetic import Arithmetic
from ..numerics.engines import get_engine
from ..numerics.kernels.mlas_sgemm import logical_cores
from ..operators.dispatch import prepare_kernel, run_kernel
from ..operators.kernel_state import PRODUCER, KernelState
from ..operators.nodes import DmlNode, Imported, PlanEntry
from ..operators.registration import operator_of
from ..ort.inference import type_proto
from ..ort.reference import cpu_session
from ..passes.dml_fusion import unfused
from ..planning.plan import Plan, macs_inputs
from ..planning.planner import Planner
from ..planning.steps import Schedule, ShapesFollowData, Trace, Tracing


class Executor:
    """Runs a planner's model in one arithmetic, on one integer engine (a name of
    ``dml_ep.numerics.engines.ENGINES``; default: the fastest exact one)."""

    def __init__(self, planner: Planner, arithmetic: Arithmetic, engine: str | None = None):
        reuse_freed_memory()
        self.planner = planner
        self.arithmetic = arithmetic
        self.engine = get_engine(engine)
        self._schedule = Schedule(planner)
        self._last_run: Plan | Trace | None = None
        self._trace: Trace | None = None  # the last run's steps, replayed while the feeds' shapes stay the same
        self._shapes_from_data = False  # a run's shapes differed from the last run's on feeds of the same shapes: plan every run
        self._fallback_sessions: dict[tuple[tuple[int, ...], frozenset[str]], tuple[Any, list[str], list[str]]] = {}
        self._fed: dict[tuple[int, ...], list[str]] = {}
        self._partition_of = {id(planner.nodes[i]): group for group in self._schedule.partitions.values() for i in group}
        self._io: dict[tuple[int, ...], tuple[list[str], list[str]]] = {}
        self._pooled = 0  # fallback sessions made with a thread pool
        self._index = {id(node): index for index, node in enumerate(planner.nodes)}
        graph_outputs = self._schedule.graph_outputs
        self._constant_outputs = {name: planner.constants[name] for name in graph_outputs if name in planner.constants}
        # one per signature (its entries share their ``imported``), and per value made from constants alone that it reads
        self._kernels: dict[Imported | tuple[Imported, tuple[str, ...]], KernelState] = {}
        self._from_constants: dict[str, dict] = {}  # the outputs of DML entries reading constants alone (the same arrays at every
        # run), each with what kernels derive from it once (``KernelState.shared``)
        self._bound: dict[int, _Bound] = {}  # by the id of the DML entry
        # Profiling's (dml_ep.runtime.profiling): called after each step with the time it started; None, a test per step and no clock read
        self.step_hook: StepHook | None = None

    @property
    def plan(self) -> Plan | None:
        """The plan of the last run (None before any), made when asked for."""
        if self._last_run is None or isinstance(self._last_run, Plan):
            return self._last_run
        trace = self._last_run
        if trace.plan is None:
            trace.plan = self.planner.plan_of(trace.entries, trace.infos)
        return trace.plan

    @plan.setter
    def plan(self, plan: Plan) -> None:
        self._last_run = plan

    def with_arithmetic(self, arithmetic: Arithmetic) -> "Executor":
        """The same model under another arithmetic, sharing the plans, kernel states and fallback sessions made."""
        other = copy.copy(self)
        other.arithmetic = arithmetic
        return other

    def prepare(self, plan: Plan) -> None:
        """Make the sessions of ``plan`` now, as onnxruntime does loading a model: the kernels'
        engine sessions for their weights, and the fallback sessions (refusing a node whose types
        or attributes are invalid before the first run)."""
        for dml_node in plan.dml_nodes:
            prepare_kernel(dml_node.desc, self.arithmetic, self.engine, self.kernel_state(dml_node))
        channels_last: set[str] = set()  # the values expected to lie channels last: the sessions are made for them
        made: set[int] = set()
        for entry in plan.entries:
            if isinstance(entry, DmlNode):
                if operator_of(entry.desc).output_channels_last or entry.names.get("ATensor") in channels_last:
                    channels_last.add(entry.output)
                continue
            group = self._partition_of.get(id(entry.node)) or (self._index[id(entry.node)],)
            if group[0] in made:  # by its first node: hashing a long group per member would be quadratic
                continue
            made.add(group[0])
            inputs = frozenset(self._partition_inputs(group)) & channels_last
            self._partition_session(group, inputs)
            channels_last.update(self._to_nhwc(group))
        if self._trace is None:
            self._trace = self._schedule.trace_of(plan)

    @paused_gc  # a run makes objects by the thousand too, and the collections they trigger walk the whole plan: 35 % of a 10,000-node run
    @np.errstate(all="ignore")  # IEEE results (an overflow to inf, NaN from NaN) are the answer, not a numpy warning
    def run(self, feeds: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
        """Plan and execute every node on the tensors that reach it; returns the graph outputs, or
        with ``keep_all`` every value (each fallback node then runs on its own). ``self.plan`` is
        then the plan of this run.

        Without ``keep_all`` each intermediate is dropped after the last node that reads it, as a
        runtime's allocation planner would, so peak memory follows the live tensors only. Feeds of
        the shapes of the last run's replay its steps (``dml_ep.planning.steps``), without planning.
        """
        values = {**feeds, **self._constant_outputs}
        try:
            ran = self._run_steps(self._replayed(feeds, keep_all) or self._schedule.tracing(feeds, values, keep_all), values, keep_all)
        except ShapesFollowData:  # a replay's: this run and the later ones are planned as they go
            self._shapes_from_data = True
            values = {**feeds, **self._constant_outputs}  # afresh: the replay stopped part way
            ran = self._run_steps(self._schedule.tracing(feeds, values, keep_all), values, keep_all)
        self._last_run = ran
        if not keep_all:
            self._trace = ran
        for name in self._schedule.graph_outputs & values.keys():  # as onnxruntime returns them
            value = values[name]
            if isinstance(value, np.ndarray) and not (value.flags.c_contiguous and value.flags.writeable):
                values[name] = value.copy()
        return values

    def _replayed(self, feeds: Mapping[str, Any], keep_all: bool) -> Trace | None:
        """The last run's trace where this run replays it: on feeds of its shapes, keeping what it
        kept, while no shape has followed the data."""
        trace = self._trace
        if keep_all or self._shapes_from_data or trace is None or not trace.fits(feeds):
            return None
        return trace

    def _run_steps(self, tracing: Trace | Tracing, values: dict[str, Any], keep_all: bool) -> Trace:
        """Run the steps of a trace, replayed, or of a run planned as it goes (``tracing``) on
        ``values`` (the feeds and the constant graph outputs), which end holding the values kept
        (every value with ``keep_all``); ``tracing`` plans, or checks, a late step as the run
        reaches it (``dml_ep.planning.steps``). The run's trace."""
        kept, hook, nodes = self._schedule.kept, self.step_hook, self.planner.nodes
        for step in tracing.steps:
            index, group, entry, freed, late = step
            try:
                if late:
                    entry = tracing.entry(step, values)
                assert entry is not None, "a step's entry is its trace's, or planned as the run reaches it"
                started = time.perf_counter_ns() if hook is not None else 0  # after planning: a node's time is its run's
                results = self.run_entry(entry, values) if group is None else self.run_partition(group, values)
            except MemoryError:
                raise OutOfMemoryError("not enough memory to run this node on this machine", node=nodes[index]) from None
            if late:
                entry = tracing.ran(step, entry, results)
            if keep_all:
                values.update(results)
            else:
                for name, value in results.items():
                    if name in kept:
                        values[name] = value
            if hook is not None:
                hook(index, group, entry, values, results, started)
            for name in freed:
                values.pop(name, None)
        return tracing.traced()

    def run_entry(self, entry: PlanEntry, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One entry's outputs, its inputs read from ``values``."""
        if isinstance(entry, DmlNode):
            result = self.run_dml(entry, values)
            return dict(zip(entry.outputs, result)) if isinstance(result, list) else {entry.output: result}
        return self.run_partition((self._index[id(entry.node)],), values)

    def run_dml(self, entry: DmlNode, values: Mapping[str, Any]) -> np.ndarray | list[np.ndarray]:
        """The node's output; a list of its outputs for an operator of several. A node reading
        constants alone (a weight's DequantizeLinear that onnxruntime does not fold, run at every
        inference by the real EP), or values made so (a Transpose of that weight), gives the same
        output at every run: it is worked out once per arithmetic and engine, and kept read-only
        while the values it reads stay the same arrays (compare may feed it others)."""
        bound = self._bound.get(id(entry)) or self._binding(entry)
        if bound.constant:
            key = (self.arithmetic, self.engine.name)
            reads = [values[name] for _, name, _ in bound.inputs]
            made = bound.state.outputs.get(key)
            if made is None or any(read is not was for read, was in zip(reads, made[0])):
                made = bound.state.outputs[key] = (reads, self._run_dml(bound, values))
                for array in made[1] if isinstance(made[1], list) else [made[1]]:
                    array.flags.writeable = False
                if entry.output in self._from_constants and not isinstance(made[1], list):
                    tensors = {**bound.state.constants, **{field: read for (field, _, _), read in zip(bound.inputs, reads)}}
                    self._from_constants[entry.output][PRODUCER] = (made[1], entry.desc, tensors)
            return made[1]
        return self._run_dml(bound, values)

    def _run_dml(self, bound: _Bound, values: Mapping[str, Any]) -> np.ndarray | list[np.ndarray]:
        entry, state, inputs = bound.entry, bound.state, bound.inputs
        constants = state.constants
        tensors = dict(constants)
        for field, name, planned in inputs:
            tensor = tensors[field] = values[name]
            if planned is not None and tensor.shape != planned:
                raise ShapeError(f"{field} ({name!r}) was planned for shape {list(planned)} and got {list(tensor.shape)}", node=entry.node)
        try:  # prepared from its constants also when first planned at run time
            result = run_kernel(entry.desc, tensors, self.arithmetic, self.engine, state, constants)
        except NodeError as error:  # a parameter bound at run time, checked as it arrives
            raise error.named(entry.node, entry.names) from None
        if entry.more_outputs:  # an operator of several outputs gives them in order
            shapes = (entry.output_shape, *(shape for _, shape in entry.more_outputs))
            return [array.reshape(shape) for array, shape in zip(result, shapes)]
        result = result.reshape(entry.output_shape)  # a view where it can be: kernels may write channels last
        return result.view(np.bool_) if bound.to_bool and result.dtype == np.uint8 else result  # DirectML's UINT8 holds bool's bytes

    def kernel_state(self, entry: DmlNode) -> KernelState:
        """The state of the entry's kernel, which the entries of its signature share: made with the
        buffers bound at initialization, from which a kernel does its once-per-node work.

        An entry reading a value made from constants alone (a MatMulNBits' weight, which DEQUANTIZE
        makes once per session, :meth:`run_dml`) keeps a state of its own: what its kernel derives
        once per buffer (the weight converted and packed) then stays while that buffer does, as
        the real EP's constant initializers are uploaded once. Shared by the layers of a model,
        whose weights differ, it was derived again at every run. What a kernel derives from such
        a value alone it keeps in ``state.shared``, which every state reading the value shares:
        once per session, whatever the shapes of the entry's other inputs."""
        reads = {field: b for field, b in entry.inputs.items() if isinstance(b, str)}
        derived = {field: name for field, name in reads.items() if name in self._from_constants}
        key = (entry.imported, tuple(derived.values())) if derived else entry.imported
        state = self._kernels.get(key)
        if state is None:
            constants = {field: b for field, b in entry.inputs.items() if isinstance(b, np.ndarray)}
            shared = {field: self._from_constants[name] for field, name in derived.items()}
            state = self._kernels[key] = KernelState(entry.imported, constants, shared=shared)
        if len(derived) == len(reads):  # entries are bound in the order they run: its readers are bound after it
            self._from_constants.update((name, self._from_constants.get(name, {})) for name in entry.outputs)
        return state

    def _binding(self, entry: DmlNode) -> _Bound:
        """The entry as it runs, worked out once (:meth:`run_dml` looks it up first): its kernel
        state, and the fields bound at execution."""
        inputs = [(field, b, entry.input_shapes.get(field)) for field, b in entry.inputs.items() if isinstance(b, str)]
        constant = all(name in self._from_constants for _, name, _ in inputs)
        output = self.planner.static.get(entry.output)
        bound = self._bound[id(entry)] = _Bound(entry, self.kernel_state(entry), inputs, constant, output is not None and output.dtype == np.bool_)
        return bound

    def run_partition(self, group: tuple[int, ...], values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The outputs of fallback nodes (one, or a partition: those read after it), from one
        onnxruntime run. Inputs that lie channels last in memory go in as they lie."""
        inputs = self._partition_inputs(group)
        channels_last = frozenset(name for name in inputs if is_channels_last(values[name]) and f"{name}.nhwc" not in self.planner.static)
        session, outputs, fetched = self._partition_session(group, channels_last)
        feeds = {name: values[name] for name in inputs if name not in channels_last}
        feeds.update((f"{name}.nhwc", values[name].transpose(0, 2, 3, 1)) for name in channels_last)
        try:
            results = session.run(fetched, feeds)
        except Exception as exc:  # onnxruntime's exception types share no base class but Exception
            packed = [name for name, value in feeds.items() if getattr(value, "dtype", None) is not None and value.dtype.kind == "V"]
            if packed:  # int4 or uint4 (ml_dtypes): numpy arrays onnxruntime's run() takes no type for
                raise FallbackError(f"{packed[0]!r} is {values[packed[0]].dtype}, which onnxruntime's Python run() cannot take "
                                    "(only OrtValues hold it): a node reading it on the CPU fallback cannot run", node=self.planner.nodes[group[0]]) from None
            nodes = ", ".join(self.planner.nodes[i].name or self.planner.nodes[i].op_type for i in group)
            raise FallbackError(f"onnxruntime failed running {'this fallback node' if len(group) == 1 else 'the fallback nodes ' + nodes}: "
                                f"{ort_message(exc, with_node=False)}", node=self.planner.nodes[group[0]]) from None
        return {name: result.transpose(0, 3, 1, 2) if fetch != name else result
                for name, fetch, result in zip(outputs, fetched, results)}

    def _partition_inputs(self, group: tuple[int, ...]) -> list[str]:
        """The values fallback nodes are fed at each run (worked out once)."""
        inputs = self._fed.get(group)
        if inputs is None:
            inputs = self._fed[group] = [name for name in self._partition_io(group)[0] if name not in self.planner.constants]
        return inputs

    def _partition_io(self, group: tuple[int, ...]) -> tuple[list[str], list[str]]:
        """What fallback nodes read from outside (their subgraphs' outer-scope values included) and
        what they give: a single node all its outputs; a partition those read after it, and those
        a MAC count needs the shapes of (:func:`dml_ep.planning.plan.macs_inputs`). Worked out once."""
        made = self._io.get(group)
        if made is not None:
            return made
        nodes = self._cpu_nodes(group)
        produced = {name for _, io in nodes for name in io.outputs if name}
        inputs = [name for name in dict.fromkeys(n for node, io in nodes for n in node_reads(node, io.inputs)) if name not in produced]
        made = self._io[group] = (inputs, self._partition_outputs(group, [io for _, io in nodes]))
        return made

    def _partition_outputs(self, group: tuple[int, ...], ios: list[NodeIO]) -> list[str]:
        """What fallback nodes (``ios``: the inputs and outputs of those run for ``group``) give: a
        single node all its outputs; a partition those read after it (``Schedule.read_after``)."""
        if len(group) == 1:
            return [name for name in self.planner.io[group[0]].outputs if name]
        return self._schedule.read_after(group, [name for io in ios for name in io.outputs if name])

    def _cpu_nodes(self, group: tuple[int, ...]) -> list[tuple[onnx.NodeProto, NodeIO]]:
        """The ONNX nodes onnxruntime runs for these nodes (a DML-internal fused node unfused), each
        with its inputs and outputs."""
        planner = self.planner
        return [(node, planner.io[index] if node is planner.nodes[index] else node_io(node))
                for index in group for node in unfused(planner.nodes[index])]

    def _to_nhwc(self, group: tuple[int, ...]) -> set[str]:
        """The outputs of fallback nodes that leave them channels last: the 4-D ones."""
        static = self.planner.static
        return {name for name in self._partition_io(group)[1] if len(static[name].shape or ()) == 4 and f"{name}.nhwc" not in static}

    def _small(self, names: list[str]) -> bool:
        """Whether these values have static shapes, each of fewer than POOLED_MIN_ELEMENTS elements."""
        constants, static = self.planner.constants, self.planner.static
        for name in names:
            shape = constants[name].shape if name in constants else static[name].shape
            if shape is None or None in shape or math.prod(shape) >= POOLED_MIN_ELEMENTS:
                return False
        return True

    def _partition_session(self, group: tuple[int, ...], channels_last: frozenset = frozenset()):
        """The session of fallback nodes for inputs in these layouts, made once; with its outputs
        and the names to fetch them by (4-D outputs come channels last: ``<name>.nhwc``)."""
        key = (group, channels_last)
        made = self._fallback_sessions.get(key)
        if made is None:
            planner = self.planner
            inputs, outputs = self._partition_io(group)
            to_nhwc = self._to_nhwc(group)
            nodes = [node for node, _ in self._cpu_nodes(group)]
            # as bytes: the message's copy of the nodes (3.5 MB for 10,000) is freed before onnxruntime parses its own
            model = fallback_model(nodes, inputs, outputs, planner, channels_last, to_nhwc).SerializeToString()
            pooled = (self._pooled < POOLED_SESSIONS and any(macs_inputs(node)[1:] or node.op_type in NORMALIZATIONS for node in nodes)
                      and not self._small(inputs + outputs))
            try:
                session = fallback_session(model, planner.nodes[group[0]], optimize=len(group) == 1, pooled=pooled)
            except FallbackError:
                if len(group) > 1:
                    for index in group:  # name the node onnxruntime refuses
                        self._partition_session((index,))
                raise
            self._pooled += pooled
            made = self._fallback_sessions[key] = (session, outputs, [f"{n}.nhwc" if n in to_nhwc else n for n in outputs])
        return made


class _Bound(NamedTuple):
    """A DML entry as the executor runs it (held: it is keyed by its id)."""

    entry: DmlNode
    state: KernelState
    inputs: list[tuple[str, str, tuple | None]]  # the fields bound at execution: each with the value it reads and the shape planned for it
    constant: bool  # it reads constants, and values made from constants alone, only: its outputs are the same at every run
    to_bool: bool  # its output is an ONNX bool value, which a UINT8 DirectML tensor holds (CLIP1's of a Cast to bool)


# A step's first node index, its partition (None: one node), its entry (a partition's first's), the values of the run
# (its inputs among them), its results and when it started (time.perf_counter_ns)
StepHook = Callable[[int, tuple[int, ...] | None, PlanEntry, Mapping[str, Any], Mapping[str, Any], int], None]


def is_channels_last(x) -> bool:
    """Whether a 4-D array (NCHW sizes) lies in memory as NHWC, as convolution outputs do."""
    return isinstance(x, np.ndarray) and x.ndim == 4 and not x.flags.c_contiguous and x.transpose(0, 2, 3, 1).flags.c_contiguous


POOLED_SESSIONS = 8  # fallback sessions per model that get a thread pool: those with matrix products or normalizations first
# Below this many elements in each value they read and write, fallback nodes run on one thread: waking a pool costs more than
# it shares (a 1x16x64 LayerNormalization: 5 us on one thread, 16 us on two; a transformer block of that width runs 20 % faster;
# a MiniLM-sized encoder block, 1x128x384 values, 2.52 ms a run against 2.88 with pools woken for its 2^15..2^17-element values).
POOLED_MIN_ELEMENTS = 2**17
# Ops whose onnxruntime kernels split their rows over the thread pool (a 1x128x384
# SkipLayerNormalization: 0.22 ms on one thread, 0.15 ms on two).
NORMALIZATIONS = {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization",
                  "Softmax", "EmbedLayerNormalization", "Attention"}


def fallback_session(model: bytes, node: onnx.NodeProto, optimize: bool = True, pooled: bool = False):
    """An onnxruntime session of fallback nodes (a serialized model): made once, it refuses a node
    whose types or attributes are invalid as onnxruntime loading the model would. A ``pooled``
    session has a thread per core that sleeps between runs (spinning pools would take the cores
    from dml_ep's kernels); the others run on the caller's thread, so that thousands of fallback
    sessions do not make thousands of threads. All share one memory arena.

    A partition's session runs without onnxruntime's graph optimizations: they would fuse its
    nodes (DequantizeLinear -> Mul -> QuantizeLinear into QLinearMul by the CPU EP's QDQ rules, a
    constant Add into a Conv's bias), and the numbers would no longer be those of the nodes run
    one by one, as the real EP runs them. A single node keeps them (its layout transposes cancel),
    unless onnxruntime's optimizer fails on the graph it makes (an int8 DequantizeLinear-21 before
    a layout Transpose: its QDQ propagation writes a QuantizeLinear whose types disagree): the node
    then runs as it is, its transposes too."""
    threads = logical_cores() if pooled else 1
    try:
        return cpu_session(model, threads=threads, spinning=False, optimize=optimize, shared_arena=True)
    except Exception as exc:  # onnxruntime's InvalidGraph, Fail, ...
        failure = exc
    if optimize:
        try:
            return cpu_session(model, threads=threads, spinning=False, optimize=False, shared_arena=True)
        except Exception as exc:  # the node itself is refused: that is the message
            failure = exc
    raise FallbackError(f"onnxruntime refuses this fallback node: {ort_message(failure, with_node=False)}", node=node)


def fallback_model(nodes: list, inputs: list[str], outputs: list[str], planner: Planner,
                   channels_last=frozenset(), to_nhwc=frozenset()) -> onnx.ModelProto:
    """A model of just these nodes: the constant ones of ``inputs`` (the values they and their
    subgraphs read) as initializers, the others as graph inputs of their static type with open
    shapes; ``outputs`` as graph outputs.

    An input in ``channels_last`` comes as NHWC and an output in ``to_nhwc`` leaves as NHWC
    (``<name>.nhwc``), through Transpose nodes that onnxruntime's layout optimizer cancels
    against its NHWC kernels (a uint8 MaxPool, 50x faster than its NCHW one), or runs itself.
    """
    graph_inputs, initializers, transposes = [], [], []
    for name in inputs:
        if name in planner.constants:
            initializers.append(onnx.numpy_helper.from_array(planner.constants[name], name))
        elif name in channels_last:
            proto = type_proto(planner.static[name].type)
            graph_inputs.append(onnx.helper.make_tensor_value_info(f"{name}.nhwc", proto.tensor_type.elem_type, None))
            transposes.append(onnx.helper.make_node("Transpose", [f"{name}.nhwc"], [name], perm=[0, 3, 1, 2]))
        else:
            graph_inputs.append(onnx.helper.make_value_info(name, type_proto(planner.static[name].type)))
    graph_outputs = []
    for name in outputs:
        if name in to_nhwc:
            transposes.append(onnx.helper.make_node("Transpose", [name], [f"{name}.nhwc"], perm=[0, 2, 3, 1]))
            name = f"{name}.nhwc"
        graph_outputs.append(onnx.helper.make_empty_tensor_value_info(name))
    model = onnx.ModelProto(ir_version=planner.header.ir_version, opset_import=planner.header.opset_import,
                            functions=planner.header.functions)
    graph = model.graph  # made in place: make_model would copy a graph of thousands of nodes once more
    graph.name = f"fallback_{nodes[0].name or nodes[0].op_type}"
    graph.node.extend([*nodes, *transposes])
    graph.input.extend(graph_inputs)
    graph.output.extend(graph_outputs)
    graph.initializer.extend(initializers)
    return model
