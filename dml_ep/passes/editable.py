"""A graph the passes edit in place, and where each of its nodes came from in the user's model.

Nodes are kept in topological order (a replacement takes its target's place, so the order stays
valid) by :class:`NodeOrder`, and indexed by the values they read and write by :class:`NodeIndex`:
every query and edit costs the size of the nodes it touches, so that a pass stays linear in the
size of the graph however many of its nodes it rewrites. Every node carries an :class:`Origin`:
the rule that made it and the nodes of the user's file it stands for, so that plans, reports and
errors name what the user wrote.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import onnx

from ..core import graph as graph_module
from ..ort.inference import static_values
from .names import Names
from .node_index import NodeIndex
from .node_order import NodeOrder


@dataclasses.dataclass(frozen=True, slots=True)  # slots: every node has one
class Origin:
    """The rules that made a node (in the order they applied; none for a node as the user wrote
    it) and the user's nodes it stands for, in graph order."""

    rules: tuple[str, ...]
    nodes: tuple[onnx.NodeProto, ...]
    note: str | None = None  # why no QDQ rule fused it
    cpu_rule: str | None = None  # a QDQ rule for CPU nodes only that would fuse it on the CPU EP
    whole: onnx.NodeProto | None = None  # of the parts of a DirectML graph (operators/dml_graph.py): the node of onnxruntime's graph they split

    @property
    def rule(self) -> str | None:
        return " + ".join(self.rules) or None


