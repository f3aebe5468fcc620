"""The one planning entry point: model -> onnxruntime's graph rewrites -> importer -> plan entries.

As in onnxruntime with the DML EP registered: the QDQ transformer turns QDQ node groups into
QLinear nodes by the rules that apply to DML nodes (``passes/``, the release's rule set);
onnxruntime's inference then types every value; the DML EP's own GraphTransformer folds
activations into the nodes it runs (``passes/dml_fusion.py``). That much is done once per model
(:class:`Planner`). Each node then becomes a DirectML desc or a CPU fallback for the shapes of the
tensors that reach it: :meth:`Planner.entry`, cached per node and input shapes, so that a symbolic
dimension, or a shape computed from data, is planned from the real tensors of each run. The
session, the executor, the CLI and compare all plan through this module.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from ..core import graph as graph_module
from ..core.enums import DML_FEATURE_LEVEL
from ..core.errors import DmlEpError, InferenceRefusedError, NodeError, RealEpError
from ..core.graph import ValueInfo, value_info_of
from ..core.memory import paused_gc
from ..operators.dml_graph import derived_infos
from ..operators.nodes import DmlNode, FallbackNode, PlanEntry
from ..operators.registration import GRAPHS
from ..ort.inference import static_values
from ..passes import (DEFAULT_RELEASE, DML, MATMUL_NBITS_ACCURACY_LEVEL, RELEASE_NAMES, RELEASES, EditableGraph, constant_folding,
                      constant_nodes_to_initializers, dml_operator_fusion, matmul_integer_to_float_fusion, onnxruntime_fusions, qdq_transformer)
from ..passes.onnxruntime_fusions import INLINING
from ..realep.placement import CPU_CLASSES, ON_CPU, Placement, place_nodes
from .importer import DEFAULT_FEATURE_LEVEL, NodeImporter, opset_versions
from .plan import Plan


ALL_OPTIMIZATIONS = 99  # onnxruntime's GraphOptimizationLevel.ORT_ENABLE_ALL; 0 DISABLE_ALL, 1 BASIC, 2 EXTENDED


class Planner:
    """What planning does once per model: the graph rewrites and the static types. Entries are
    made per node for the input shapes a run brings (:meth:`entry`)."""

    @paused_gc
    def __init__(self, model: onnx.ModelProto, feature_level=DEFAULT_FEATURE_LEVEL, *,
                 qdq_rules: str | None = DEFAULT_RELEASE, provider: str = DML, optimization_level: int = ALL_OPTIMIZATIONS,
                 int8_allowed: bool = False, matmul_nbits_accuracy_level: int = MATMUL_NBITS_ACCURACY_LEVEL):
        if qdq_rules is not None and qdq_rules not in RELEASES:
            raise DmlEpError(f"unknown onnxruntime release {qdq_rules!r} (choose from {', '.join(RELEASE_NAMES)})")
        self.feature_level = DML_FEATURE_LEVEL.parse(feature_level)
        self.qdq_rules = qdq_rules
        self.provider = provider
        self.declared = graph_module.detached(graph_module.graph_inputs(model.graph))
        self.stand_ins = graph_module.stand_ins(model.graph)  # the weights ``source`` declares as graph inputs (graph.skeleton)
        graph = EditableGraph(model)
        loaded = graph.loaded  # first: onnxruntime refuses an invalid model here, before any pass reads it
        self.source = graph.source  # the user's model without its weights (graph.skeleton), whose nodes origins name
        onnxruntime_rewrites(graph, qdq_rules, provider, optimization_level, int8_allowed, matmul_nbits_accuracy_level)
        rewritten = graph.to_model()  # as onnxruntime's rewrites left it
        self.header = graph_module.copy_without(rewritten, "graph")  # opsets, IR version, functions: fallback models take them
        self._rewritten = rewritten.SerializeToString()  # typed here and for other input shapes; as bytes, a twentieth of the message
        del rewritten
        self.constants = graph.constants
        self.static = static_values(self._rewritten) if graph.edited else loaded
        self._importer = NodeImporter(self.constants, self.feature_level, opset_versions(self.header))
        self.on_cpu = self._placed_on_cpu(graph) if provider == DML else {}
        if provider == DML and optimization_level >= 2:  # DmlOperatorFusionTransformer is a Level-2 transformer
            dml_operator_fusion(graph, self._maps_by_type)
        self._derived = {}
        if provider == DML:  # the DML EP's operators that are small DirectML graphs, one plan node per DirectML operator
            for row in GRAPHS:
                if graph.has_op(row.op_type):
                    self._derived.update(row.split(graph, self.static, self._maps_by_type))
        if self._derived:
            self.static = {**self.static, **derived_infos(self._derived, self.static)}
        self.nodes = list(graph.nodes)
        self.origins = [graph.origin(n) for n in self.nodes]
        # tuples: one per node, which the cyclic collector stops tracking (lists it walks at every collection)
        self.io = graph.ios(self.nodes)  # as the graph's index read them from protobuf
        self.reads = [tuple([n for n in graph_module.node_reads(node, io.inputs) if n not in self.constants])
                      for node, io in zip(self.nodes, self.io)]
        self.cpu_reads = [self._importer.cpu_inputs(node) for node in self.nodes]  # planned from their data in a run
        self.never_maps = [self._runs_on_cpu(io.outputs) or self._importer.never_maps(node, self.static)
                           for node, io in zip(self.nodes, self.io)]
        self.output_names = [o.name for o in model.graph.output]
        self._entries: dict[tuple, PlanEntry] = {}
        self._fallbacks: dict[int, FallbackNode] = {}  # the entries of nodes placed on the CPU, by index

    def _placed_on_cpu(self, graph: EditableGraph) -> dict[str, Placement]:
        """The nodes the real EP runs on the CPU (its GetCapability, ``real_ep.place_nodes``), by first output."""
        nodes = graph.nodes
        ios = graph.ios(nodes)
        placements = place_nodes(nodes, ios, self.static, self.constants, {v.name for v in self.declared},
                                 opset_versions(self.header), RELEASES[self.qdq_rules or DEFAULT_RELEASE].kernels)
        return {io.outputs[0]: p for io, p in zip(ios, placements) if not p.on_dml and io.outputs}

    def _runs_on_cpu(self, outputs: Sequence[str]) -> bool:
        return bool(outputs) and outputs[0] in self.on_cpu

    def _maps_by_type(self, node: onnx.NodeProto, made: dict | None = None) -> bool:
        """Whether ``node`` runs on DirectML, judged before any run as the DML EP's partitioning
        judges it: by element types and ranks (unknown dimensions taken as 1, which any broadcast
        accepts). A node whose input ranks are unknown is not fused, nor one the real EP runs on the CPU."""
        if self._runs_on_cpu(node.output):
            return False
        infos = {}
        known = ChainMap(made, self.static) if made else self.static  # ``made``: the values a pass is making (ChainMaps are slow)
        for name in node.input:
            info = known.get(name)
            if name and name not in self.constants:
                if info is None or info.dtype is None or info.shape is None:
                    return False
                infos[name] = ValueInfo(name, info.dtype, tuple(1 if d is None else d for d in info.shape))
        return self._importer.maps(node, node_values(graph_module.node_io(node), infos, known))

    def entry(self, index: int, values: Mapping[str, ValueInfo], data: Mapping[str, Any] | None = None) -> PlanEntry:
        """Node ``index`` planned for the types and shapes of its inputs (``values`` holds at least
        every name in ``reads[index]``) and, where a run gives them in ``data``, the values of its
        required CPU inputs (a Reshape's computed shape); made once per distinct signature."""
        fallback = self._fallbacks.get(index)
        if fallback is not None:  # left to the CPU by the real EP, or an op dml_ep does not import: whatever the shapes
            return fallback
        node, io = self.nodes[index], self.io[index]
        if self._runs_on_cpu(io.outputs) or not self._importer.registered(node):  # a FallbackNode whatever the shapes: no signature
            made = self._plan_node(node, io, self.origins[index], {})
            if isinstance(made, FallbackNode):
                self._fallbacks[index] = made
            return made
        reads = self.reads[index]
        signature: list = [index]  # flat: a tuple per read would be one more object a node for the collector
        for name in reads:
            info = values[name]
            signature += (info.dtype, info.shape)
        key = tuple(signature)
        run_data = None
        if self.cpu_reads[index] and data is not None and all(n in data for n in self.cpu_reads[index]):
            run_data = {n: np.asarray(data[n]) for n in self.cpu_reads[index]}
            key += tuple(array.tobytes() for array in run_data.values())
        entry = self._entries.get(key)
        if entry is None:
            inputs = {n: values[n] for n in reads}
            entry = self._entries[key] = self._plan_node(node, io, self.origins[index], inputs, run_data)
            if isinstance(entry, FallbackNode) and entry.kind in CPU_CLASSES:
                self._fallbacks[index] = entry
        return entry

    def _plan_node(self, node: onnx.NodeProto, io: graph_module.NodeIO, origin, inputs: dict[str, ValueInfo],
                   run_data: dict | None = None) -> PlanEntry:
        placed = self.on_cpu.get(io.outputs[0]) if io.outputs else None
        if placed is not None:
            if set(origin.rules) - {INLINING} and placed.kind == "no-kernel":
                raise RealEpError(
                    f"onnxruntime {self.qdq_rules}'s QDQ rule ({origin.rule}) makes {node.op_type} for a DML node, "
                    "and the DML EP has no kernel for it: the real EP fails at session initialization "
                    "(onnxruntime issue #26882, fixed in 1.24)", node=node)
            reason = f"{placed.reason}; {ON_CPU}"
            return FallbackNode(node, f"{reason} ({origin.note})" if origin.note else reason, origin, placed.kind)
        values = node_values(io, inputs, self.static) if self._importer.registered(node) else self.static  # else its output's type alone
        entry = self._importer.plan_node(node, origin, values, run_data, io)
        if isinstance(entry, DmlNode):
            entry.input_shapes = {field: inputs[b].shape for field, b in entry.inputs.items() if isinstance(b, str)}
        return entry

    def plan(self, values: dict[str, ValueInfo], assumed: dict[str, int] | None = None) -> Plan:
        """The plan for known ``values`` (graph inputs and node outputs): every node whose inputs
        are all known, in order; the others are listed as ``pending`` (their shapes come with a run)."""
        entries, pending = [], []
        for index, node in enumerate(self.nodes):
            infos = [values.get(n) for n in self.reads[index]]
            if all(info is not None and (info.known or info.dtype is None and info.type) for info in infos):
                entries.append(self.entry(index, values))
            else:
                pending.append(node)
        return self.plan_of(entries, values, pending, assumed)

    def plan_of(self, entries: list[PlanEntry], values: dict[str, ValueInfo], pending=(), assumed=None) -> Plan:
        """A Plan of ``entries``, with the values they were planned from (and the constants)."""
        values = {**{name: value_info_of(name, array) for name, array in self.constants.items()}, **values}
        inputs = [values[v.name] for v in self.declared]
        outputs = [values.get(name) or self.static[name] for name in self.output_names]
        return Plan(entries, self.feature_level, inputs, outputs, values, self.constants, self.qdq_rules,
                    pending=list(pending), assumed=assumed or {})

    def plan_for_shapes(self, input_shapes: dict[str, tuple] | None = None) -> Plan:
        """The plan onnxruntime's inference allows before a run, for these input shapes (declared
        shapes by default; a symbolic dimension not given is assumed 1, and ``Plan.assumed`` says so).
        Nodes whose shapes depend on data stay pending; so do those whose shapes depend on the inputs
        where onnxruntime's inference refuses these shapes inside a subgraph (``Plan.refused`` says why)."""
        shapes, assumed = {}, {}
        for value in self.declared:
            if input_shapes and value.name in input_shapes:
                shapes[value.name] = tuple(input_shapes[value.name])
            elif value.type.HasField("tensor_type"):
                for dim in graph_module.symbolic_dims(value):
                    assumed[dim] = 1
                shapes[value.name] = graph_module.declared_shape(value)
        try:
            values, refused = self._values_at(shapes) if input_shapes or assumed else (self.static, None)
            if self._derived and values is not self.static:
                values = {**values, **derived_infos(self._derived, values)}
            plan = self.plan(values, assumed)
        except (NodeError, InferenceRefusedError) as error:
            if assumed:  # the error may be the assumption's: say so
                sizes = ", ".join(f"{dim}={size}" for dim, size in assumed.items())
                if isinstance(error, InferenceRefusedError):  # the model is valid for some shapes: onnxruntime refused these
                    error.args = (f"onnxruntime's shape inference refuses the symbolic dimensions taken as {sizes} (give the input "
                                  f"shapes you run with): {error.reason}",)
                else:
                    error.args = (f"{error} (planned with the symbolic dimensions taken as {sizes}: give the input shapes you run with)",)
            elif isinstance(error, InferenceRefusedError):  # onnxruntime loaded the model as given: the shapes are what it refuses
                given = ", ".join(f"{name}={list(shape)}" for name, shape in shapes.items())
                error.args = (f"onnxruntime's shape inference refuses the input shapes {given}: {error.reason}",)
            raise
        plan.refused = refused
        return plan

    def _values_at(self, shapes: dict[str, tuple]) -> tuple[dict[str, ValueInfo], str | None]:
        """Every value as onnxruntime's inference knows it with the inputs pinned at ``shapes``, and
        None. Where it refuses those shapes inside a subgraph (a branch the run may never take), the
        values as it knows them loading the model as given, the inputs at ``shapes``, and its
        message: the values that depend on the inputs have open dimensions, so the nodes reading
        them are planned when run."""
        try:
            return static_values(self._rewritten, shapes), None
        except InferenceRefusedError as error:
            if not error.in_subgraph:
                raise
            return {**self.static, **{name: self.static[name]._replace(shape=tuple(shape)) for name, shape in shapes.items()}}, error.reason


def node_values(io: graph_module.NodeIO, given: Mapping[str, ValueInfo], known: Mapping[str, ValueInfo]) -> dict[str, ValueInfo]:
    """The infos an importer reads of a node (``io``, its inputs and outputs): ``given`` over ``known``.
    A dict of the node's own names, where a ChainMap's lookups cost more than the import."""
    values = {name: known[name] for name in (*io.inputs, *io.outputs) if name in known}
    values.update(given)
    return values


def onnxruntime_rewrites(graph: EditableGraph, qdq_rules: str | None, provider: str, optimization_level: int, int8_allowed: bool,
                         matmul_nbits_accuracy_level: int = MATMUL_NBITS_ACCURACY_LEVEL) -> None:
    """The rewrites onnxruntime makes to a graph before the EPs take their nodes, in its order, as
    far as ``optimization_level`` allows: constant folding, the release's QDQ rules (None: off),
    MatMulIntegerToFloat fusion, and for the DML EP its float fusions."""
    release = RELEASES[qdq_rules or DEFAULT_RELEASE]
    constant_nodes_to_initializers(graph)  # as onnxruntime builds its graph, whatever the level
    if optimization_level >= 1:
        constant_folding(graph, skip_dequantize_linear=qdq_rules is not None)
    if qdq_rules is not None and optimization_level >= 1:
        qdq_transformer(graph, release.qdq_rules, provider, int8_allowed, level=optimization_level,
                        matmul_nbits_accuracy_level=matmul_nbits_accuracy_level)
    if optimization_level >= 2:
        matmul_integer_to_float_fusion(graph, release, provider, graph.loaded)
    if provider == DML and optimization_level >= 1:
        onnxruntime_fusions(graph, optimization_level, qdq=qdq_rules is not None, taken_whole=_taken_by_dml(graph, release.kernels))


def _taken_by_dml(graph: EditableGraph, release: str):
    """Of the function ops the CPU session would inline, those the real EP's GetCapability takes
    (typed as onnxruntime loaded the model): onnxruntime inlines only a node no EP took."""
    def taken(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        placements = place_nodes(nodes, graph.ios(nodes), graph.loaded, graph.constants, graph.graph_inputs,
                                 opset_versions(graph.model), release)
        return [node for node, placement in zip(nodes, placements) if placement.on_dml]
    return taken


def plan_model(model: onnx.ModelProto, feature_level=DEFAULT_FEATURE_LEVEL, input_shapes=None, *,
               qdq_rules: str | None = DEFAULT_RELEASE, provider: str = DML, optimization_level: int = ALL_OPTIMIZATIONS) -> Plan:
    """Plan a checked model for ``input_shapes`` (see :meth:`Planner.plan_for_shapes`).
    ``qdq_rules`` names the onnxruntime release whose rewrites apply (see
    :data:`dml_ep.passes.RELEASES`); None turns its QDQ rules off, as ``session.disable_quant_qdq=1`` does.
    ``provider=CPU`` plans the graph onnxruntime's CPU EP runs instead (its rules, no DML fusion),
    which compare uses to explain the differences between two onnxruntime configurations."""
    return Planner(model, feature_level, qdq_rules=qdq_rules, provider=provider,
                   optimization_level=optimization_level).plan_for_shapes(input_shapes)
