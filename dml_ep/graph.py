"""Reading an ONNX model: load and check it, order its nodes, and learn every value's type and shape.

DirectML descs need static shapes, so a graph is always planned for concrete input shapes. Types
and shapes come from ONNX shape inference; values it cannot type (contrib ops such as
com.microsoft QLinearAdd) are measured by one onnxruntime run of the model on zero inputs.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper
from onnx.checker import MAXIMUM_PROTOBUF

from .errors import ModelError
from .plan import ValueInfo

MIN_IR_VERSION = 3
# The newest opsets the installed onnx knows (its checker validates them); onnxruntime runs the
# fallback nodes and says itself when it has no kernel for an op at that version.
MAX_OPSET = {"": onnx.defs.onnx_opset_version(), "ai.onnx": onnx.defs.onnx_opset_version(), "com.microsoft": 1}


def load_model(model) -> onnx.ModelProto:
    """A checked ModelProto from a path, bytes or a ModelProto; ModelError says what is wrong.

    External data is read from the model file's folder, never outside it (onnx refuses locations
    that leave it); a model given without its path cannot have any.
    """
    if isinstance(model, onnx.ModelProto):
        proto = model
        _refuse_external_data(proto, "the given ModelProto")
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), "the given bytes")
        _refuse_external_data(proto, "the given bytes")
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        proto = _parse(_read_model_file(path), path)
        try:
            onnx.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:
            raise ModelError(f"{path}: external data cannot be loaded: {one_line(exc)}") from None
    else:
        raise ModelError(f"a model is a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
    check_model(proto)
    return proto


def _read_model_file(path: str) -> bytes:
    """A regular file's bytes, no more than protobuf parses: a device such as /dev/zero would be
    read without end, and a FIFO would wait for a writer (opened non-blocking, it is refused at once)."""
    too_large = ModelError(f"{path}: larger than protobuf's limit of 2 GiB (a model so large keeps its weights in external data)")
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ModelError(f"{path}: not a regular file")
            if info.st_size > MAXIMUM_PROTOBUF:
                raise too_large
            data = f.read(MAXIMUM_PROTOBUF + 1)  # bounded all the same: a file can grow while it is read
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelError(f"{path}: is a directory, not an ONNX model") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAXIMUM_PROTOBUF:
        raise too_large
    return data


def _refuse_external_data(proto: onnx.ModelProto, where: str) -> None:
    """External data is found relative to the model's file: without one, onnx would read it from
    the current directory, whatever that holds."""
    # onnx's own walk over every tensor of a model, as its load_external_data_for_model uses
    for tensor in external_data_helper._get_all_tensors(proto):
        if external_data_helper.uses_external_data(tensor):
            location = external_data_helper.ExternalDataInfo(tensor).location
            raise ModelError(f"{where}: tensor {tensor.name!r} is stored as external data ({location!r}), which needs the "
                             "model's path: load the model from its file")


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise ModelError(f"{where}: empty file, not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError or RuntimeWarning-like errors
        raise ModelError(f"{where}: not an ONNX model (protobuf parse failed: {exc})") from None
    if not proto.HasField("graph") or not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{where}: not an ONNX model (no graph)")
    return proto


def check_model(proto: onnx.ModelProto) -> None:
    """onnx.checker plus the limits dml_ep knows: IR version and opset versions."""
    if proto.ir_version < MIN_IR_VERSION:
        raise ModelError(f"unsupported IR version {proto.ir_version} (need {MIN_IR_VERSION} or newer)")
    for opset in proto.opset_import:
        limit = MAX_OPSET.get(opset.domain)
        if limit is not None and opset.version > limit:
            raise ModelError(f"unsupported opset {opset.domain or 'ai.onnx'} {opset.version} (newest known: {limit})")
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:  # ValidationError, and others on malformed external data and similar
        raise ModelError(f"the model fails onnx.checker: {_checker_message(exc)}") from None


def _checker_message(exc: Exception) -> str:
    """The checker's message on one line, led by the node it names ("node 'n' (Op): rule")."""
    text = one_line(exc)
    rule, _, context = text.partition(" ==> Context: Bad node spec for node. ")
    match = re.fullmatch(r"Name: (\S*) OpType: (\S+)", context)
    return f"node {match[1]!r} ({match[2]}): {rule}" if match else text


