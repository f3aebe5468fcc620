"""Where the real DML EP runs every node, replayed from onnxruntime's sources, and the reason a plan gives.

The real EP's GetCapability (ExecutionProvider.cpp) takes a node when the release's kernel registry
has a kernel for it (``kernel_registry``), the kernel's support query accepts it
(``support_queries``), DirectML has a data type for each of its values
(DoesNodeContainSupportedDataTypes), and GetCpuPreferredNodes (fallback_cpu_capability.cc) does not
keep it on the CPU. :func:`place_nodes` replays that; the planner leaves every node the real EP runs
on the CPU to dml_ep's CPU fallback too, with the reason. A node the real EP runs on DirectML that
dml_ep does not model is a fallback that says so.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from typing import Collection, Mapping

import numpy as np
import onnx

from ..core.graph import NodeIO, ValueInfo, op_domain
from ..passes.editable import Origin
from .kernel_registry import Kernel, KernelMatch, find_kernel, type_name
from .support_queries import QueryContext, declined

# What the real EP does with a node dml_ep leaves to the CPU fallback: every fallback reason ends with one.
ON_DML = "on DirectML in the real EP, not modelled by dml_ep"
ON_DML_AS = "on DirectML in the real EP as DML_OPERATOR_{}, not modelled by dml_ep"
ON_CPU = "on the CPU in the real EP too"
# A required CPU input computed at run time: the real EP makes the kernel when it sees the value, dml_ep plans it from it.
PLANNED_WHEN_RUN = "on DirectML in the real EP, which makes its kernel from the value; dml_ep plans it when a run computes the value"
ASSIGNED_TO_DML = "the real EP assigns it to DirectML (no support query declines it) and fails creating the operator"
ON_DML_CPU_OUTPUT = ("the DML EP's own kernel in the real EP, which writes it to CPU memory with no DirectML operator "
                     "(DmlGraphSupport::NotSupported: it splits DirectML partitions); onnxruntime's CPU kernel writes the same values")
# ai.onnx ops whose DML EP kernel writes its outputs to CPU memory and joins no DirectML graph (the kernel table's rows with
# cpu_outputs and graph false: Shape.cpp, Size.cpp; SequenceLength's sequences dml_ep does not plan).
CPU_OUTPUT_OPS = frozenset({"Shape", "Size"})

# Why a node runs where it does, as inspect counts them: first the classes of nodes the real EP runs
# on the CPU, in the order GetCapability checks them, then those of nodes it runs on DirectML.
REASON_CLASSES = {
    "no-kernel": "no DML kernel for the op",
    "no-kernel-at-version": "no DML kernel at the node's since-version",
    "types": "no DML kernel for its types",
    "support-query": "declined by a support query",
    "data-type": "a value DirectML has no data type for",
    "cpu-preferred": "CPU-preferred (a shape computation)",
    "cpu-output": "the DML EP's own kernel, writing CPU memory (no DirectML operator)",
    "planned-when-run": "on DirectML, planned when run (a required CPU input computed at run time)",
    "not-modelled": "on DirectML in the real EP, not modelled by dml_ep",
    "modelled": "a DirectML operator dml_ep models",
    "no-dml-session": "the session has no DmlExecutionProvider",
}
CPU_CLASSES = ("no-kernel", "no-kernel-at-version", "types", "support-query", "data-type", "cpu-preferred", "no-dml-session")

# Where a node runs in the real EP, as pictures colour it: dml_ep models its DirectML operator; the
# real EP runs it on DirectML (or assigns it there) but dml_ep does not model it; or it runs on the CPU.
PLACEMENTS = ("modelled", "real-ep-dml", "cpu")

# DirectML's tensor data types, by onnxruntime type name (GetDmlDataTypeFromMlDataTypeNoThrow; bool is UINT8).
DML_DATA_TYPES = frozenset({"float", "float16", "double", "int4", "uint4", "int8", "uint8", "int16", "uint16",
                            "int32", "uint32", "int64", "uint64", "bool"})
# Ops whose sequence values the DML EP accepts (IsCpuOnDmlOperator, IsDmlSequenceOperator).
SEQUENCE_OPS = {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceLength", "SequenceErase",
                "SequenceInsert", "OptionalGetElement", "OptionalHasElement", "If", "ConcatFromSequence"}
# GetCpuPreferredNodes keeps a node on DirectML when an input has one of these types.
NEVER_CPU_PREFERRED = {"float16", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"}
SMALL_INITIALIZER = 100  # kSmallInitializerThreshold: elements


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the real EP runs one node: ``kind`` is "dml" or one of CPU_CLASSES, ``reason`` says why
    it runs on the CPU ("" on DirectML)."""

    kind: str
    reason: str = ""

    @property
    def on_dml(self) -> bool:
        return self.kind == "dml"


