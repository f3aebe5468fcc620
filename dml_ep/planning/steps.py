"""A run's steps, which planning makes and the executor runs (``dml_ep.runtime.executor``): each
node's plan entry, or a partition of fallback nodes that one onnxruntime session runs, with the
values no later step reads.

A run on feeds of new shapes plans each node when the run reaches it, for the values that reach it
(a symbolic dimension, a shape computed from data); its steps then make a :class:`Trace`, which a
run on feeds of the same shapes replays without planning, checking only what may follow the data
(a node planned from a value the run computes, a fallback node's output shapes). Where every shape
is static, the plan made at load is the first run's trace (:meth:`Schedule.trace_of`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import ChainMap
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from ..core.graph import NodeIO, ValueInfo, value_info_of
from ..operators.nodes import DmlNode, PlanEntry
from .plan import Plan, macs_inputs
from .planner import Planner


class Step(NamedTuple):
    """One step of a run: a node's entry, or a partition of fallback nodes (``entry`` its first's),
    and the values no later step reads."""

    node_index: int  # a partition's first node's
    group: tuple[int, ...] | None
    entry: PlanEntry | None  # None: planned when the run reaches it
    freed: Sequence[str]
    late: bool  # planned or checked when the run reaches it: a run planned as it goes, what a replay checks (:class:`Trace`)


class ShapesFollowData(Exception):
    """A replayed run met a node whose entry, or a fallback output whose shape, is not its trace's."""


@dataclasses.dataclass
class Trace:
    """What a run did, to replay on feeds of the same shapes: its steps, the plan entries and value
    infos of its plan (made when asked for), and the infos of the feeds it was planned for. A
    replay's late steps are a node planned from data the run computes, planned again (it must give
    the same entry), and a fallback's, whose outputs must have the shapes the trace has."""

    planner: Planner
    feeds: dict[str, ValueInfo]
    steps: list[Step]
    entries: list[PlanEntry]
    infos: dict[str, ValueInfo]
    plan: Plan | None = None

    def fits(self, feeds: Mapping[str, Any]) -> bool:
        """Whether ``feeds`` have the names, types and shapes of this run's."""
        return len(feeds) == len(self.feeds) and all(_as_planned(value, self.feeds.get(name)) for name, value in feeds.items())

    def entry(self, step: Step, values: Mapping[str, Any]) -> PlanEntry:
        """A late step's entry, as the replay reaches it (``values``: the run's)."""
        index, group, entry, _, _ = step
        assert entry is not None, "a trace's steps have their entries"
        if group is None and self.planner.cpu_reads[index] and self.planner.entry(index, self.infos, values) is not entry:
            raise ShapesFollowData  # planned from data the run computes, which changed it
        return entry

    def ran(self, step: Step, entry: PlanEntry, results: Mapping[str, Any]) -> PlanEntry:
        """``entry``, once a late step ran: a fallback's outputs have the shapes the trace has."""
        if not isinstance(entry, DmlNode) and not all(_as_planned(value, self.infos[name]) for name, value in results.items()):
            raise ShapesFollowData
        return entry

    def traced(self) -> Trace:
        """The run's trace: this one, replayed."""
        return self


def _as_planned(value, info: ValueInfo | None) -> bool:
    """Whether a value a run made has the element type and shape of ``info``, a trace's: of a run,
    or of onnxruntime's inference, whose type strings the run's values do not carry."""
    made = value_info_of("", value)
    return info is not None and made.dtype == info.dtype and made.shape == info.shape and (made.dtype is not None or made.type == info.type)


