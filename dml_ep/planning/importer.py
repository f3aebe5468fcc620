"""Rewritten ONNX nodes -> plan entries: each node becomes a DirectML desc or a fallback with its reason.

Each node is matched to a row of the registration table (``dml_ep.operators.registration``: its
domain, op type and since-version, the row's support query) and imported by the row's importer,
which raises ``Fallback(reason, real_ep)`` for what DirectML cannot take (and what the real EP
does with it), and dml_ep's typed errors for what is invalid.
A desc that breaks DirectML's tables at the target feature level falls back, naming the rule.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from typing import Mapping

import numpy as np
import onnx

from ..core.enums import DML_FEATURE_LEVEL
from ..core.errors import DescValidationError, NodeError
from ..core.feature_levels import DEFAULT_FEATURE_LEVEL
from ..core.graph import NodeIO, ValueInfo, attributes, node_io, op_domain
from ..operators.base import validated
from ..operators.importing import Fallback, NodeContext, bound
from ..operators.nodes import DmlNode, FallbackNode, PlanEntry
from ..operators.registration import REGISTRATIONS, row_of
from ..passes.editable import Origin
from ..realep.kernel_registry import since_version
from ..realep.placement import ASSIGNED_TO_DML, fallback_kind, not_modelled_reason


def signature(node: onnx.NodeProto, io: NodeIO, values: Mapping[str, ValueInfo], constants: dict[str, np.ndarray],
              run_data: dict | None = None) -> tuple:
    """All an importer reads of a node (``io``, its inputs and outputs): its op and attributes, each
    input's constant (by name), run-time CPU input (by value) or type and shape, and its output's
    type. Nodes of one signature make one desc, so that a model of repeated layers imports each
    kind of node once."""
    inputs: list = []
    for name in io.inputs:  # a loop, not a generator: asked of every node of a model
        if name in constants:
            inputs.append(name)
        elif run_data and name in run_data:
            inputs.append((run_data[name].dtype.str, run_data[name].tobytes()))
        else:
            inputs.append(_type_and_shape(values.get(name)))
    output = _type_and_shape(values.get(io.outputs[0])) if io.outputs else None
    return node.domain, node.op_type, tuple([a.SerializeToString() for a in attributes(node)]), tuple(inputs), output


def _type_and_shape(info: ValueInfo | None) -> tuple | None:
    return None if info is None else info[1:]  # dtype, shape and type


def verify_output_shapes(entry: DmlNode, values: Mapping[str, ValueInfo]) -> None:
    """Fallback unless the node's output shapes are those onnxruntime inferred: the DML EP's
    InferAndVerifyOutputSizes (MLOperatorAuthorImpl.cpp) fails creating the kernel otherwise. They
    differ where the EP reads an attribute otherwise than onnxruntime (clamped into int32)."""
    shapes = (entry.output_shape, *(shape for _, shape in entry.more_outputs))
    for name, shape in zip(entry.outputs, shapes):
        inferred = getattr(values.get(name), "shape", None)
        if inferred is not None and (len(inferred) != len(shape) or any(d not in (None, s) for d, s in zip(inferred, shape))):
            raise Fallback(f"the DML EP infers output shape {list(shape)} from the attributes as it reads them (ints clamped "
                           f"into int32), onnxruntime's is {list(inferred)}", ASSIGNED_TO_DML)


def opset_versions(model: onnx.ModelProto) -> dict[str, int]:
    return {op_domain(o.domain): o.version for o in model.opset_import}


@dataclasses.dataclass
class NodeImporter:
    """Maps one node at a time, knowing the model's constants."""

    constants: dict[str, np.ndarray]
    feature_level: DML_FEATURE_LEVEL
    opsets: dict[str, int]
    _made: dict[tuple, DmlNode] = dataclasses.field(default_factory=dict, init=False, repr=False)  # by signature

    def cpu_inputs(self, node: onnx.NodeProto) -> tuple[str, ...]:
        """The node's required CPU inputs (its row's ``constant_cpu_inputs``) that are not constants:
        values computed at run time, whose data the node is planned from."""
        row = row_of(node)
        indices = row.constant_cpu_inputs if row is not None else ()
        if not indices:
            return ()
        return tuple([node.input[i] for i in indices if i < len(node.input) and node.input[i] and node.input[i] not in self.constants])

    @staticmethod
    def registered(node: onnx.NodeProto) -> bool:
        """Whether dml_ep imports this op: else its entry is a FallbackNode whatever its inputs' shapes."""
        return row_of(node) is not None

    def plan_node(self, node: onnx.NodeProto, origin: Origin, values: Mapping[str, ValueInfo], run_data: dict | None = None,
                  io: NodeIO | None = None) -> PlanEntry:
        """The node's entry, ``values`` giving the types and shapes of its inputs and the type of its
        output; ``run_data`` the values of its required CPU inputs computed in this run; ``io`` its
        inputs and outputs, where read already."""
        domain = op_domain(node.domain)
        row = REGISTRATIONS.get((domain, node.op_type))
        if row is None:
            out = values.get(node.output[0]) if node.output else None
            float_op = out is not None and out.dtype is not None and out.dtype.kind == "f"
            reason = not_modelled_reason(node, origin, float_op)
            return FallbackNode(node, reason, origin, fallback_kind(reason))
        io = io or node_io(node)
        unbound = {node.input[index] for index in row.unbound_inputs if index < len(node.input)}  # an empty one stops nothing
        for name in io.inputs:
            shape = getattr(values.get(name), "shape", None) or ()
            if 0 in shape and name not in unbound:  # the real EP's operators skip empty tensors; dml_ep leaves them to the CPU EP
                return FallbackNode(node, f"input {name!r} is empty (shape {list(shape)}); DirectML sizes are at least 1; "
                                          "on DirectML in the real EP, whose operators skip empty tensors", origin)
        key = signature(node, io, values, self.constants, run_data)
        made = self._made.get(key)
        if made is not None:
            return self._rebound(made, node, io, origin)
        constants = ChainMap(run_data, self.constants) if run_data else self.constants
        ctx = NodeContext(node, values, constants, self.feature_level, self.opsets.get(domain, 1), origin)
        try:
            entry = row.import_node(ctx)
            verify_output_shapes(entry, values)
            validated(entry.desc, self.feature_level)
        except Fallback as reason:  # DirectML cannot take it: onnxruntime runs it
            return FallbackNode(node, str(reason), origin, fallback_kind(str(reason)))
        except DescValidationError as reason:  # not at this feature level
            return FallbackNode(node, f"{reason}; {ASSIGNED_TO_DML} on a device below that feature level", origin)
        except NodeError as error:  # invalid: name the model's own nodes too
            raise error.made_by(origin) from None
        self._made[key] = entry
        return entry

    def _rebound(self, made: DmlNode, node: onnx.NodeProto, io: NodeIO, origin: Origin) -> DmlNode:
        """``made``, the entry of a node of the same signature, for ``node``: its fields bound to
        ``node``'s inputs, its desc and ``imported`` shared. The same desc on the same constants, so one
        prepared kernel (a weight several nodes read: the executor keeps one per ``imported``), and
        what the importer noted."""
        entry = bound(node, made.desc, made.input_index, (made.output_shape, *(shape for _, shape in made.more_outputs)), self.constants,
                      origin, io)
        entry.imported = made.imported
        # one signature reads the same constants: they are bound as the importer bound them (4-bit codes packed, a zero it made)
        entry.inputs.update((field, value) for field, value in made.inputs.items() if isinstance(value, np.ndarray))
        return entry

    def never_maps(self, node: onnx.NodeProto, values: Mapping[str, ValueInfo]) -> bool:
        """Whether ``node`` falls back whatever its shapes: no DirectML operator is modelled for its op,
        its version, or (``values``' static types) the element type of its first input."""
        domain = op_domain(node.domain)
        row = REGISTRATIONS.get((domain, node.op_type))
        if row is None or since_version(domain, node.op_type, self.opsets.get(domain, 1)) not in row.versions:
            return True
        first = values.get(node.input[0]) if node.input and node.input[0] not in self.constants else None
        return row.input_types is not None and first is not None and first.dtype is not None and first.dtype not in row.input_types

    def maps(self, node: onnx.NodeProto, values: Mapping[str, ValueInfo]) -> bool:
        """Whether ``node`` becomes a DirectML operator (the DML EP's IsNodeSupportedByDml)."""
        return isinstance(self.plan_node(node, Origin((), (node,)), values), DmlNode)
