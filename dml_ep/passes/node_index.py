"""Which node writes each value and which nodes read it, kept up to date node by node.

Rebuilding the index after every edit made a pass over a model with thousands of QDQ groups
quadratic; here an edit costs the size of the nodes it adds, removes or rewires. Each node is
taken out of the index as it was put in (its names are remembered), so that a node rewired in
place is re-indexed correctly however it was edited.
"""

from __future__ import annotations

import onnx

from ..core import graph as graph_module
from .names import Names


class NodeIndex:
    """Producers and readers of each value name, the uses of every name (in ``names``), and how
    many nodes of each op type there are (a pass with nothing to start from skips its walk)."""

    def __init__(self, names: Names):
        self.names = names
        # id -> its inputs and outputs, the inputs with its subgraphs' outer-scope reads after them, its name and op type
        self._indexed: dict[int, tuple[graph_module.NodeIO, tuple[str, ...], str, str]] = {}
        self._op_types: dict[str, int] = {}
        self._producers: dict[str, onnx.NodeProto] = {}
        self._readers: dict[str, dict[int, onnx.NodeProto]] = {}

    def add(self, node: onnx.NodeProto, io: graph_module.NodeIO | None = None) -> None:
        """Index ``node`` (``io``: its inputs and outputs, where read already); the outer-scope values
        its subgraphs read count as its inputs (as in onnxruntime, whose graph has an edge for
        each): a rule must not fuse away a value an If branch reads."""
        io = io or graph_module.node_io(node)
        outer = graph_module.outer_scope_inputs(node)  # [] at once for a node without subgraphs
        inputs, outputs = ((*io.inputs, *outer) if outer else io.inputs), io.outputs
        node_name, op_type, key = node.name, node.op_type, id(node)
        self._indexed[key] = io, inputs, node_name, op_type
        self.names.add(inputs, outputs, node_name)
        self._op_types[op_type] = self._op_types.get(op_type, 0) + 1
        producers, readers = self._producers, self._readers
        for name in outputs:
            if name:
                producers[name] = node
        for name in inputs:
            if name:
                if name in readers:
                    readers[name][key] = node
                else:
                    readers[name] = {key: node}

    def remove(self, node: onnx.NodeProto) -> None:
        (_, outputs), inputs, node_name, op_type = self._indexed.pop(id(node))
        self.names.remove(inputs, outputs, node_name)
        self._op_types[op_type] -= 1
        if not self._op_types[op_type]:
            del self._op_types[op_type]
        for name in filter(None, outputs):
            if self._producers.get(name) is node:
                del self._producers[name]
        for name in set(filter(None, inputs)):  # a node may read one value in several slots
            readers = self._readers[name]
            readers.pop(id(node), None)
            if not readers:
                del self._readers[name]

    def io(self, node: onnx.NodeProto) -> graph_module.NodeIO:
        """The inputs and outputs ``node`` was indexed with."""
        return self._indexed[id(node)][0]

    def ios(self, nodes: list[onnx.NodeProto]) -> list[graph_module.NodeIO]:
        indexed = self._indexed
        return [indexed[id(node)][0] for node in nodes]

    def producer(self, name: str) -> onnx.NodeProto | None:
        return self._producers.get(name)

    def has_op(self, *op_types: str) -> bool:
        """Whether some node has one of these op types (in any domain)."""
        return any(op_type in self._op_types for op_type in op_types)

    def readers(self, name: str) -> list[onnx.NodeProto]:
        """The nodes reading ``name``, once per input slot, in no particular order."""
        return [node for node in self._readers.get(name, {}).values() for read in self._indexed[id(node)][1] if read == name]
