"""onnxruntime's type and shape inference of a graph, as dml_ep reads it.

DirectML descs need static shapes, and shapes are only known for sure from the tensors a run
makes (a Reshape may read its shape from an input). So onnxruntime's inference tells the types of
all values before a run (:func:`static_values`), and their shapes where static, and the planner
makes each node's desc from the shapes of the tensors that reach it. onnxruntime names types in
strings ("tensor(uint8)", "seq(tensor(float))"): :func:`value_info` and :func:`type_proto` read them.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import onnx

from ..core.errors import InferenceRefusedError, ModelError
from ..core.graph import ValueInfo, declared_shape, element_dtype, graph_inputs, ort_message, skeleton, subgraphs
from .reference import loaded_graph


def static_values(model: onnx.ModelProto | bytes, input_shapes=None) -> dict[str, ValueInfo]:
    """Every value's type, and its shape as far as onnxruntime's own inference knows it before a run.

    onnxruntime loads the model with every node output exposed (loads only: no session is
    initialized, so no node disappears and no kernel is made) and says what each output is: its
    type string, and dimensions where static (None where they depend on a symbolic input dimension
    or on data). ``input_shapes`` pins input shapes first. value_info and the graph outputs' shapes
    are dropped beforehand: a shape is never taken from a declaration. A model onnxruntime refuses
    at load is a ModelError naming the node. Given as bytes, the model is parsed into the probe:
    no second copy of it is alive while onnxruntime holds its own; the probe goes, serialized,
    before onnxruntime parses it (its nodes and outputs: 5 MB for 10,000 nodes).
    """
    probe = _probe(model, input_shapes)
    initializers = [(t.name, t.data_type, tuple(t.dims)) for t in probe.graph.initializer]
    serialized = probe.SerializeToString()
    del probe
    try:
        inputs_meta, outputs_meta = loaded_graph(serialized)
    except Exception as exc:  # onnxruntime's Fail, InvalidGraph, InvalidArgument...
        message = ort_message(exc)
        graph = onnx.load_from_string(serialized).graph
        node = _named_node(graph, message)
        in_subgraph = node is not None and bool(subgraphs(node)) or _SUBGRAPH_FAILED in message
        raise InferenceRefusedError(f"{message}{_inputs_of(graph, node)}", in_subgraph=in_subgraph) from None
    values = {name: value_info(name, ort_type, shape) for name, ort_type, shape in (*inputs_meta, *outputs_meta)}
    inputs = {name for name, _, _ in inputs_meta}
    rank_0 = [name for name, info in values.items() if info.shape == () and name not in inputs]
    if rank_0:  # onnxruntime says [] for a scalar and for a rank it does not know: onnx's inference tells them apart
        scalars = _inferred_scalars(onnx.load_from_string(serialized))
        values.update((name, values[name]._replace(shape=None)) for name in rank_0 if name not in scalars)
    for name, data_type, dims in initializers:
        values.setdefault(name, ValueInfo(name, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)), dims))
    return values


def _probe(model: onnx.ModelProto | bytes, input_shapes) -> onnx.ModelProto:
    """The copy of the model onnxruntime loads for :func:`static_values`: no value_info, no
    declared output shapes, the inputs of ``input_shapes`` pinned, every node output a graph output."""
    probe = onnx.ModelProto()
    if isinstance(model, bytes):
        probe.ParseFromString(model)
    else:
        probe.CopyFrom(model)
    del probe.graph.value_info[:]
    for output in probe.graph.output:  # a declared output shape is a declaration too
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    for value in graph_inputs(probe.graph):
        if input_shapes and value.name in input_shapes:
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in input_shapes[value.name]:
                shape.dim.add().dim_value = int(size)
    listed = {o.name for o in probe.graph.output}
    add_output = probe.graph.output.add  # in the probe's arena: a message made on its own takes an arena of its own
    for name in [n for node in probe.graph.node for n in node.output[:] if n and n not in listed]:
        add_output(name=name)
    return probe


def _inferred_scalars(probe: onnx.ModelProto) -> set[str]:
    """The values onnx's shape inference knows to be scalars in ``probe`` (its declarations of
    intermediate and output shapes dropped): only those are planned as rank 0 before a run."""
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton(probe))
    except Exception:  # noqa: BLE001  contrib ops and the like: no value is known to be a scalar
        return set()
    return {value.name for value in (*inferred.graph.value_info, *inferred.graph.output)
            if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape") and not value.type.tensor_type.shape.dim}


# What onnx's inference of an If, Loop or Scan says when a node of its subgraph fails (an unnamed node's message names no node).
_SUBGRAPH_FAILED = "Graph attribute inferencing failed"


def _named_node(graph: onnx.GraphProto, message: str) -> onnx.NodeProto | None:
    """The node of ``graph`` an onnxruntime message names first (its own, not one of a subgraph's)."""
    match = re.search(r"[Nn]ode \(?'?([^)' ]+)", message)
    return next((n for n in graph.node if n.name == match[1]), None) if match else None


def _inputs_of(graph: onnx.GraphProto, node: onnx.NodeProto | None) -> str:
    """" (inputs: a uint8[2, 3], ...)" for the node an onnxruntime message names: its graph inputs
    and constants as the model gives them."""
    if node is None:
        return ""
    known = {v.name: (element_dtype(v), declared_shape(v, "?")) for v in graph.input if v.type.HasField("tensor_type")}
    known.update((t.name, (np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)), tuple(t.dims))) for t in graph.initializer)
    described = [f"{name} {known[name][0]}{list(known[name][1])}" for name in node.input if name in known]
    return f" (inputs: {', '.join(described)})" if described else ""


