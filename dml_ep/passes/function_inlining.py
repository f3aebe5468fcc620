"""Function ops the DML EP keeps whole where onnxruntime's CPU session inlines them.

onnxruntime inlines a node only when no registered EP took it: after every EP's GetCapability,
``InlineNodes`` (graph_partitioner.cc, PartitionOnnxFormatModel) expands each node that has no
provider and ``CanBeInlined()`` (an ONNX function body), then partitions again; AOT inlining
(``InlineFunctionsAOTImpl``) likewise skips nodes an EP claims. The CPU session dml_ep asks for
onnxruntime's rewrites (:mod:`.onnxruntime_fusions`) has no kernel for some of these ops' types
(float16 Softmax, LogSoftmax, MeanVarianceNormalization), so it expands them (a Softmax into
ReduceMax/Sub/Exp/ReduceSum/Div); the DML EP registers a kernel for them and receives the node
whole. Those it has no kernel for (HardSwish, ai.onnx Gelu-20) are inlined for it too.

So for the nodes the DML EP takes (the planner says which: :func:`inlined_on_cpu` lists the
candidates), dml_ep gives the CPU session a stand-in: the same node on float32, between Casts, as
the CPU EP's InsertCastTransformer would run a float16 node it has a float32 kernel for; the
rewrites see a node of that op (a fusion may start from it as in the real session), and the node
read back is the original. A stand-in a fusion swallowed stays as onnxruntime left it.

Not covered: model-local functions (AOT inlining). com.microsoft ops, whose schemas onnx.defs lacks,
are probed with a CPU session of the node alone where a float16 input may leave the CPU without a kernel.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import Iterable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ..core.graph import op_domain
from ..ort.kernels import CPU, cpu_kernels
from .editable import EditableGraph

PREFIX = "dml_ep_kept_whole_"  # the stand-in's float32 values: no model's names start with it


def inlined_on_cpu(graph: EditableGraph) -> list[onnx.NodeProto]:
    """The nodes onnxruntime's CPU session would inline: ai.onnx ops whose schema at the model's
    opset has a function body, for whose types the CPU EP registers no kernel; com.microsoft ops
    with a float16 input (Gelu's body, contrib_defs.cc) that a CPU session of the node alone inlines."""
    opset = graph.opset("")
    found = []
    for node in graph.nodes:
        domain = op_domain(node.domain)
        types = tuple([_type_string(graph.dtype(name)) if name else None for name in node.input])
        if domain == "com.microsoft" and FLOAT16 in types and _contrib_inlined(
                node.op_type, tuple(a.SerializeToString() for a in node.attribute), types, len(node.output)):
            found.append(node)
        if domain != "" or not _has_function(node.op_type, opset):
            continue
        outputs = [_type_string(graph.dtype(name)) if name else None for name in node.output]
        if not _cpu_kernel(node.op_type, opset, types, tuple(outputs)):
            found.append(node)
    return found


FLOAT16 = "tensor(float16)"


@functools.lru_cache(maxsize=256)
def _contrib_inlined(op_type: str, attributes: tuple[bytes, ...], types: tuple, outputs: int) -> bool:
    """Whether onnxruntime's CPU session inlines a com.microsoft node of these attributes, input
    ``types`` (None: omitted or unknown) and output count (ORT's own schemas, with their function
    bodies, are not in onnx.defs): a session of such a node alone, made once per kind of node."""
    if None in types:
        return False
    node = helper.make_node(op_type, [f"i{i}" for i in range(len(types))], [f"o{i}" for i in range(outputs)], domain="com.microsoft")
    node.attribute.extend(onnx.AttributeProto.FromString(a) for a in attributes)
    inputs = [helper.make_tensor_value_info(name, getattr(TensorProto, t[len("tensor("):-1].upper()), None) for name, t in zip(node.input, types)]
    graph = helper.make_graph([node], "probe", inputs, [helper.make_empty_tensor_value_info(name) for name in node.output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory(prefix="dml_ep-") as folder:
        options.optimized_model_filepath = os.path.join(folder, "probe.onnx")
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=[CPU])
        except Exception:  # noqa: BLE001  no kernel and no body: the CPU session cannot run it either way
            return False
        return all(n.op_type != node.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)


@functools.lru_cache(maxsize=None)
def _has_function(op_type: str, opset: int) -> bool:
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    # CanBeInlined (graph.cc): a function body, or one made for the node (onnx's stubs name neither)
    return bool(getattr(schema, "has_function", False) or getattr(schema, "has_context_dependent_function", False))


def _type_string(dtype: np.dtype | None) -> str | None:
    if dtype is None:
        return None
    try:
        return "tensor(" + TensorProto.DataType.Name(helper.np_dtype_to_tensor_dtype(dtype)).lower() + ")"  # onnxruntime's names
    except (KeyError, TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def _cpu_kernel(op_type: str, opset: int, inputs: tuple, outputs: tuple) -> bool:
    """Whether the CPU EP has a kernel for the node, matched as kernel_registry.cc matches one: the
    schema's since-version within the kernel's range, and for each type constraint the first present
    value bound to it of one of the kernel's types. An unknown type is taken as matching."""
    schema = onnx.defs.get_schema(op_type, opset, "")
    bound = _bound_types(schema, inputs, outputs)
    for kernel in cpu_kernels().get(op_type, ()):
        start, end = kernel.version_range
        if start <= schema.since_version <= end and all(
                bound.get(name) is None or bound[name] in allowed for name, allowed in kernel.type_constraints.items()):
            return True
    return False


def _bound_types(schema, inputs: tuple, outputs: tuple) -> dict[str, str | None]:
    bound: dict[str, str | None] = {}
    for formals, actual in ((schema.inputs, inputs), (schema.outputs, outputs)):
        for index, formal in enumerate(formals):
            variadic = formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
            values = actual[index:] if variadic else actual[index:index + 1]
            first = next((t for t in values if t is not None), None)
            if first is not None and formal.type_str not in bound:
                bound[formal.type_str] = first
    return bound


def stand_in(model: onnx.ModelProto, nodes: Iterable[onnx.NodeProto], graph: EditableGraph) -> dict[str, onnx.NodeProto]:
    """Put each of ``nodes`` (found by its outputs) in ``model``, ``graph``'s, on float32 between
    Casts; the stand-ins' float32 outputs -> the original nodes, for :func:`restore`."""
    wanted = {tuple(node.output): node for node in nodes}
    if not wanted:
        return {}
    types = _float16_values(model, [name for node in wanted.values() for name in (*node.input, *node.output) if name], graph)
    kept: dict[str, onnx.NodeProto] = {}
    rebuilt: list[onnx.NodeProto] = []
    for node in model.graph.node:
        original = wanted.get(tuple(node.output))
        if original is None:
            rebuilt.append(node)
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for slot, name in enumerate(node.input):
            if name in types:
                copy.input[slot] = PREFIX + name
                rebuilt.append(helper.make_node("Cast", [name], [PREFIX + name], to=TensorProto.FLOAT))
        for slot, name in enumerate(node.output):
            if name in types:
                copy.output[slot] = PREFIX + name
        rebuilt.append(copy)
        rebuilt += [helper.make_node("Cast", [PREFIX + name], [name], to=TensorProto.FLOAT16) for name in node.output if name in types]
        kept[PREFIX + node.output[0] if node.output[0] in types else node.output[0]] = original
    del model.graph.node[:]
    model.graph.node.extend(rebuilt)
    return kept


def _float16_values(model: onnx.ModelProto, names: list[str], graph: EditableGraph) -> set[str]:
    """Which of ``names`` are float16: as onnxruntime typed the model (contrib ops too), and for a
    value a pass made, as onnx's inference of ``model`` does."""
    known = {name: graph.dtype(name) for name in names}
    found = {name for name, dtype in known.items() if dtype == np.float16}
    if all(dtype is not None for dtype in known.values()):
        return found
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    values = [*inferred.input, *inferred.value_info, *inferred.output]
    return found | {v.name for v in values if v.name in known and known[v.name] is None and v.type.tensor_type.elem_type == TensorProto.FLOAT16}


def restore(graph: onnx.GraphProto, kept: dict[str, onnx.NodeProto]) -> None:
    """Give back each original node for its stand-in in onnxruntime's optimized ``graph``, and drop
    the Casts and folded constants the stand-in brought; a stand-in a fusion swallowed stays."""
    if not kept:
        return
    found = {}  # by index: protobuf's wrappers of one node are not one object
    for index, node in enumerate(graph.node):
        original = kept.get(node.output[0]) if node.output else None
        if original is not None and node.op_type == original.op_type:
            found[index] = original
    if not found:
        return
    ours = {PREFIX + name for original in found.values() for name in (*original.input, *original.output) if name}
    nodes = []
    for index, node in enumerate(graph.node):
        if index in found:
            nodes.append(found[index])
        elif not (node.op_type == "Cast" and (node.output[0] in ours or node.input[0] in ours)):
            node.input[:] = [name[len(PREFIX):] if name in ours else name for name in node.input]  # a Cast pair onnxruntime removed
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    initializers = [t for t in graph.initializer if t.name not in ours]
    if len(initializers) < len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(initializers)
