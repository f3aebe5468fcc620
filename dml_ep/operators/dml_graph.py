"""The row kind of an ONNX node the real DML EP builds as a small DirectML graph (its operator class
builds several DirectML operators): :class:`DmlGraph`. The planner splits each such node into one
plan node per DirectML operator, all standing for the user's node with one Origin named after the
EP's class, so that the plan, ``inspect``, ``compare --per-node`` and the DxDispatch export show
each operator; the parts are rows of their own (``registration.py``). A node is split only where
every part runs on DirectML before a run; otherwise it stays whole. Each graph is a module of
``dml_ep.operators.graphs``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx

from ..core.graph import ValueInfo, op_domain
from ..passes.editable import EditableGraph

FLOAT32 = np.dtype(np.float32)
INTEGER_TYPES = {np.dtype(np.uint8): "tensor(uint8)", np.dtype(np.int8): "tensor(int8)"}


@dataclasses.dataclass(frozen=True)
class DmlGraph:
    """One ONNX op as the DML EP builds it: a DirectML graph.

    - ``rule``: the DML EP's operator class, the rule of the Origin its parts share.
    - ``operators``: the DirectML operators it builds, in order.
    - ``parts``: ``parts(graph, node, static, on_dml) -> (nodes, made) | None``: the plan nodes of
      one node, in order, the last making its outputs, and the values they make (name -> (the value
      they derive from, element type, whether of its shape or a scalar, a shape of its own, or a function of its
      shape)); None where the node stays
      whole (the EP's support check, or a part ``on_dml(part, infos)`` refuses).
    - ``exact_products``: ``exact_products(node, constants, values, output_dtype, arithmetic) ->
      FloatProducts``, for a graph whose output is a float product: the values compare holds the
      reference's to, on the reference's ``values``, to name the causes of a difference
      (``dml_ep.conformance.causes.product_causes``) whichever arithmetic reproduces it; None: the
      first alternative arithmetic that gives the reference's value is the cause.
    - ``differs``: where the graph computes another function than onnxruntime's node (a Cast to
      bool), what differs: the cause "graph" of every difference compare finds.
    """

    domain: str
    op_type: str
    rule: str
    operators: tuple[str, ...]
    parts: Callable
    exact_products: Optional[Callable[..., "FloatProducts"]] = None
    differs: Optional[str] = None

    def split(self, graph: EditableGraph, static: dict, on_dml: Callable) -> dict[str, tuple]:
        """Split each of the graph's nodes of this op whose parts run on DirectML; the values made,
        as ``parts`` gives them, which the planner types for any input shape (:func:`derived_infos`)."""
        derived = {}
        for node in [n for n in graph.nodes if n.op_type == self.op_type and op_domain(n.domain) == self.domain]:
            planned = self.parts(graph, node, static, on_dml)
            if planned is not None:
                nodes, made = planned
                _split(graph, node, nodes, self.rule)
                derived.update(made)
        return derived


@dataclasses.dataclass(frozen=True)
class FloatProducts:
    """What a float product may be on each side, each as its value and sum of magnitudes in float64,
    against which compare holds the reference's value within a float32 GEMM's rounding bound.

    - ``exact``: the exact product both sides compute ("float summation order" where the reference
      lies within its bound); ``terms``: the most terms an output sums (K).
    - ``cpu``: the CPU's other computation, where the reference may compute one ("int8
      activations"), or None.
    - ``on_dml``: DirectML's own product where it moves off the exact one ("float16 weights"), or None.
    """

    exact: tuple[np.ndarray, np.ndarray]
    terms: int
    cpu: Optional[tuple[np.ndarray, np.ndarray]] = None
    on_dml: Optional[np.ndarray] = None


def derived_infos(derived: dict[str, tuple], values: dict) -> dict[str, ValueInfo]:
    """The ValueInfos of the values a split made, from those of the values they derive from."""
    infos = {}
    for name, (source, dtype, codes) in derived.items():
        info = values.get(source)
        shape: tuple | None = codes  # a shape of its own (MatMulNBits' dequantized weight)
        if callable(codes):  # made from the source's shape (RotaryEmbedding's views of its input), None where unknown
            shape = codes(info.shape) if info is not None and info.shape is not None else None
        elif not isinstance(codes, tuple):
            shape = (info.shape if info is not None else None) if codes else ()
        infos[name] = ValueInfo(name, dtype, shape, INTEGER_TYPES.get(dtype, "tensor(float)"))
    return infos


def _split(graph: EditableGraph, node: onnx.NodeProto, parts: tuple, rule: str) -> None:
    """``node`` replaced by ``parts`` in order, the last making its outputs, all standing for it
    with one Origin, which keeps ``node`` (the rewritten model writes it back: onnxruntime's graph has it)."""
    *before, last = parts
    graph.replace([node], last, rule, at=node)
    graph.origins[id(last)] = dataclasses.replace(graph.origin(last), whole=node)
    for part in before:
        graph.insert_before(last, part, graph.origin(last), None)
