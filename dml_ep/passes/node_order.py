"""The order of a graph's nodes while passes insert, replace and remove them, each edit O(1).

A list would make every edit find its place by a scan, and planning a model whose thousands of
QDQ groups are all rewritten quadratic. Instead each node has a key, a tuple of ints, and the
nodes in order are the nodes sorted by key. The user's node ``i`` has ``(i, 0)``; for a node keyed
``P + (0,)``, a node inserted before it gets ``P + (-1, n, 0)`` and one inserted after it
``P + (1, -n, 0)``, where ``n`` counts insertions: tuples compare element by element, so each new
key falls between its anchor and the node next to it, and of the nodes inserted before (after) one
anchor, the newest is the nearest to it. A replacement takes its target's key.
"""

from __future__ import annotations

import onnx


class NodeOrder:
    """Nodes in topological order, known by identity (protobuf's ``==`` compares contents)."""

    _keys: dict[int, tuple[int, ...]]
    _nodes: dict[int, onnx.NodeProto]
    _inserted: int
    _sorted: list[onnx.NodeProto] | None

    def __init__(self, nodes: list[onnx.NodeProto]):
        self.reset(nodes)

    def __contains__(self, node: onnx.NodeProto) -> bool:
        return id(node) in self._keys

    def key(self, node: onnx.NodeProto) -> tuple[int, ...]:
        """A key that sorts ``node`` into its place among the others."""
        return self._keys[id(node)]

    def nodes(self) -> list[onnx.NodeProto]:
        """The nodes in order (sorted once per round of edits)."""
        if self._sorted is None:
            self._sorted = sorted(self._nodes.values(), key=self.key)
        return list(self._sorted)

    def reset(self, nodes: list[onnx.NodeProto]) -> None:
        """Put the same nodes in a new order."""
        self._keys = {id(node): (index, 0) for index, node in enumerate(nodes)}
        self._nodes = {id(node): node for node in nodes}
        self._inserted = 0
        self._sorted = list(nodes)

    def insert_before(self, at: onnx.NodeProto, new: onnx.NodeProto) -> None:
        self._inserted += 1
        self._put(new, self._keys[id(at)][:-1] + (-1, self._inserted, 0))

    def insert_after(self, at: onnx.NodeProto, new: onnx.NodeProto) -> None:
        self._inserted += 1
        self._put(new, self._keys[id(at)][:-1] + (1, -self._inserted, 0))

    def replace(self, at: onnx.NodeProto, new: onnx.NodeProto) -> None:
        key = self._keys[id(at)]
        self.remove(at)
        self._put(new, key)

    def remove(self, node: onnx.NodeProto) -> None:
        del self._keys[id(node)], self._nodes[id(node)]
        self._sorted = None

    def _put(self, node: onnx.NodeProto, key: tuple[int, ...]) -> None:
        self._keys[id(node)] = key
        self._nodes[id(node)] = node
        self._sorted = None
