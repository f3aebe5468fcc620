"""Reading an ONNX model: load and check it, order its nodes, and describe its values.

What onnxruntime's inference says of every value's type and shape is read by
:mod:`dml_ep.ort.inference`.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from typing import NamedTuple, Sequence

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper
from onnx.checker import MAXIMUM_PROTOBUF

from .errors import ModelError


class ValueInfo(NamedTuple):
    """Name, element type (numpy dtype) and shape of a graph value (a NamedTuple: the executor
    makes one per tensor per run).

    Of a tensor a run made, the shape is static; as onnxruntime's inference knows it before a run,
    a dimension may be None (symbolic, or data-dependent) and the shape None (rank unknown). A
    sequence, map or optional value has neither dtype nor shape, only onnxruntime's ``type``.
    """

    name: str
    dtype: np.dtype | None
    shape: tuple | None
    type: str = ""

    @property
    def known(self) -> bool:
        """A tensor whose every dimension is known."""
        return self.dtype is not None and self.shape is not None and None not in self.shape


def op_domain(domain: str) -> str:
    """An op's domain as onnxruntime keys its schemas and kernels: ai.onnx's is "" whichever way a
    model spells it ("" or "ai.onnx")."""
    return "" if domain == "ai.onnx" else domain


def value_info_of(name: str, value) -> ValueInfo:
    """The ValueInfo of a value a run made (an array, or a list for a sequence)."""
    if isinstance(value, np.ndarray):
        return ValueInfo(name, value.dtype, value.shape)
    return ValueInfo(name, None, None, type(value).__name__)


MIN_IR_VERSION = 3
# onnxruntime 1.17, the oldest dml_ep supports, is built on onnx 1.15: it refuses a model of a newer
# IR version ("Unsupported model IR version: 10, max supported IR version: 9") or ai.onnx opset.
INTERNAL_IR_VERSION = 9
INTERNAL_MAX_OPSET = 20
# The newest opsets the installed onnx knows (the passes read their schemas); onnxruntime runs the
# fallback nodes and says itself when it has no kernel for an op at that version.
MAX_OPSET = {"": onnx.defs.onnx_opset_version(), "ai.onnx": onnx.defs.onnx_opset_version(), "com.microsoft": 1}


def internal_model(graph: onnx.GraphProto, opset: int, domains=()) -> onnx.ModelProto:
    """A model of dml_ep's own for onnxruntime, of IR version ``INTERNAL_IR_VERSION`` (onnx would
    stamp its newest, which older onnxruntimes refuse), or the one a newer ai.onnx ``opset`` needs;
    ``domains`` are imported at version 1."""
    opsets = [onnx.helper.make_opsetid("", opset)]
    ir_version = max(INTERNAL_IR_VERSION, onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True))
    opsets += [onnx.helper.make_opsetid(domain, 1) for domain in domains]
    return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


class Loaded(NamedTuple):
    """A model :func:`load_model` gave, passed on to a layer that would load it again (a session,
    compare, the export): loaded and checked once per command."""

    proto: onnx.ModelProto


def load_model(model) -> onnx.ModelProto:
    """A ModelProto from a path, bytes or a ModelProto, within dml_ep's limits (:func:`check_model`),
    its strings that are not UTF-8 escaped (:func:`decoded_strings`); ModelError says what is wrong.
    A :class:`Loaded` model is returned as it is.

    External data is read from the model file's folder, never outside it (onnx refuses locations
    that leave it); a model given without its path cannot have any.
    """
    if isinstance(model, Loaded):
        return model.proto
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
    proto = decoded_strings(proto, copy=proto is model)
    proto = densified(proto, copy=proto is model)
    check_model(proto)
    return proto


MAX_DENSE_BYTES = 1 << 32  # a sparse tensor made dense beyond this is refused, not allocated


def densified(proto: onnx.ModelProto, copy: bool) -> onnx.ModelProto:
    """The model with its sparse initializers and sparse Constants (``sparse_value``) made dense,
    as onnxruntime makes them when it loads a graph (its kernels and dml_ep's read dense tensors).
    ``copy``: the model is the caller's, changed in a copy."""
    if not proto.graph.sparse_initializer and not any(_sparse_value(node) for node in proto.graph.node):
        return proto
    if copy:
        proto, given = onnx.ModelProto(), proto
        proto.CopyFrom(given)
    proto.graph.initializer.extend(_dense(sparse) for sparse in proto.graph.sparse_initializer)
    del proto.graph.sparse_initializer[:]
    for node in proto.graph.node:
        sparse = _sparse_value(node)
        if sparse is not None:
            dense = onnx.helper.make_attribute("value", _dense(sparse.sparse_tensor))
            node.attribute.remove(sparse)
            node.attribute.append(dense)
    return proto


def _sparse_value(node: onnx.NodeProto) -> onnx.AttributeProto | None:
    """A Constant's sparse_value attribute; None for any other node."""
    return next((a for a in node.attribute if a.name == "sparse_value"), None) if node.op_type == "Constant" else None


def _dense(sparse: onnx.SparseTensorProto) -> onnx.TensorProto:
    """A SparseTensorProto as the dense tensor it stands for: ``values`` at ``indices`` (linear, [NNZ],
    or coordinates, [NNZ, rank]) in ``dims``, zeros elsewhere."""
    name = sparse.values.name
    shape = tuple(sparse.dims)
    if any(external_data_helper.uses_external_data(t) for t in (sparse.values, sparse.indices)):
        raise ModelError(f"sparse tensor {name!r}: its data is in an external file, which onnx loads for no sparse tensor "
                         "(it would be read from the current directory)")
    try:
        values = numpy_helper.to_array(sparse.values).reshape(-1)
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
        if any(d < 0 for d in shape) or int(np.prod(shape, dtype=object)) * values.itemsize > MAX_DENSE_BYTES:
            raise ValueError(f"dims {list(shape)} are not a shape of at most {MAX_DENSE_BYTES} bytes")
        flat = indices.reshape(-1) if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), shape)
        dense = np.zeros(int(np.prod(shape, dtype=np.int64)), values.dtype)
        dense[flat] = values  # an index outside dims raises
    except (ValueError, IndexError, TypeError) as exc:
        raise ModelError(f"sparse tensor {name!r}: {one_line(exc)}") from None
    return numpy_helper.from_array(dense.reshape(shape), name)


