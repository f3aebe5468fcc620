"""The importer's product: for every ONNX node, a DirectML desc bound to graph values, or a fallback.

A :class:`DmlNode` binds each tensor field of its desc to a graph value name (bound at execution)
or to a constant array read from the model once (bound at initialization). A
:class:`FallbackNode` runs on onnxruntime's CPU EP, as in the real DML EP, and says why.
"""

from __future__ import annotations

import dataclasses
from typing import Union

import numpy as np
import onnx

from .operator_descs import OperatorDesc
from .passes.editable import Origin


@dataclasses.dataclass
class DmlNode:
    """A node of the rewritten graph executed as one DirectML operator; ``origin`` names the
    user's nodes it stands for (the node itself, or the DQs, target and Q a rule fused, and a fused
    activation)."""

    node: onnx.NodeProto
    desc: OperatorDesc
    inputs: dict[str, Union[str, np.ndarray]]
    output: str
    output_shape: tuple[int, ...]
    origin: Origin | None = None  # set by the importer
    cache: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def operator(self) -> str:
        return str(self.desc.OPERATOR_TYPE)

    @property
    def value_inputs(self) -> list[str]:
        """Graph values this node reads at execution time."""
        return [v for v in self.inputs.values() if isinstance(v, str)]

    @property
    def outputs(self) -> list[str]:
        return [self.output]

    def summary(self) -> str:
        text = self.operator
        activation = getattr(self.desc, "FusedActivation", None)
        if activation is not None:
            text += f" + fused {activation.OPERATOR_TYPE}"
        return text


@dataclasses.dataclass
class FallbackNode:
    """An ONNX node left to onnxruntime's CPU execution provider."""

    node: onnx.NodeProto
    reason: str
    origin: Origin

    @property
    def value_inputs(self) -> list[str]:
        return [name for name in self.node.input if name]

    @property
    def outputs(self) -> list[str]:
        return [name for name in self.node.output if name]

    def summary(self) -> str:
        return f"fallback: {self.reason}"


PlanEntry = Union[DmlNode, FallbackNode]


@dataclasses.dataclass
class ValueInfo:
    """Name, element type (numpy dtype) and static shape of a graph value."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclasses.dataclass
class Plan:
    """The whole model as DirectML operators and fallbacks, in execution order."""

    entries: list[PlanEntry]
    feature_level: object
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    values: dict[str, ValueInfo]
    constants: dict[str, np.ndarray]
    model: onnx.ModelProto  # as rewritten by the passes
    qdq_rules: str | None = None  # the onnxruntime release whose QDQ rules applied; None: off

    @property
    def dml_nodes(self) -> list[DmlNode]:
        return [e for e in self.entries if isinstance(e, DmlNode)]

    @property
    def fallback_nodes(self) -> list[FallbackNode]:
        return [e for e in self.entries if isinstance(e, FallbackNode)]