class EditableGraph:
    """The nodes of a model, their constants, element types and origins, for passes to rewrite."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.source = graph_module.skeleton(model)  # the user's model without its weights: origins name its nodes
        order, ios = graph_module.topological_order(self.source.graph)
        nodes = graph_module.detached(order)  # the passes' to edit
        self.constants = graph_module.constants(model.graph)
        self.graph_outputs = {o.name for o in model.graph.output}
        self.graph_inputs = {i.name for i in model.graph.input}
        self.origins = {id(n): Origin((), (original,)) for n, original in zip(nodes, order)}
        self.added_constants: list[str] = []
        self._order = NodeOrder(nodes)
        self._index = NodeIndex(Names(self.graph_inputs, self.constants))
        for node, io in zip(nodes, ios):  # copies: their inputs and outputs are the originals'
            self._index.add(node, io)
        self.edited = False  # whether a pass changed the graph: onnxruntime's view of it then changes too

    @functools.cached_property
    def loaded(self) -> dict[str, graph_module.ValueInfo]:
        """Every value as onnxruntime sees it loading the model as given (ort_inference.static_values):
        loading is where onnxruntime refuses an invalid model, so the planner asks first."""
        return static_values(self.source)

    @functools.cached_property
    def types(self) -> dict[str, np.dtype]:
        """Element types of the values: onnxruntime's, which knows contrib ops too."""
        return {name: info.dtype for name, info in self.loaded.items() if info.dtype is not None}

    @property
    def nodes(self) -> list[onnx.NodeProto]:
        """The nodes in topological order (a new list: edit the graph through its methods)."""
        return self._order.nodes()

    # --- queries ---------------------------------------------------------------------------

    def producer(self, name: str) -> onnx.NodeProto | None:
        return self._index.producer(name)

    def has_op(self, *op_types: str) -> bool:
        """Whether some node has one of these op types, in any domain: where none has, a pass that
        starts from one need not walk the graph."""
        return self._index.has_op(*op_types)

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        """The nodes reading ``name`` in order, once per input slot (a node reading it twice is listed twice)."""
        return sorted(self._index.readers(name), key=self._order.key)

    def dtype(self, name: str) -> np.dtype | None:
        if name in self.constants:
            return self.constants[name].dtype
        return self.types.get(name)

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name) if name else None

    def opset(self, domain: str = "") -> int:
        """The model's opset version of ``domain`` ("" and "ai.onnx" alike)."""
        domains = ("", "ai.onnx") if domain in ("", "ai.onnx") else (domain,)
        return next((o.version for o in self.model.opset_import if o.domain in domains), 1)

    def __contains__(self, node: onnx.NodeProto) -> bool:
        """Whether ``node`` (this very object: protobuf's == compares contents) is still in the graph."""
        return node in self._order

    def io(self, node: onnx.NodeProto) -> graph_module.NodeIO:
        """A node's inputs and outputs as the index read them (kept up to date with every edit)."""
        return self._index.io(node)

    def ios(self, nodes: list[onnx.NodeProto]) -> list[graph_module.NodeIO]:
        """:meth:`io` of each of ``nodes``, in one call (the planner asks for every node's)."""
        return self._index.ios(nodes)

    def origin(self, node: onnx.NodeProto) -> Origin:
        return self.origins[id(node)]

    # --- edits -----------------------------------------------------------------------------

    def replace(self, removed: list[onnx.NodeProto], new: onnx.NodeProto | None, rule: str, at: onnx.NodeProto) -> None:
        """Remove ``removed`` and put ``new`` where ``at`` was; ``new`` stands for them all."""
        self.edited = True
        if new is not None:
            origins = [self.origins[id(n)] for n in sorted(removed, key=self._order.key)]
            rules = tuple(dict.fromkeys(r for o in origins for r in o.rules)) + (rule,)
            self.origins[id(new)] = Origin(rules, tuple(n for o in origins for n in o.nodes))
            self._index.remove(at)
            self._order.replace(at, new)
        for node in {id(n): n for n in removed if n is not at or new is None}.values():
            self._index.remove(node)
            self._order.remove(node)
        if new is not None:
            self._index.add(new)

    def note(self, node: onnx.NodeProto, text: str, cpu_rule: str | None = None) -> None:
        """Record why no rule fused ``node`` (and the CPU-only rule that would have)."""
        self.origins[id(node)] = dataclasses.replace(self.origins[id(node)], note=text, cpu_rule=cpu_rule)

    def insert_before(self, at: onnx.NodeProto, new: onnx.NodeProto, origin: Origin, dtype: np.dtype | None) -> None:
        """Add ``new`` right before ``at`` (it must read nothing ``at`` makes)."""
        self._order.insert_before(at, new)
        self._added(new, origin, dtype)

    def insert_after(self, at: onnx.NodeProto, new: onnx.NodeProto, origin: Origin, dtype: np.dtype | None) -> None:
        """Add ``new`` right after ``at`` (it reads what ``at`` reads)."""
        self._order.insert_after(at, new)
        self._added(new, origin, dtype)

    def _added(self, new: onnx.NodeProto, origin: Origin, dtype: np.dtype | None) -> None:
        self.edited = True
        self._index.add(new)
        self.origins[id(new)] = origin
        if dtype is not None:
            self.types[new.output[0]] = dtype

    def unique_name(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ...: the first that no node, graph input or constant uses."""
        return self._index.names.fresh(base)

    def add_constant(self, base: str, array: np.ndarray) -> str:
        """A new initializer named after ``base``; returns its name."""
        name = self.unique_name(base)
        self.put_constant(name, array)
        return name

    def put_constant(self, name: str, array: np.ndarray) -> None:
        """An initializer named ``name`` (a folded node's output keeps its name)."""
        self.edited = True
        self.constants[name] = array
        self.added_constants.append(name)

    def reorder(self, nodes: list[onnx.NodeProto]) -> None:
        """The same nodes in ``nodes``' order (a topological one)."""
        self._order.reset(nodes)

    def changed(self, node: onnx.NodeProto) -> None:
        """Say that ``node`` was edited in place (its inputs or outputs rewired)."""
        self.edited = True
        self._index.remove(node)
        self._index.add(node)

    # --- result ----------------------------------------------------------------------------

    def to_model(self) -> onnx.ModelProto:
        """The rewritten model, the nodes in order, with the constants the passes added; its weights
        are not copied into it (see ``graph.skeleton``): their values are in ``constants``."""
        model = graph_module.skeleton(self.model, [onnx.numpy_helper.from_array(self.constants[n], n) for n in self.added_constants], self.nodes)
        imported = {o.domain for o in model.opset_import}
        if "com.microsoft" not in imported and any(n.domain == "com.microsoft" for n in self.nodes):
            model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
        return model