def decoded_strings(proto: onnx.ModelProto, copy: bool) -> onnx.ModelProto:
    """The model with each string that is not UTF-8 (ONNX strings are; protobuf parses them all the
    same, as bytes, which dml_ep's passes and protobuf's setters refuse) read with its invalid bytes
    backslash-escaped (b'\\xff' reads '\\\\xff'): onnxruntime runs such a model, and the same
    bytes read alike everywhere, so names still match. Refused: a graph input's or output's name,
    which onnxruntime's Python API can neither feed nor fetch, and an escaped string that is another
    string of the model. ``copy``: the model is the caller's, changed in a copy."""
    if not _has_bytes(proto):
        return proto
    for kind in ("input", "output"):
        for index, value in enumerate(getattr(proto.graph, kind)):
            if isinstance(value.name, bytes):
                raise ModelError(f"graph {kind} {index}: name {value.name!r} is not UTF-8 (ONNX strings are UTF-8)")
    if copy:
        proto, given = onnx.ModelProto(), proto
        proto.CopyFrom(given)
    texts = {text for *_, text in _strings(proto) if isinstance(text, str)}
    for message, name, index, text in list(_strings(proto)):
        if isinstance(text, bytes):
            escaped = text.decode("utf-8", "backslashreplace")
            if escaped in texts:
                raise ModelError(f"the string {text!r} is not UTF-8 (ONNX strings are UTF-8), and escaped it reads "
                                 f"{escaped!r}, another string of the model")
            if index is None:
                setattr(message, name, escaped)
            else:
                getattr(message, name)[index] = escaped
    return proto