ON_DIRECTML = Placement("dml")  # one for every node on DirectML: a frozen dataclass costs a microsecond to make

def place_nodes(nodes: list[onnx.NodeProto], ios: list[NodeIO], values: Mapping[str, ValueInfo], constants: Mapping[str, np.ndarray],
                graph_inputs: Collection[str], opsets: Mapping[str, int], release: str) -> list[Placement]:
    """GetCapability of ``release``'s DML EP over ``nodes`` (in topological order; ``ios``, their
    inputs and outputs), typed by ``values``."""
    types = {name: type_name(info) for name, info in values.items()}
    types.update((name, type_name(ValueInfo(name, array.dtype, array.shape))) for name, array in constants.items())
    # read once for find_kernel and _unsupported_value; an omitted value ("", never a value's name) gets None
    signatures = [(tuple(map(types.get, io.inputs)), tuple(map(types.get, io.outputs))) for io in ios]
    matches = [find_kernel(n, opsets.get(op_domain(n.domain), 1), *signature, release)
               for n, signature in zip(nodes, signatures)]
    preferred = cpu_preferred(nodes, ios, matches, types, constants, graph_inputs)
    placements = []
    for index, (node, match) in enumerate(zip(nodes, matches)):
        if match.kernel is None:
            placements.append(Placement(match.failure, match.reason))
            continue
        why = _declined(node, match.kernel, values, types, release)
        if why:
            placements.append(Placement("support-query", f"{_name(node)}: {why}"))
        elif (value := _unsupported_value(node, match.kernel, types, *signatures[index])) is not None:
            placements.append(Placement("data-type", f"{_name(node)}: {value}, which DirectML has no data type for "
                                                     "(DoesNodeContainSupportedDataTypes)"))
        elif index in preferred:
            placements.append(Placement("cpu-preferred", f"{_name(node)}: CPU-preferred (GetCpuPreferredNodes): {preferred[index]}"))
        else:
            placements.append(ON_DIRECTML)
    return placements


def _name(node: onnx.NodeProto) -> str:
    return _op_name(node.domain, node.op_type)


def _op_name(domain: str, op_type: str) -> str:
    return f"{domain or 'ai.onnx'}::{op_type}"


def _declined(node: onnx.NodeProto, kernel: Kernel, values: Mapping[str, ValueInfo], types: Mapping[str, str | None],
              release: str) -> str | None:
    if kernel.query is None:
        return None

    def shape(name: str):
        info = values.get(name)
        return info.shape if name and info is not None else None

    context = QueryContext(node, tuple(types.get(n) if n else None for n in node.input), tuple(shape(n) for n in node.input),
                           tuple(types.get(n) if n else None for n in node.output), tuple(shape(n) for n in node.output), release)
    return declined(kernel.query, context)


def _unsupported_value(node: onnx.NodeProto, kernel: Kernel, types: Mapping[str, str | None], input_types: tuple,
                       output_types: tuple) -> str | None:
    """DoesNodeContainSupportedDataTypes, for a device with every DirectML data type (float64 included):
    the first value of the node DirectML cannot hold, described; None if it can hold them all (kept
    per op, kernel and value types, ``input_types`` and ``output_types`` as find_kernel reads them:
    :data:`_SUPPORTED`)."""
    if not kernel.cpu_inputs and DML_DATA_TYPES.issuperset(input_types) and DML_DATA_TYPES.issuperset(output_types):
        return None  # every value present and of a type DirectML holds: the common case, without a signature
    inputs = node.input
    cpu_names = {inputs[i] for i in kernel.cpu_inputs if i < len(inputs)}  # by name: a value in two slots
    signature = (node.op_type, tuple((t, n in cpu_names) if n else "" for t, n in zip(input_types, inputs)),
                 tuple(t if n else "" for t, n in zip(output_types, node.output)))  # an omitted value is not an untyped one
    if signature in _SUPPORTED:
        return None
    unsupported = _first_unsupported(node, kernel, types)
    if unsupported is None:
        _SUPPORTED.add(signature)
    return unsupported


_SUPPORTED: set[tuple] = set()  # the signatures of _unsupported_value whose values DirectML holds


