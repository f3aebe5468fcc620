"""ConstantFolding: what onnxruntime computes once, loading a model, before any EP sees a node.

onnxruntime turns Constant nodes into initializers as it builds the graph (whatever the
optimization level), and its Level-1 ConstantFolding (``constant_folding.cc``) replaces, in
topological order, every deterministic node without subgraphs whose inputs are all constant
initializers (not graph inputs) by initializers holding its outputs. With QDQ fusion on it skips
DequantizeLinear, so that QDQ node units survive, unless the whole unit DQ -> X -> Q folds. No EP
runs these nodes, so they are not in the plan. dml_ep computes the folded values with
onnxruntime's CPU EP, as onnxruntime does, in one session.

Not modelled: the folding of a Shape node whose input's shape is static (``ConstantFoldShapeNode``);
those Shape nodes stay and run on the CPU fallback.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from ..core import graph as graph_module
from .editable import EditableGraph

NAME = "ConstantFolding"
NON_DETERMINISTIC = {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial"}
CONSTANT_VALUES: dict[str, Callable[[Any], np.ndarray]] = {  # a Constant node's value attribute -> its array
    "value": numpy_helper.to_array,
    "value_float": lambda v: np.array(v, np.float32),
    "value_floats": lambda v: np.array(list(v), np.float32),
    "value_int": lambda v: np.array(v, np.int64),
    "value_ints": lambda v: np.array(list(v), np.int64),
}


def constant_nodes_to_initializers(graph: EditableGraph) -> bool:
    """Constant nodes become initializers (a string or sparse Constant stays a node)."""
    if not graph.has_op("Constant"):
        return False
    folded = []
    for node in graph.nodes:
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.attribute) != 1:
            continue
        attribute = node.attribute[0]
        if attribute.name in CONSTANT_VALUES:
            graph.put_constant(node.output[0], CONSTANT_VALUES[attribute.name](onnx.helper.get_attribute_value(attribute)))
            folded.append(node)
    if folded:
        graph.replace(folded, None, NAME, at=folded[0])
    return bool(folded)


def constant_folding(graph: EditableGraph, skip_dequantize_linear: bool = True) -> bool:
    """Fold the nodes onnxruntime's ConstantFolding folds; True if any."""
    folded = _constant_nodes(graph, skip_dequantize_linear)
    if not folded:
        return False
    values = {name: value for name, value in _evaluate(graph, folded).items() if isinstance(value, np.ndarray)}  # tensors only
    folded = [node for node in folded if all(name in values for name in node.output if name)]
    if not folded:
        return False
    for name, array in values.items():
        graph.put_constant(name, array)
    graph.replace(folded, None, NAME, at=folded[0])
    return True


def _constant_nodes(graph: EditableGraph, skip_dequantize_linear: bool) -> list[onnx.NodeProto]:
    """The nodes to fold, in topological order: foldable, every input a constant initializer (not a
    graph input) or the output of an earlier one; a DQ only where its whole QDQ unit folds, when
    ``skip_dequantize_linear``."""
    constant = {name for name in graph.constants if name not in graph.graph_inputs}
    folded = []
    for node in graph.nodes:
        inputs, outputs = graph.io(node)
        if not all(name in constant for name in inputs if name) or not _foldable(node):  # the set first: most nodes fail it
            continue
        if skip_dequantize_linear and node.op_type == "DequantizeLinear" and not _whole_unit_folds(graph, node):
            continue
        folded.append(node)
        constant.update(name for name in outputs if name)
    return folded


def _foldable(node: onnx.NodeProto) -> bool:
    return node.op_type not in NON_DETERMINISTIC and not graph_module.subgraphs(node)


def _whole_unit_folds(graph: EditableGraph, dq: onnx.NodeProto) -> bool:
    """DQ -> X -> Q, each read by the next alone and no graph output, X with one input and output."""
    def only_reader(node):
        readers = graph.consumers(node.output[0])
        return readers[0] if len(readers) == 1 and node.output[0] not in graph.graph_outputs else None

    x = only_reader(dq)
    if x is None or len(x.input) != 1 or len(x.output) != 1 or not _foldable(x):
        return False
    q = only_reader(x)
    return q is not None and q.op_type == "QuantizeLinear" and _foldable(q)


def _evaluate(graph: EditableGraph, nodes: list[onnx.NodeProto]) -> dict[str, np.ndarray]:
    """The outputs of ``nodes`` (their inputs constants or outputs of earlier ones), from one run;
    where onnxruntime cannot run them all, node by node, leaving out those it cannot run (it folds
    only the nodes it has a CPU kernel for) and those reading them."""
    try:
        return _run(graph, nodes, graph.constants)
    except Exception:  # noqa: BLE001  onnxruntime's Fail, NotImplemented, ...
        pass
    values: dict[str, np.ndarray] = {}
    for node in nodes:
        try:
            values.update(_run(graph, [node], ChainMap(values, graph.constants)))
        except Exception:  # noqa: BLE001
            continue
    return values


def _run(graph: EditableGraph, nodes: list[onnx.NodeProto], constants: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from ..ort.reference import cpu_session

    produced = {name for node in nodes for name in node.output if name}
    needed = dict.fromkeys(name for node in nodes for name in node.input if name and name not in produced)
    outputs = [name for node in nodes for name in node.output if name]
    model_graph = onnx.helper.make_graph(
        nodes, "constant_folding", [], [onnx.helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(constants[name], name) for name in needed])
    model = onnx.helper.make_model(model_graph, opset_imports=graph.model.opset_import, ir_version=graph.model.ir_version)
    model.functions.extend(graph.model.functions)
    return dict(zip(outputs, cpu_session(model, optimize=False).run(outputs, {})))