def _strings(message):
    """``(message, field name, index or None, value)`` of each string set in ``message`` and the
    messages it holds. Of a tensor only the name and doc string: ListFields would copy its data."""
    if message.DESCRIPTOR is onnx.TensorProto.DESCRIPTOR:
        yield from ((message, name, None, getattr(message, name)) for name in ("name", "doc_string"))
        return
    for field, value in message.ListFields():
        if field.type == field.TYPE_STRING:
            values = enumerate(value) if field.is_repeated else [(None, value)]
            yield from ((message, field.name, index, each) for index, each in values)
        elif field.type == field.TYPE_MESSAGE:
            for each in value if field.is_repeated else (value,):
                yield from _strings(each)


def _has_bytes(message) -> bool:
    """Whether :func:`_strings` would yield a string that is not UTF-8; a graph's nodes in a loop of
    their own (:func:`_nodes_have_bytes`): the generators of :func:`_strings` over 10,000 nodes took
    most of a large model's load."""
    if message.DESCRIPTOR is onnx.TensorProto.DESCRIPTOR:
        return type(message.name) is bytes or type(message.doc_string) is bytes
    if message.DESCRIPTOR is onnx.ValueInfoProto.DESCRIPTOR and message.SerializeToString().isascii():  # as in _nodes_have_bytes
        return False
    for field, value in message.ListFields():
        if field.type == field.TYPE_STRING:
            if any(type(text) is bytes for text in (value if field.is_repeated else (value,))):
                return True
        elif field.message_type is onnx.NodeProto.DESCRIPTOR:
            if _nodes_have_bytes(value):
                return True
        elif field.type == field.TYPE_MESSAGE and any(_has_bytes(each) for each in (value if field.is_repeated else (value,))):
            return True
    return False


def _nodes_have_bytes(nodes) -> bool:
    for node in nodes:
        if node.SerializeToString().isascii():  # its strings are ASCII, so UTF-8 (a quarter of the time of reading them)
            continue
        for text in (*node.input, *node.output, node.name, node.op_type, node.domain, node.overload, node.doc_string):
            if type(text) is bytes:
                return True
        if (node.attribute or node.metadata_props or node.device_configurations) and any(
                _has_bytes(each) for each in (*node.attribute, *node.metadata_props, *node.device_configurations)):
            return True
    return False