class Schedule:
    """The steps of a planner's runs: the fallback partitions (:func:`fallback_partitions`), what
    each step frees, a run planned as it goes (:meth:`tracing`), and the trace of the plan made at
    load (:meth:`trace_of`)."""

    def __init__(self, planner: Planner):
        self.planner = planner
        self.partitions = fallback_partitions(planner)
        self.last_read: dict[str, int] = {}  # value name -> the index of the last node reading it
        for index, reads in enumerate(planner.reads):
            for name in reads:
                self.last_read[name] = index
        self.graph_outputs = set(planner.output_names)
        self.kept = self.graph_outputs | self.last_read.keys()  # the results a run keeps (until their last reader)
        freed = _last_readers(planner, self.partitions, self.last_read)
        members = {member for group in self.partitions.values() for member in group[1:]}  # run at their partition's first node's step
        partitions = self.partitions
        # each step's node index, partition and values freed
        self._slots = [(index, partitions.get(index), freed.get(index, ())) for index in range(len(planner.nodes)) if index not in members]

    @functools.cached_property
    def _steps(self) -> list[Step]:
        """The steps of a run planned as it goes, which frees each value after its last reader."""
        return [Step(index, group, None, freed, True) for index, group, freed in self._slots]

    def tracing(self, feeds: Mapping[str, Any], values: Mapping[str, Any], keep_all: bool) -> Tracing:
        """A run on ``values`` (``feeds`` and the constant graph outputs), planned as it goes; with
        ``keep_all`` each node alone (no partition), nothing freed."""
        steps = [Step(index, None, None, (), True) for index in range(len(self.planner.nodes))] if keep_all else self._steps
        return Tracing(self.planner, steps, feeds, values)

    def trace_of(self, plan: Plan) -> Trace | None:
        """The steps a run on feeds of ``plan``'s input shapes takes, read from ``plan`` (made at load
        for the declared shapes), so that the first run replays them instead of planning every node
        again. None where a run may plan otherwise: shapes pending or assumed, a node planned from
        data the run computes, an output whose shape onnxruntime's inference leaves open."""
        planner = self.planner
        if plan.pending or plan.assumed or len(plan.entries) != len(planner.nodes) or any(planner.cpu_reads):
            return None
        if not all(value.known for value in plan.inputs):  # a sequence fed, say: planned at the run
            return None
        if not _outputs_as_planned(plan.entries, planner.io, plan.values):
            return None
        steps = traced_steps(planner, self._slots, plan.entries)
        return Trace(planner, {value.name: value for value in plan.inputs}, steps, plan.entries, plan.values, plan)

    def read_after(self, group: tuple[int, ...], made: list[str]) -> list[str]:
        """Of the values a partition's nodes make, those read after it runs: by a node past its last
        member or between its members (a value's readers come after its producer), as a graph
        output, or for a MAC count (:func:`dml_ep.planning.plan.macs_inputs`); all of them where
        that is none (a partition of dead nodes still gives them: onnxruntime runs a graph with
        outputs only)."""
        planner, last = self.planner, group[-1]
        members = set(group)
        needed = {name for index in range(group[0], last) if index not in members for name in planner.reads[index]}
        needed.update(name for index in group for name in macs_inputs(planner.nodes[index]))
        needed.update(name for name in made if name in self.graph_outputs or self.last_read.get(name, -1) > last)
        return [name for name in made if name in needed] or made


def _outputs_as_planned(entries: list[PlanEntry], ios: list[NodeIO], values: Mapping[str, ValueInfo]) -> bool:
    """Whether the nodes' outputs (``ios``: the nodes' inputs and outputs) have the shapes their
    readers were planned for: known to onnxruntime's inference (``values``), and a DML node's its entry's."""
    made: Any
    for entry, io in zip(entries, ios):
        if isinstance(entry, DmlNode):
            made = zip(entry.outputs, (entry.output_shape, *(shape for _, shape in entry.more_outputs)))
        else:  # a fallback's: as onnxruntime's inference knows it (a replay checks it)
            made = ((name, None) for name in io.outputs if name)
        for name, shape in made:
            info = values.get(name)
            if info is None or not info.known or shape is not None and info.shape != shape:
                return False
    return True


def traced_steps(planner: Planner, slots: Iterable[tuple[int, tuple[int, ...] | None, Sequence[str]]],
                 entries: Sequence[PlanEntry] | Mapping[int, PlanEntry]) -> list[Step]:
    """The steps of a trace: each slot (a step's node index, partition and values freed) with its
    entry (``entries``, by node index), late where a replay must check it: a fallback's outputs, a
    node planned from data the run computes."""
    cpu_reads = planner.cpu_reads
    return [Step(index, group, entries[index], freed, not isinstance(entries[index], DmlNode) or group is None and cpu_reads[index] != ())
            for index, group, freed in slots]


