"""Typed exceptions: everything dml_ep raises on bad input derives from :class:`DmlEpError`.

Messages name where the problem is (node name and op type, tensor) and the rule broken, so a
CLI user can act on the one line that ``dml-ep`` prints.
"""

from __future__ import annotations

import importlib
import importlib.util


class DmlEpError(Exception):
    """Base class of every error dml_ep raises on bad input."""


class ModelError(DmlEpError):
    """The model cannot be read, or is not a valid ONNX model."""


class InferenceRefusedError(ModelError):
    """onnxruntime's shape inference refuses the model (for the input shapes it was given): ``reason`` says
    where; ``in_subgraph``, whether inside a node's subgraph (an If branch, a Loop body), which a run may never enter."""

    def __init__(self, reason: str, in_subgraph: bool = False):
        self.reason = reason
        self.in_subgraph = in_subgraph
        super().__init__(f"the model is invalid (onnxruntime rejects it): {reason}")


class NodeError(DmlEpError):
    """A node of the model breaks a rule of its operator (attributes, shapes, parameters)."""

    def __init__(self, rule: str, *, node=None, tensor: str | None = None):
        self.rule = rule
        self.node_name = getattr(node, "name", None) if node is not None else None
        self.op_type = getattr(node, "op_type", None) if node is not None else None
        self.tensor = tensor
        self.made_from: str | None = None
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.op_type is not None:
            where.append(f"node {self.node_name!r} ({self.op_type})" if self.node_name else f"{self.op_type} node")
        if self.tensor is not None:
            where.append(f"tensor {self.tensor!r}")
        text = f"{', '.join(where)}: {self.rule}" if where else self.rule
        return f"{text} ({self.made_from})" if self.made_from else text

    def named(self, node, names: dict) -> "NodeError":
        """Name ``node`` where the error did not (a kernel checking a value bound at run time), and
        the graph value bound to the desc field it named (``names``: field -> value)."""
        if self.op_type is None:
            self.node_name, self.op_type = node.name, node.op_type
            self.tensor = names.get(self.tensor, self.tensor)
            self.args = (self._format(),)
        return self

    def made_by(self, origin) -> "NodeError":
        """Name the model's nodes a graph rewrite made this node from (a plan entry's origin)."""
        if origin.rules:
            nodes = ", ".join(n.name or n.op_type for n in origin.nodes)
            self.made_from = f"made by the graph rewrites {origin.rule} from the model's nodes {nodes}"
            self.args = (self._format(),)
        return self


class InvalidAttributeError(NodeError):
    """An attribute has a value its operator does not allow."""


class ShapeError(NodeError):
    """Tensor shapes do not fit together (inner dimensions, broadcasting, kernel vs input)."""


class QuantizationParameterError(NodeError):
    """A scale or zero point is invalid (zero, negative or non-finite scale; bad zero point)."""


class FallbackError(NodeError):
    """onnxruntime's CPU EP failed on a node dml_ep left to it (e.g. an index out of range at run time)."""


class OutOfMemoryError(NodeError):
    """A node's working set does not fit in this machine's memory (numpy's MemoryError, named)."""


class DescValidationError(DmlEpError):
    """A DirectML operator desc breaks a rule of DirectML's support tables."""


class FeedError(DmlEpError, ValueError):
    """The inputs given to ``run``, or the saved outputs given to ``compare`` with (Polygraphy's
    RunResults, a data set's ``output_<i>.pb``), cannot be read or do not fit the model (a
    ValueError too, as onnxruntime's is, so that existing ``except ValueError`` clauses catch it)."""


class BindingError(DmlEpError, RuntimeError):
    """An IOBinding binds what the session cannot take (a device other than the CPU, a name the
    model does not have, a buffer of another type or shape than the run's): a RuntimeError too,
    as onnxruntime's is."""


class FeatureLevelError(DmlEpError):
    """An unknown DirectML feature level was asked for."""


class ReferenceUnavailableError(DmlEpError):
    """The reference asked for cannot run here: the real DML EP without onnxruntime-directml's
    DmlExecutionProvider, or without a DirectX 12 device to start it on."""


class DxDispatchError(DmlEpError):
    """A DxDispatch model (JSON and its resource files) cannot be read, written or replayed."""


class RealEpError(NodeError):
    """The real DML EP fails on this model where onnxruntime would: dml_ep reports that failure
    instead of running something the real EP cannot."""


__all__ = [
    "DmlEpError",
    "ModelError",
    "NodeError",
    "InvalidAttributeError",
    "ShapeError",
    "QuantizationParameterError",
    "FallbackError",
    "OutOfMemoryError",
    "DescValidationError",
    "FeedError",
    "BindingError",
    "FeatureLevelError",
    "RealEpError",
    "ReferenceUnavailableError",
    "DxDispatchError",
    "MissingExtraError",
]


class MissingRuntimeError(DmlEpError, ImportError):
    """No ``onnxruntime`` module is importable. dml_ep runs onnxruntime (its CPU EP, and the real DML
    EP as a reference); it does not depend on one package of it, since onnxruntime and
    onnxruntime-directml install the same module and clash: an extra installs the one wanted."""


def missing_runtime() -> MissingRuntimeError | None:
    """The error to raise when no onnxruntime is installed, else None: found, not imported, since
    importing it would cost ``--version`` and ``--help`` more than the rest of what they do."""
    if importlib.util.find_spec("onnxruntime") is None:
        return MissingRuntimeError("no onnxruntime is importable (no module named 'onnxruntime'): install dml_ep[cpu] "
                                   "(onnxruntime), or dml_ep[directml] (onnxruntime-directml, on Windows)")
    return None


class MissingExtraError(DmlEpError, ImportError):
    """A feature's optional packages are not installed; the message names the extra of dml_ep's
    that installs them (as ``pip install 'dml_ep[model-explorer]'``)."""


def import_extra(module: str, feature: str, extra: str):
    """``module``, imported for ``feature`` from the packages of dml_ep's ``extra``; else
    :class:`MissingExtraError`, in one line that says what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"{feature} needs {extra}'s packages ({exc}): pip install 'dml_ep[{extra}]'") from None