def _first_unsupported(node: onnx.NodeProto, kernel: Kernel, types: Mapping[str, str | None]) -> str | None:
    cpu_inputs = {node.input[i] for i in kernel.cpu_inputs if i < len(node.input)}
    for is_input, names in ((True, node.input), (False, node.output)):
        for name in names:
            if not name:
                continue
            kind = types.get(name)
            if kind is None:
                return f"the type of {name!r} is unknown"
            if kind.startswith("seq("):
                if node.op_type not in SEQUENCE_OPS:
                    return f"{name!r} is a sequence"
            elif kind not in DML_DATA_TYPES and not (is_input and name in cpu_inputs):
                return f"{name!r} is {kind}"
    return None


def cpu_preferred(nodes: list[onnx.NodeProto], ios: list[NodeIO], matches: list[KernelMatch], types: Mapping[str, str | None],
                  constants: Mapping[str, np.ndarray], graph_inputs: Collection[str]) -> dict[int, str]:
    """GetCpuPreferredNodes: the nodes with a DML kernel that compute only from CPU tensors (a Shape's
    or Size's output, small initializers, graph inputs), by index, each with what it computes from.
    The candidates are visited in topological order, as onnxruntime's priority queue visits them."""
    consumers: dict[str, list[int]] = {}
    for index, io in enumerate(ios):
        for name in set(io.inputs):
            consumers.setdefault(name, []).append(index)
    cpu_values: dict[str, str] = {}  # a CPU tensor -> where it comes from
    queue: list[int] = []

    def on_cpu(name: str, source: str) -> None:
        cpu_values.setdefault(name, source)
        for consumer in consumers.get(name, ()):
            heapq.heappush(queue, consumer)

    for node, match in zip(nodes, matches):
        for index in match.kernel.cpu_outputs if match.kernel is not None else ():
            if index < len(node.output):
                on_cpu(node.output[index], f"{node.op_type} {node.name or node.output[index]!r}")
    visited: set[int] = set()
    preferred: dict[int, str] = {}
    while queue:
        index = heapq.heappop(queue)
        if index in visited:
            continue
        visited.add(index)
        node, kernel = nodes[index], matches[index].kernel
        if kernel is None:  # onnxruntime assumes a node without a DML kernel runs on the CPU
            for name in node.output:
                on_cpu(name, f"{node.op_type} {node.name or node.output[0]!r} (no DML kernel)")
            continue
        source = _cpu_source(node, kernel, types, constants, graph_inputs, cpu_values)
        if source is not None:
            preferred[index] = f"computes from {source} on the CPU"
            for name in node.output:
                on_cpu(name, source)
    return preferred


def _cpu_source(node: onnx.NodeProto, kernel: Kernel, types: Mapping[str, str | None], constants: Mapping[str, np.ndarray],
                graph_inputs: Collection[str], cpu_values: Mapping[str, str]) -> str | None:
    """Where a candidate's CPU inputs come from if GetCpuPreferredNodes places it on the CPU, else None."""
    source = None
    for index, name in enumerate(node.input):
        if types.get(name) in NEVER_CPU_PREFERRED:
            return None
        if (name in constants and np.size(constants[name]) <= SMALL_INITIALIZER) or name in graph_inputs:
            continue
        if name not in cpu_values or index in kernel.cpu_inputs:
            return None
        source = source or cpu_values[name]
    return source


def fallback_kind(reason: str) -> str:
    """The class of a fallback dml_ep's importer makes, read from the end its reason has (ON_DML and
    its variants, ASSIGNED_TO_DML: "not-modelled"; ON_CPU: a check of the real EP's, "support-query")."""
    if reason.endswith(ON_DML_CPU_OUTPUT):
        return "cpu-output"
    if reason.endswith(PLANNED_WHEN_RUN):
        return "planned-when-run"
    return "not-modelled" if "on DirectML in the real EP" in reason or "the real EP assigns it to DirectML" in reason else "support-query"


def not_modelled_reason(node: onnx.NodeProto, origin: Origin, float_op: bool = False) -> str:
    """Why a node the real EP runs on DirectML, with no dml_ep importer, runs on the CPU fallback.
    ``float_op``: its output is floating point, a float operator outside dml_ep's bit-exact scope."""
    return _not_modelled_reason(node.domain, node.op_type, float_op, origin.note)


@functools.lru_cache(maxsize=1024)
def _not_modelled_reason(domain: str, op_type: str, float_op: bool, note: str | None) -> str:
    """One string for the nodes of one op and note: made once, held once (10,000 fallback nodes
    held 10,000 copies of it)."""
    if op_domain(domain) == "" and op_type in CPU_OUTPUT_OPS:
        return f"{_op_name(domain, op_type)}: {ON_DML_CPU_OUTPUT}"
    reason = f"{_op_name(domain, op_type)}: {'float op ' if float_op else ''}{ON_DML}"
    return f"{reason} ({note})" if note else reason