class Tracing:
    """A run planned as it goes: each step's entry planned for the values that reach it, and the
    steps taken making the run's trace (:meth:`traced`)."""

    def __init__(self, planner: Planner, steps: list[Step], feeds: Mapping[str, Any], values: Mapping[str, Any]):
        self.planner = planner
        self.steps = steps  # to run, their entries planned as the run reaches them
        self.infos = {name: value_info_of(name, value) for name, value in values.items()}  # the run's values' infos, as it makes them
        self._feeds = {name: self.infos[name] for name in feeds}
        self._entries: dict[int, PlanEntry] = {}  # by node index: a partition runs before the nodes between its members

    def entry(self, step: Step, values: Mapping[str, Any]) -> PlanEntry:
        """A step's entry, as the run reaches it (``values``: the run's, which give the data a node
        may be planned from). A partition's first node reads values made before it: its entry is
        the same planned now or once the partition ran, when its other nodes are (:meth:`ran`)."""
        index, group, _, _, _ = step
        planner = self.planner
        return planner.entry(index, self.infos, values) if group is None else planner.entry(index, ChainMap(self.infos, planner.static))

    def ran(self, step: Step, entry: PlanEntry, results: Mapping[str, Any]) -> PlanEntry:
        """Take what a step gave: its values' infos, and its entries (a partition's nodes planned
        once it ran) into the run's trace. The step's entry (a partition's first node's)."""
        index, group, _, _, _ = step
        infos = self.infos
        infos.update((name, value_info_of(name, value)) for name, value in results.items())
        if group is None:
            self._entries[index] = entry
            return entry
        known = ChainMap(infos, self.planner.static)  # its members' inner values are not fetched: their static types stand in
        self._entries.update((member, self.planner.entry(member, known)) for member in group)
        return self._entries[index]

    def traced(self) -> Trace:
        """The run's trace, once it ran."""
        entries, planner = self._entries, self.planner
        steps = traced_steps(planner, ((index, group, freed) for index, group, _, freed, _ in self.steps), entries)
        return Trace(planner, self._feeds, steps, [entries[index] for index in sorted(entries)], self.infos)


def fallback_partitions(planner: Planner) -> dict[int, tuple[int, ...]]:
    """Groups of two or more nodes that fall back whatever their shapes, each run as one onnxruntime
    session at its first node's step, keyed by that node's index. A node joins the open group while
    it reads only values made before that step or by the group's nodes, so a group never waits on a
    DirectML node that waits on it: consecutive such nodes group, connected or not, and so do the
    independent ones of a wide graph with DirectML nodes between them (10,000 outputs, each of a
    fallback node of its own: one session, not thousands).
    """
    groups: dict[int, tuple[int, ...]] = {}
    group: list[int] = []
    later: set[str] = set()  # what nodes outside the open group make after its first node
    for index, reads in enumerate(planner.reads):
        if not planner.never_maps[index]:
            if group:
                later.update(name for name in planner.io[index].outputs if name)
            continue
        if not group or not later.isdisjoint(reads):
            if len(group) > 1:
                groups[group[0]] = tuple(group)
            group, later = [], set()
        group.append(index)
    if len(group) > 1:
        groups[group[0]] = tuple(group)
    return groups


def _last_readers(planner: Planner, partitions: dict[int, tuple[int, ...]], last_read: dict[str, int]) -> dict[int, list[str]]:
    """For each step of a run, the intermediate values no later step reads (graph outputs stay).
    A partition runs whole at its first node's step, so its members read at that step: a value is
    freed at the last step reading it, which for a member is its partition's (and a node between a
    partition's members may read it later than its last reader, ``last_read``, a member)."""
    step = list(range(len(planner.nodes)))
    for first, group in partitions.items():
        for member in group:
            step[member] = first
    last_step = {name: step[index] for name, index in last_read.items()}
    for group in partitions.values():
        for index in range(group[0] + 1, group[-1]):
            for name in planner.reads[index]:
                last_step[name] = max(last_step[name], step[index])
    keep = set(planner.output_names)
    readers: dict[int, list[str]] = {}
    for name, index in last_step.items():
        if name not in keep:
            readers.setdefault(index, []).append(name)
    return readers
