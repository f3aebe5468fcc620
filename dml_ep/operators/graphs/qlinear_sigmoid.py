"""com.microsoft QLinearSigmoid is, in the DML EP (DmlOperatorQLinearSigmoid.cpp L71-159, "the first
usage of graph based implementation"), ELEMENT_WISE_DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID (in
place on a FLOAT32 intermediate) -> ELEMENT_WISE_QUANTIZE_LINEAR. dml_ep plans it as com.microsoft
DequantizeLinear (x, x_scale, x_zero_point to a float32 value of its own), com.microsoft.dml
``DmlSigmoid`` (to a second one: dml_ep's values are not written in place), and com.microsoft
QuantizeLinear (to the node's output), all three standing for the user's node. The Q/DQ nodes
carry ``axis=0``: the EP puts a 1-D scale or zero point on axis 0 (L32-66), where
DmlOperatorElementwiseQLinear would read ``axis``; unlike that class it takes no 1-D length-1
parameter but on a first dimension of 1 (``ML_CHECK_VALID_ARGUMENT``), which the QLinearSigmoid row
reports. A node with fewer than 5 inputs is the CPU's (QueryQLinearSigmoid), and is not split.
onnxruntime's QDQ rules make QLinearSigmoid for DML nodes from DQ -> Sigmoid -> Q.

The QLinearSigmoid row (``registration.py``) answers for a node the split did not take: its support
query (:func:`both_zero_points`) or why not (:func:`unsplit`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from ...core.graph import ValueInfo
from ...passes.dml_fusion import DML_DOMAIN
from ...passes.editable import EditableGraph
from ...passes.qdq_actions import MS_DOMAIN
from ...realep.placement import ASSIGNED_TO_DML, ON_CPU, ON_DML
from ..dml_graph import FLOAT32, derived_infos
from ..importing import Fallback, NodeContext, quantized_type
from ..nodes import DmlNode

RULE = "DmlOperatorQLinearSigmoid"
SIGMOID = "DmlSigmoid"
DIRECTML_OPERATORS = ("ELEMENT_WISE_DEQUANTIZE_LINEAR", "ACTIVATION_SIGMOID", "ELEMENT_WISE_QUANTIZE_LINEAR")

# The graph's parts run as DirectML OPERATORS of other modules (activation's ACTIVATION_SIGMOID, ...).
OPERATORS: tuple = ()


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """DEQUANTIZE_LINEAR, ACTIVATION_SIGMOID, QUANTIZE_LINEAR of a node of 5 inputs whose parameters
    the EP accepts, where all three run on DirectML (``on_dml(part, infos)``); the values made are
    float32 of x's shape."""
    x = node.input[0]
    if len(node.input) < 5 or getattr(static.get(x), "dtype", None) is None:  # QueryQLinearSigmoid: the CPU's
        return None
    shapes = {name: np.shape(constant) if (constant := graph.constant(name)) is not None else getattr(static.get(name), "shape", None)
              for name in node.input[1:5] if name}
    x_info = static[x]
    if x_info.shape is None:
        # x's rank unknown to dml_ep (onnx's inference skips contrib ops; onnxruntime's knows them): with scalar
        # parameters nothing the EP checks depends on it, and each part is planned from the real shapes of a run
        if any(shape != () for shape in shapes.values()):
            return None
        x_info = ValueInfo(x, x_info.dtype, (1,), x_info.type)
    elif misplaced_parameter(x_info.shape, shapes) is not None:  # the real EP fails creating it: the row says so
        return None
    x_scale, x_zero_point, y_scale, y_zero_point = node.input[1:5]
    names = [graph.unique_name(f"{node.output[0]}.{part}") for part in ("dequantized", "sigmoid")]
    made = {name: (x, FLOAT32, True) for name in names}
    prefix = node.name or node.output[0]
    dequantize = onnx.helper.make_node("DequantizeLinear", [x, x_scale, x_zero_point], [names[0]], name=f"{prefix}.dequantize",
                                       domain=MS_DOMAIN, axis=0)
    sigmoid = onnx.helper.make_node(SIGMOID, [names[0]], [names[1]], name=f"{prefix}.sigmoid", domain=DML_DOMAIN)
    quantize = onnx.helper.make_node("QuantizeLinear", [names[1], y_scale, y_zero_point], list(node.output), name=node.name,
                                     domain=MS_DOMAIN, axis=0)
    infos = {**derived_infos(made, {x: x_info}), x: x_info}
    if not all(on_dml(part, infos) for part in (dequantize, sigmoid, quantize)):
        return None
    return (dequantize, sigmoid, quantize), made


def both_zero_points(ctx: NodeContext) -> None:
    """QueryQLinearSigmoid (DmlOperatorQLinearSigmoid.cpp): fewer than 5 inputs, a zero point
    missing, go to the CPU."""
    count = len(ctx.node.input)
    if count < 5:
        raise Fallback(f"QLinearSigmoid with {count} inputs (QueryQLinearSigmoid takes 5: DirectML's DEQUANTIZE_LINEAR and "
                       "QUANTIZE_LINEAR are built with both zero points)", ON_CPU)


def misplaced_parameter(x_shape, shapes: dict) -> str | None:
    """Why DmlOperatorQLinearSigmoid refuses its scales and zero points (``shapes``: name -> shape,
    None unknown), or None: a 1-D one other than x's shape goes on axis 0 and must be as long
    as x's first dimension (``ML_CHECK_VALID_ARGUMENT``, L44-48; no length-1 exception)."""
    for name, shape in shapes.items():
        if shape is not None and len(shape) == 1 and tuple(shape) != tuple(x_shape) and (not x_shape or shape[0] != x_shape[0]):
            first = f"x's first dimension {x_shape[0]}" if x_shape else "a dimension x, a scalar, does not have"
            return (f"{name!r} of shape {list(shape)} is put on axis 0 of x {list(x_shape)}, and DmlOperatorQLinearSigmoid "
                    f"requires its length to be {first}")
    return None


def unsplit(ctx: NodeContext) -> DmlNode:
    """A QLinearSigmoid the planner did not split (:func:`parts` plans it as its three
    DirectML operators where each runs on DirectML, types and ranks known before a run)."""
    quantized_type(ctx, 0, "input")
    x_shape = ctx.info(0).shape
    if x_shape is not None:
        shapes = {name: ctx.constants[name].shape if name in ctx.constants else getattr(ctx.values.get(name), "shape", None)
                  for name in ctx.node.input[1:5] if name}
        misplaced = misplaced_parameter(x_shape, shapes)
        if misplaced is not None:
            raise Fallback(misplaced, ASSIGNED_TO_DML)
    raise Fallback(f"QLinearSigmoid is a graph of three DirectML operators ({', '.join(DIRECTML_OPERATORS)}); dml_ep plans "
                   "it as those only where the planner finds all three on DirectML before a run", ON_DML)
