"""com.microsoft SkipSimplifiedLayerNormalization: the DML EP's SkipLayerNormalization class with
``simplified`` (DmlOperatorSkipLayerNormalization<true>), ELEMENT_WISE_ADD (input, skip) ->
MEAN_VARIANCE_NORMALIZATION2 without UseMean; its input 3 is MVN2's post-normalization Bias. The
split and its bias mismatch are :mod:`skip_layer_normalization`'s; this module gives the graph row its rule."""

from __future__ import annotations

from typing import Callable

import onnx

from ...passes.editable import EditableGraph
from . import skip_layer_normalization

RULE = skip_layer_normalization.SIMPLIFIED_RULE
DIRECTML_OPERATORS = ("ELEMENT_WISE_ADD", "MEAN_VARIANCE_NORMALIZATION2")
OPERATORS: tuple = ()


def parts(graph: EditableGraph, node: onnx.NodeProto, static: dict, on_dml: Callable) -> tuple[tuple, dict] | None:
    """ADD (input, skip), MVN2 with input 3 as its Bias: :func:`skip_layer_normalization.parts`."""
    return skip_layer_normalization.parts(graph, node, static, on_dml)