def _read_model_file(path: str) -> bytes:
    """A regular file's bytes, no more than protobuf parses: a device such as /dev/zero would be
    read without end, and a FIFO would wait for a writer (opened non-blocking, it is refused at once)."""
    too_large = ModelError(f"{path}: larger than protobuf's limit of 2 GiB (a model so large keeps its weights in external data)")
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | getattr(os, "O_NONBLOCK", 0))) as f:
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
    """The limits dml_ep knows: IR version, opset versions, graph inputs. The rest of a model's
    validity is onnxruntime's to judge, when the planner loads it (:func:`dml_ep.ort.inference.static_values`): a model
    is refused where onnxruntime refuses it, and taken where onnxruntime takes it."""
    if proto.ir_version < MIN_IR_VERSION:
        raise ModelError(f"unsupported IR version {proto.ir_version} (need {MIN_IR_VERSION} or newer)")
    for opset in proto.opset_import:
        limit = MAX_OPSET.get(opset.domain)
        if limit is not None and opset.version > limit:
            raise ModelError(f"unsupported opset {opset.domain or 'ai.onnx'} {opset.version} (newest known: {limit})")
    for value in graph_inputs(proto.graph):
        check_input(value)


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs a node's attributes hold (If branches, Loop and Scan bodies). An ai.onnx op whose
    schema has no graph attribute is answered without reading its attributes (onnxruntime's load
    refuses attributes its schema does not have)."""
    if without_subgraphs(node):
        return []
    return [g for attribute in attributes(node) for g in ((attribute.g,) if attribute.HasField("g") else attribute.graphs)]


# The ai.onnx ops with a graph attribute in some version (a test checks it against onnx's schemas:
# reading them all costs a session 15 ms).
OPS_WITH_GRAPHS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def without_subgraphs(node: onnx.NodeProto) -> bool:
    """An ai.onnx op whose schema has no graph attribute, or an op of the DML EP's own domain (its
    fused ops, the parts of a DirectML graph: none has one): known from its op type alone (asked
    of every node, several times, by the passes and the planner)."""
    return node.op_type not in OPS_WITH_GRAPHS and node.domain in ("", "ai.onnx", "com.microsoft.dml")


# The ONNX ops that draw random values: each run draws anew, so two runs of one graph differ there.
RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"})


def draws_random_values(node: onnx.NodeProto) -> bool:
    return node.op_type in RANDOM_OPS


QUANTIZED_OPS = frozenset({"MatMulNBits", "MatMulBnb4", "QGemm", "QAttention", "QEmbedLayerNormalization"})


def is_quantized(node: onnx.NodeProto) -> bool:
    """Whether a node is one of quantization's: (De)QuantizeLinear, the Integer and QLinear ops,
    block-quantized weights."""
    op = node.op_type
    return "quantize" in op.lower() or "Integer" in op or op.startswith("QLinear") or op in QUANTIZED_OPS  # Dequantize's q is small


def attributes(node: onnx.NodeProto):
    """A node's attributes, read without touching an empty ``node.attribute``: protobuf (upb) gives
    a repeated field that is read storage of its own, for good (350 bytes a node, 3.4 MB on 10,000)."""
    return node.attribute if any(field.name == "attribute" for field, _ in node.ListFields()) else ()


def check_input(value: onnx.ValueInfoProto) -> None:
    """A fed tensor input needs a type and an element type."""
    kind = value.type.WhichOneof("value")
    if kind is None:
        raise ModelError(f"input {value.name!r} has no type")
    if kind != "tensor_type":
        return
    tensor_type = value.type.tensor_type
    if tensor_type.elem_type == onnx.TensorProto.UNDEFINED:
        raise ModelError(f"input {value.name!r} has an undefined element type")


def topological_order(graph: onnx.GraphProto) -> tuple[list[onnx.NodeProto], list[NodeIO]]:
    """Nodes in an order where every value a node reads (its subgraphs' outer-scope values too) is
    produced first, and their inputs and outputs (read once, here); ModelError on cycles and
    dangling inputs."""
    nodes = graph.node[:]  # read from protobuf once
    ios = [node_io(node) for node in nodes]
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    waiting, consumers = _dependencies(nodes, ios, available)
    ready = deque(i for i, count in enumerate(waiting) if count == 0)
    order = []
    while ready:
        index = ready.popleft()
        order.append(index)
        for consumer in consumers[index]:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    if len(order) != len(nodes):
        stuck = [nodes[i] for i, count in enumerate(waiting) if count]
        names = ", ".join(repr(n.name or n.op_type) for n in stuck[:3])
        raise ModelError(f"the graph has a cycle through {names}")
    return [nodes[i] for i in order], [ios[i] for i in order]


def _dependencies(nodes: list[onnx.NodeProto], ios: list[NodeIO], available: set[str]) -> tuple[list[int], list[list[int]]]:
    """For each node, how many of the values it reads other nodes produce, and which nodes read
    its outputs; ModelError on a value neither a node nor ``available`` (the graph) gives."""
    producer = {name: index for index, io in enumerate(ios) for name in io.outputs if name}
    waiting = [0] * len(nodes)
    consumers: list[list[int]] = [[] for _ in nodes]
    for index, (node, io) in enumerate(zip(nodes, ios)):
        for name in node_reads(node, io.inputs):
            if name in available:
                continue
            source = producer.get(name)
            if source is None:
                label = node.name or node.op_type
                raise ModelError(f"node {label!r} ({node.op_type}): input {name!r} is produced by no node and is not a graph input or initializer")
            waiting[index] += 1
            consumers[source].append(index)
    return waiting, consumers


class NodeIO(NamedTuple):
    """A node's inputs and outputs, read from protobuf once: a repeated field costs a microsecond a
    read, and placing and planning a node read its own some twenty times."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def node_io(node: onnx.NodeProto) -> NodeIO:
    return NodeIO(tuple(node.input[:]), tuple(node.output[:]))  # a slice is read in C: iterating reads item by item, at twice the cost


def node_reads(node: onnx.NodeProto, inputs: Sequence[str] | None = None) -> list[str]:
    """Every value a node reads: its inputs (``inputs``, if read already), then the outer-scope
    values its subgraphs read."""
    if without_subgraphs(node):
        inputs = node.input if inputs is None else inputs
        return [n for n in dict.fromkeys(inputs) if n] if len(inputs) > 1 else [n for n in inputs if n]
    outer = outer_scope_inputs(node)
    return [n for n in dict.fromkeys((*node.input, *outer) if outer else node.input) if n]


def outer_scope_inputs(node: onnx.NodeProto) -> list[str]:
    """The values a node's subgraphs (If branches, Loop and Scan bodies) read from the graph around
    it: they are inputs of the node as much as its own inputs are."""
    if without_subgraphs(node):
        return []
    names = []
    for subgraph in subgraphs(node):
        defined = {i.name for i in subgraph.input} | {t.name for t in subgraph.initializer}
        for inner in subgraph.node:
            names += [n for n in (*inner.input, *outer_scope_inputs(inner)) if n and n not in defined]
            defined.update(inner.output)
    return list(dict.fromkeys(names))


def copy_without(message, *fields: str, into=None):
    """A copy of a protobuf message without the named fields (a model without its graph, a graph
    without its initializers): the weights are not copied to be thrown away. Made in ``into`` (an
    empty message of the type, a model's graph say) if given: copying the copy in would copy
    thousands of nodes twice. A repeated field is merged in as a whole (``MergeFrom``: extend()
    makes a Python object of each node on the way, 1.5 times the time)."""
    copy = type(message)() if into is None else into
    for field, value in message.ListFields():
        if field.name in fields:
            continue
        if getattr(field, "is_repeated", None) or getattr(field, "label", None) == 3:  # LABEL_REPEATED
            getattr(copy, field.name).MergeFrom(value)
        elif field.type == field.TYPE_MESSAGE:
            getattr(copy, field.name).CopyFrom(value)
        else:
            setattr(copy, field.name, value)
    return copy


SMALL_CONSTANT = 1024  # elements: shape-like constants, whose values inference may read


def skeleton(model: onnx.ModelProto, added=(), nodes=None) -> onnx.ModelProto:
    """The model without copies of its weights: an initializer (of the model, or ``added``) of
    more than ``SMALL_CONSTANT`` elements stands as a graph input of its type and shape, all that
    onnxruntime's loading and type and shape inference need of it. ``nodes``, if given,
    replace the model's. Nothing of ``model`` is shared with it (keeping it does not keep the
    model alive)."""
    copy = copy_without(model, "graph")
    graph = copy_without(model.graph, "initializer", *(() if nodes is None else ("node",)), into=copy.graph)
    if nodes is not None:
        graph.node.extend(nodes)
    stand_in = set(stand_ins(model.graph, added))
    for tensor in [*model.graph.initializer, *added]:
        if tensor.name in stand_in:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
        elif np.prod(tensor.dims, dtype=np.int64) <= SMALL_CONSTANT:
            graph.initializer.append(tensor)
    return copy


def stand_ins(graph: onnx.GraphProto, added=()) -> list[str]:
    """The initializers :func:`skeleton` turns into graph inputs: the large ones not declared as inputs."""
    declared = {value.name for value in graph.input}
    return [t.name for t in [*graph.initializer, *added] if np.prod(t.dims, dtype=np.int64) > SMALL_CONSTANT and t.name not in declared]


def with_weights(skeleton: onnx.ModelProto, constants: dict[str, np.ndarray], initializers: list[str], stand_in: list[str]) -> onnx.ModelProto:
    """The model a :func:`skeleton` was made from, its initializers (named in order) back from
    ``constants``; the graph inputs that stood in for them (``stand_in``) removed."""
    model = copy_without(skeleton, "graph")
    copy_without(skeleton.graph, "initializer", "input", into=model.graph)
    removed = set(stand_in)
    model.graph.input.extend(value for value in skeleton.graph.input if value.name not in removed)
    kept = {tensor.name: tensor for tensor in skeleton.graph.initializer}
    model.graph.initializer.extend(kept[name] if name in kept else numpy_helper.from_array(constants[name], name) for name in initializers)
    return model


def constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Initializers (and Constant nodes with a tensor value) as numpy arrays, read once."""
    out = {tensor.name: _tensor_array(tensor, f"initializer {tensor.name!r}") for tensor in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.attribute) == 1:
            attr = node.attribute[0]
            if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                out[node.output[0]] = _tensor_array(attr.t, f"the value of Constant {node.name or node.output[0]!r}")
    return out


def _tensor_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """A tensor's array; a tensor onnx cannot read (dims without data, ...) is the model's fault, said as such."""
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:
        raise ModelError(f"{what} cannot be read: {exc}") from None


def graph_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Inputs the caller feeds (initializers listed as inputs are not fed)."""
    initialized = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in initialized]


