"""The names a graph's nodes use, and fresh names: none that a node, graph input or initializer uses.

A fresh name is the first of ``base``, ``base_1``, ``base_2``, ... that nothing uses. Uses by nodes
are counted, so a name becomes free again when the last node using it goes, as a scan of the graph
would find; graph inputs and initializers are looked up where they are kept (a pass may add an
initializer directly), and stay. Each base remembers where its last search stopped, so that the
k-th name made from one base (EnsureUniqueDQForNodeUnit makes one per consumer of a shared DQ)
does not try the k - 1 before it again; a freed name moves that point back.
"""

from __future__ import annotations

import re
from typing import Container, Iterable

_SUFFIXED = re.compile(r"(.*)_([1-9][0-9]*)")


class Names:
    """How many times nodes use each name; :meth:`fresh` makes one that nothing uses."""

    def __init__(self, *kept: Container[str]):
        self._kept = kept  # names taken for good (graph inputs, initializers): they may grow, never shrink
        self._uses: dict[str, int] = {}
        self._searched: dict[str, int] = {}  # base -> the suffix its last search stopped at (0: the base itself)

    def add(self, inputs: Iterable[str], outputs: Iterable[str], node_name: str) -> None:
        """Count a node's uses (asked for every node of a model: a loop of its own)."""
        uses = self._uses
        for name in inputs:
            uses[name] = uses.get(name, 0) + 1
        for name in outputs:
            uses[name] = uses.get(name, 0) + 1
        uses[node_name] = uses.get(node_name, 0) + 1

    def remove(self, inputs: Iterable[str], outputs: Iterable[str], node_name: str) -> None:
        for name in (*inputs, *outputs, node_name):
            self._uses[name] -= 1
            if not self._uses[name]:
                del self._uses[name]
                self._freed(name)

    def fresh(self, base: str) -> str:
        """The first name from ``base`` that nothing uses (not reserved: it is used once added)."""
        count = self._searched.get(base, 0)
        name = f"{base}_{count}" if count else base
        while name in self._uses or any(name in names for names in self._kept):
            count += 1
            name = f"{base}_{count}"
        self._searched[base] = count
        return name

    def _freed(self, name: str) -> None:
        if name in self._searched:
            self._searched[name] = 0
        match = _SUFFIXED.fullmatch(name)
        if match and int(match[2]) < self._searched.get(match[1], 0):
            self._searched[match[1]] = int(match[2])
