"""The importer's product: for every ONNX node, a DirectML desc bound to graph values, or a fallback.

A :class:`DmlNode` binds each tensor field of its desc to a graph value name (bound at execution)
or to a constant array read from the model once (bound at initialization), and keeps the names
of both. A
:class:`FallbackNode` runs on onnxruntime's CPU EP, as in the real DML EP, and says why.
"""

from __future__ import annotations

import dataclasses
from typing import Union

import numpy as np
import onnx

from ..core.graph import node_reads
from ..passes.editable import Origin
from .base import OperatorDesc


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class Imported:
    """What an import made of a node that its desc does not say: which onnxruntime CPU kernel the
    "onnxruntime" arithmetic reproduces (None: the desc tells). One per import, shared by the
    entries of its signature (the same desc on the same constants), so it also stands for the
    signature: the executor keeps one kernel state per ``Imported`` (compared by identity)."""

    onnxruntime: str | None = None  # the kernel, as its operator module names it (``gemm.MLAS``, ...)
    block_size: int = 0  # ``gemm.SQNBIT_INT8``'s block of A's quantization along K


@dataclasses.dataclass(slots=True)  # slots: a plan has an entry per node
class DmlNode:
    """A node of the rewritten graph executed as one DirectML operator; ``origin`` names the
    user's nodes it stands for (the node itself, or the DQs, target and Q a rule fused, and a fused
    activation)."""

    node: onnx.NodeProto
    desc: OperatorDesc
    inputs: dict[str, Union[str, np.ndarray]]
    output: str
    output_shape: tuple[int, ...]
    origin: Origin
    names: dict[str, str] = dataclasses.field(default_factory=dict)  # the graph value bound to each field of ``inputs``
    input_index: dict[str, int] = dataclasses.field(default_factory=dict)  # the node input bound to each field, by position
    input_shapes: dict[str, tuple | None] = dataclasses.field(default_factory=dict)  # of the values bound, set by the planner
    imported: Imported = dataclasses.field(default_factory=Imported, repr=False, compare=False)  # shared by the entries of one signature
    more_outputs: tuple[tuple[str, tuple], ...] = ()  # (name, shape) of the outputs after the first (DYNAMIC_QUANTIZE_LINEAR's scale, zero point)

    @property
    def operator(self) -> str:
        return str(self.desc.OPERATOR_TYPE)

    @property
    def value_inputs(self) -> list[str]:
        """Graph values this node reads at execution time."""
        return [v for v in self.inputs.values() if isinstance(v, str)]

    @property
    def outputs(self) -> list[str]:
        return [self.output, *(name for name, _ in self.more_outputs)]

    def summary(self) -> str:
        text = self.operator
        activation = getattr(self.desc, "FusedActivation", None)
        if activation is not None:
            text += f" + fused {activation.OPERATOR_TYPE}"
        return text


@dataclasses.dataclass(slots=True)
class FallbackNode:
    """An ONNX node left to onnxruntime's CPU execution provider."""

    node: onnx.NodeProto
    reason: str
    origin: Origin
    kind: str = "not-modelled"  # why, as a class (dml_ep.realep.placement.REASON_CLASSES)
    _reads: list[str] | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def value_inputs(self) -> list[str]:
        """Its inputs, and the values of the graph around it that its subgraphs read (walked once:
        every run reads them)."""
        if self._reads is None:
            self._reads = node_reads(self.node)
        return self._reads

    @property
    def outputs(self) -> list[str]:
        return [name for name in self.node.output[:] if name]

    def summary(self) -> str:
        return f"fallback: {self.reason}"


PlanEntry = Union[DmlNode, FallbackNode]