def detached(messages) -> list:
    """Copies of protobuf messages (all of one type), held in one container: keeping a part of a
    model keeps the whole model (its weights too) alive, keeping a copy does not. A message copied
    on its own takes a protobuf arena of its own, a kilobyte for a small node; thousands of nodes
    copied into one repeated field share one."""
    messages = list(messages)
    if not messages:
        return []
    holder = onnx.GraphProto()
    container = holder.node if isinstance(messages[0], onnx.NodeProto) else holder.input
    container.extend(messages)
    return container[:]


def fixed_size(dim: onnx.TensorShapeProto.Dimension) -> int | None:
    """A declared dimension's size, None where it is not fixed: symbolic, missing, or negative
    (exporters write -1 for a free batch size; onnxruntime takes any negative size as unknown)."""
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


def declared_shape(value: onnx.ValueInfoProto, symbolic=1) -> tuple:
    """The declared shape of a value info; dimensions not fixed become ``symbolic``."""
    dims = value.type.tensor_type.shape.dim
    return tuple(symbolic if (size := fixed_size(d)) is None else size for d in dims)


def symbolic_dims(value: onnx.ValueInfoProto) -> list[str]:
    """The names of a value's dimensions that are not fixed ("?" for an unnamed one)."""
    return [d.dim_param or "?" for d in value.type.tensor_type.shape.dim if fixed_size(d) is None]