def topological_order(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is produced first; ModelError on cycles and dangling inputs."""
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    producer = {}
    for index, node in enumerate(graph.node):
        for name in node.output:
            if name:
                producer[name] = index
    waiting = [0] * len(graph.node)
    consumers: dict[int, list[int]] = {}
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name in available:
                continue
            if name not in producer:
                label = node.name or node.op_type
                raise ModelError(f"node {label!r} ({node.op_type}): input {name!r} is produced by no node and is not a graph input or initializer")
            waiting[index] += 1
            consumers.setdefault(producer[name], []).append(index)
    ready = deque(i for i, count in enumerate(waiting) if count == 0)
    order = []
    while ready:
        index = ready.popleft()
        order.append(graph.node[index])
        for consumer in consumers.get(index, ()):
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    if len(order) != len(graph.node):
        stuck = [graph.node[i] for i, count in enumerate(waiting) if count]
        names = ", ".join(repr(n.name or n.op_type) for n in stuck[:3])
        raise ModelError(f"the graph has a cycle through {names}")
    return order


def constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Initializers (and Constant nodes with a tensor value) as numpy arrays, read once."""
    out = {}
    for tensor in graph.initializer:
        try:
            out[tensor.name] = numpy_helper.to_array(tensor)
        except Exception as exc:
            raise ModelError(f"initializer {tensor.name!r} cannot be read: {exc}") from None
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.attribute) == 1:
            attr = node.attribute[0]
            if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                out[node.output[0]] = numpy_helper.to_array(attr.t)
    return out


def graph_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Inputs the caller feeds (initializers listed as inputs are not fed)."""
    initialized = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in initialized]


def declared_shape(value: onnx.ValueInfoProto, symbolic: int = 1) -> tuple[int, ...]:
    """The static shape of a value info; symbolic or missing dimensions become ``symbolic``."""
    dims = value.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else symbolic for d in dims)


def element_dtype(value: onnx.ValueInfoProto) -> np.dtype:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))


def _info(value: onnx.ValueInfoProto):
    tensor_type = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tensor_type.elem_type or not tensor_type.HasField("shape"):
        return None
    dims = tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return ValueInfo(value.name, element_dtype(value), tuple(d.dim_value for d in dims))


def infer_values(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, ValueInfo]:
    """Type and static shape of every value, for the given concrete graph input shapes."""
    model = _with_input_shapes(model, input_shapes)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # onnx's inference rejects some valid contrib graphs; onnxruntime decides below
        inferred = model
    values = {}
    graph = inferred.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        info = _info(value)
        if info is not None:
            values[info.name] = info
    for tensor in graph.initializer:
        values[tensor.name] = ValueInfo(tensor.name, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)), tuple(tensor.dims))
    missing = [name for node in graph.node for name in node.output if name and name not in values]
    if missing:
        values.update(_measure_with_onnxruntime(model, missing, input_shapes, values))
    return values


def _with_input_shapes(model: onnx.ModelProto, input_shapes) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in graph_inputs(copy.graph):
        if value.name in input_shapes:
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in input_shapes[value.name]:
                shape.dim.add().dim_value = int(size)
    return copy


def _measure_with_onnxruntime(model: onnx.ModelProto, names: list[str], input_shapes, known) -> dict[str, ValueInfo]:
    """Run the model once on zeros with the untyped values as extra outputs, and read them off.

    onnxruntime also checks every node's types and attributes here: its refusal becomes a
    ModelError naming the node and the inputs it was given (from ``known`` values).
    """
    from .reference import cpu_session

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    for name in names:
        if name not in outputs:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    feeds = {
        value.name: np.zeros(input_shapes.get(value.name, declared_shape(value)), dtype=element_dtype(value))
        for value in graph_inputs(probe.graph)
    }
    try:
        session = cpu_session(probe)
        results = session.run(names, feeds)
    except Exception as exc:  # onnxruntime's Fail, InvalidGraph, InvalidArgument, RuntimeException...
        message = ort_message(exc)
        raise ModelError(f"the model is invalid (onnxruntime rejects it): {message}{_inputs_of(model.graph, message, known)}") from None
    return {name: ValueInfo(name, r.dtype, tuple(r.shape)) for name, r in zip(names, results)}


_ORT_NODE_MESSAGES = (
    r"Node \((?P<name>.*?)\) Op \((?P<op>.*?)\) (?P<rule>.*)",
    r"Non-zero status code returned while running (?P<op>\S+) node\. Name:'(?P<name>.*?)' Status Message: (?P<rule>.*)",
)


def ort_message(exc: Exception, with_node: bool = True) -> str:
    """An onnxruntime error on one line, without its status prefix, led by the node it names (if ``with_node``)."""
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : (This is an invalid model\. )?", "", one_line(exc))
    for pattern in _ORT_NODE_MESSAGES:
        match = re.fullmatch(pattern, text)
        if match:
            name, op_type, rule = match["name"], match["op"], match["rule"]
            if not with_node:
                return rule
            return f"node {name!r} ({op_type}): {rule}" if name else f"{op_type} node: {rule}"
    return text


def _inputs_of(graph: onnx.GraphProto, message: str, known: dict[str, ValueInfo]) -> str:
    """" (inputs: a uint8[2, 3], ...)" for the node an onnxruntime message names, when it can be found."""
    match = re.search(r"[Nn]ode \(?'?([^)' ]+)", message)
    node = next((n for n in graph.node if match and n.name == match[1]), None)
    if node is None:
        return ""
    described = [f"{name} {known[name].dtype}{list(known[name].shape)}" for name in node.input if name in known]
    return f" (inputs: {', '.join(described)})" if described else ""


def one_line(exc: Exception) -> str:
    """An exception's message on one line (its type name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__