def value_info(name: str, ort_type: str, shape) -> ValueInfo:
    """A ValueInfo from onnxruntime's type string ("tensor(uint8)", "seq(tensor(float))") and
    NodeArg shape (symbolic or unknown dimensions as None)."""
    is_tensor, dtype = _tensor_element_type(ort_type)
    if not is_tensor:  # a sequence, map or optional: only onnxruntime's fallback nodes read it
        return ValueInfo(name, None, None, ort_type)
    dims = tuple(d if isinstance(d, int) and d >= 0 else None for d in shape) if shape is not None else None
    return ValueInfo(name, dtype, dims, ort_type)


@functools.lru_cache(maxsize=None)
def _tensor_element_type(ort_type: str) -> tuple[bool, np.dtype | None]:
    """Whether onnxruntime's type string is a tensor's, and its element type (parsed once per string)."""
    match = re.fullmatch(r"tensor\((\w+)\)", ort_type)
    return (False, None) if match is None else (True, _ORT_ELEMENT_TYPES.get(match[1]))


def type_proto(ort_type: str) -> onnx.TypeProto:
    """onnxruntime's type string as an ONNX TypeProto (element type only: shapes are left open)."""
    match = re.fullmatch(r"(\w+)\((.*)\)", ort_type)
    if match is None:
        raise ModelError(f"unknown onnxruntime type {ort_type!r}")
    kind, inner = match.groups()
    if kind == "tensor":
        return onnx.helper.make_tensor_type_proto(_ONNX_ELEMENT_TYPES[inner], None)
    if kind == "seq":
        return onnx.helper.make_sequence_type_proto(type_proto(inner))
    if kind == "optional":
        return onnx.helper.make_optional_type_proto(type_proto(inner))
    if kind == "map":
        key, _, value = inner.partition(",")
        return onnx.helper.make_map_type_proto(_ONNX_ELEMENT_TYPES[key], type_proto(value))
    raise ModelError(f"unknown onnxruntime type {ort_type!r}")


# onnxruntime spells element types as the TensorProto enum in lower case ("float", "uint8", "float16").
_ONNX_ELEMENT_TYPES = {name.lower(): number for name, number in onnx.TensorProto.DataType.items() if number}
_ORT_ELEMENT_TYPES = {}
for _name, _number in _ONNX_ELEMENT_TYPES.items():
    try:
        _ORT_ELEMENT_TYPES[_name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(_number))
    except (KeyError, TypeError, ValueError):  # string and the like have no numeric numpy dtype here
        pass