def element_dtype(value: onnx.ValueInfoProto) -> np.dtype:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))


_ORT_NODE_MESSAGES = (
    r"Node \((?P<name>.*?)\) Op \((?P<op>.*?)\) (?P<rule>.*)",
    r'In Node, \("(?P<name>.*?)", (?P<op>[^,]*), "[^"]*", -?\d+\) : .*? , Error (?P<rule>.*)',  # its load's schema check
    r"Non-zero status code returned while running (?P<op>\S+) node\. Name:'(?P<name>.*?)' Status Message: (?P<rule>.*)",
)


def ort_message(exc: Exception, with_node: bool = True) -> str:
    """An onnxruntime error on one line, without its status prefix, led by the node it names (if ``with_node``)."""
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : (This is an invalid model\. )?", "", one_line(exc))
    text = re.sub(r"^\S+\.(?:cc|cpp|h):\d+ .*?\) (?=\S)", "", text)  # a source line and a C++ signature lead some
    for pattern in _ORT_NODE_MESSAGES:
        match = re.fullmatch(pattern, text)
        if match:
            name, op_type, rule = match["name"], match["op"], match["rule"]
            if not with_node:
                return rule
            return f"node {name!r} ({op_type}): {rule}" if name else f"{op_type or 'a'} node: {rule}"
    return text


def one_line(exc: Exception) -> str:
    """An exception's message on one line (its type name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__
