"""The graph the DML EP runs, as an ONNX model that onnxruntime loads and Netron shows
(``inspect --save-rewritten``, ``SessionOptions.optimized_model_filepath``).

The graph is onnxruntime's after its rewrites for DML nodes, as dml_ep plans it: QDQ groups as
QLinear nodes, MatMulIntegerToFloat and onnxruntime's other fusions, the DML EP's activation
fusion; each node annotated with where it runs (:data:`NODE_KEYS`). Running it in onnxruntime gives
the original model's outputs: the rewrites are onnxruntime's own.

onnxruntime itself, asked for ``optimized_model_filepath`` in a DML session, writes the graph after
its level-based transformers and partitioning, with the DML EP's graph fusion off (it compiles
partitions, which cannot be saved: inference_session.cc, ``dml_graph_fusion_enabled =
optimized_model_filepath.empty() && ...``) but its operator fusion on (DmlOperatorFusionTransformer,
GraphTransformer.cpp): the file then holds com.microsoft.dml nodes (DmlFusedAdd, DmlFusedConv, ...)
whose schemas only a DML build registers (core/graph/dml_ops/dml_defs.cc, under ``USE_DML``), so
that onnxruntime's CPU build refuses to load it. dml_ep writes the same graph in standard and
com.microsoft ops instead, saying in the metadata what the DML EP runs:

- a com.microsoft.dml node of the DML EP's operator fusion is written as the two nodes it fuses, the
  op and its activation (with the model's names), both marked ``dml_ep.fused`` with the fused op
  and carrying its one DirectML operator;
- the parts dml_ep plans for a node the DML EP runs as a small DirectML graph of its own
  (``registration.GRAPHS``: DynamicQuantizeMatMul, QLinearSigmoid, QLinearConcat, MatMulNBits) are written as
  that node, as onnxruntime's graph has it, with ``dml_ep.parts`` naming the parts and
  ``dml_ep.operator`` their DirectML operators in order;
- every other node as planned. The Memcpy nodes onnxruntime adds between DML and CPU nodes are
  left out: they compute nothing, and only the DML EP has kernels for them.

Constants are initializers (the model's, and those the rewrites made); graph inputs and outputs are
the model's; value_info holds each value's declaration in the model, else its type and shape as
onnxruntime infers them before a run. A node the plan has not placed (its input shapes come with the
data: ``Plan.pending``) is written ``pending``. Like onnxruntime's own file, the model may hold a
node onnx's checker refuses though onnxruntime runs it: LayerNormFusion makes LayerNormalization in
the ai.onnx domain below opset 17, where only onnxruntime's contrib schema defines it.
"""

from __future__ import annotations

import itertools
import json

import onnx
from onnx.checker import MAXIMUM_PROTOBUF

from ..core import files
from ..core.errors import DmlEpError
from ..core.graph import ValueInfo, copy_without, node_reads
from ..ort.inference import type_proto
from ..passes.dml_fusion import DML_DOMAIN, FUSED_OP_TYPES, unfused
from ..passes.editable import Origin
from ..planning.plan import Plan
from ..planning.planner import Planner
from ..realep.placement import PLACEMENTS
from ..version import __version__
from .node_table import PENDING, PENDING_REASON, plan_rows
from .report import node_label

# The metadata of each node (NodeProto.metadata_props, which Netron shows):
PLACEMENT = "dml_ep.placement"  # node_table.placement: modelled, real-ep-dml or cpu; PENDING if planned only when run
OPERATOR = "dml_ep.operator"  # the DirectML operator(s) dml_ep runs it as, with a fused activation
REASON = "dml_ep.reason"  # why it runs on the CPU fallback, and what the real EP does with it
RULE = "dml_ep.rule"  # the rewrites that made it, in the order they applied (none for the model's own node)
FROM = "dml_ep.from"  # the model's nodes it stands for (a JSON list of their names, <op type -> output> if unnamed)
FUSED = "dml_ep.fused"  # the DML EP's fused node it is written out of (com.microsoft.dml:DmlFusedAdd)
PARTS = "dml_ep.parts"  # the nodes dml_ep plans for it, one DirectML operator each (A -> B -> C)

# The model's metadata (ModelProto.metadata_props):
VERSION = "dml_ep.version"
FEATURE_LEVEL = "dml_ep.feature_level"  # the DirectML feature level planned for
RELEASE = "dml_ep.ort_release"  # the onnxruntime release whose rewrites applied, or NO_QDQ_RULES
INPUT_SHAPES = "dml_ep.input_shapes"  # the input shapes planned for (JSON), symbolic dimensions as ``assumed``
ASSUMED = "dml_ep.assumed"  # the symbolic dimensions taken at a size (JSON), when any was
NO_QDQ_RULES = "none (QDQ rewrites off)"


def rewritten_model(planner: Planner, plan: Plan) -> onnx.ModelProto:
    """``planner``'s graph with ``plan``'s placements (a plan of that planner; its nodes not
    planned are ``pending``), in the form the module's docstring describes."""
    if "metadata_props" not in onnx.NodeProto.DESCRIPTOR.fields_by_name:  # IR version 10's, in onnx 1.16 on
        raise DmlEpError(f"writing the rewritten model needs onnx 1.16 or newer (node metadata), not onnx {onnx.__version__}")
    rows = {id(entry.node): row for entry, row in zip(plan.entries, plan_rows(plan))}
    nodes: list[onnx.NodeProto] = []
    pairs = zip(planner.nodes, planner.origins)
    for _, group in itertools.groupby(pairs, key=lambda pair: id(pair[1]) if pair[1].whole is not None else id(pair[0])):
        parts, origins = zip(*group)
        nodes.extend(written_nodes(parts, origins[0], [rows.get(id(part)) for part in parts]))

    model = copy_without(planner.header, "graph")
    model.graph.name = planner.source.graph.name
    model.graph.doc_string = planner.source.graph.doc_string
    stand_ins = set(planner.stand_ins)
    model.graph.input.extend(value for value in planner.source.graph.input if value.name not in stand_ins)
    model.graph.output.extend(planner.source.graph.output)
    inputs_outputs = {value.name for value in (*model.graph.input, *model.graph.output)}
    read = {name for node in nodes for name in node_reads(node)} | inputs_outputs
    model.graph.initializer.extend(onnx.numpy_helper.from_array(array, name) for name, array in planner.constants.items() if name in read)
    made = [name for node in nodes for name in node.output if name and name not in inputs_outputs]
    model.graph.value_info.extend(value_infos(planner, made))
    model.graph.node.extend(nodes)
    annotate(model.metadata_props, model_metadata(plan))
    return model


def written_nodes(parts: tuple, origin: Origin, rows: list[dict | None]) -> list[onnx.NodeProto]:
    """The nodes of onnxruntime's graph written for the planner's ``parts`` (one node, or the parts
    of a DirectML graph, with the plan rows of each), with their metadata: a DirectML graph as the
    node it was split from, the DML EP's fused node as the pair it fused."""
    metadata = node_metadata(origin, rows)
    if origin.whole is not None:
        written = [_copy(origin.whole)]
        metadata[PARTS] = " -> ".join(part.op_type for part in parts)
    elif parts[0].domain == DML_DOMAIN and parts[0].op_type in FUSED_OP_TYPES.values():
        written = fused_pair(parts[0], origin)
        metadata[FUSED] = f"{DML_DOMAIN}:{parts[0].op_type}"
    else:
        written = [_copy(parts[0])]
    for node in written:
        annotate(node.metadata_props, metadata)
    return written


def node_metadata(origin: Origin, rows: list[dict | None]) -> dict[str, str]:
    """What one written node says of where it runs, from the plan rows of the nodes it is written
    for (None: not planned). Written for several, it runs as far from dml_ep's model as the
    farthest of them (PLACEMENTS' order): on the CPU if any of them is."""
    planned = [row for row in rows if row is not None]
    if len(planned) < len(rows):
        metadata = {PLACEMENT: PENDING, REASON: PENDING_REASON}
    else:
        metadata = {PLACEMENT: max((row["placement"] for row in planned), key=PLACEMENTS.index)}
        operators = [row["runs_on"] for row in planned if "desc" in row]
        reasons = [row["reason"] for row in planned if "reason" in row]
        if operators:
            metadata[OPERATOR] = " -> ".join(operators)
        if reasons:
            metadata[REASON] = "; ".join(reasons)
    if origin.rule:
        metadata[RULE] = origin.rule
    metadata[FROM] = json.dumps([node_label(node) for node in origin.nodes])
    return metadata


def fused_pair(fused: onnx.NodeProto, origin: Origin) -> list[onnx.NodeProto]:
    """The op and the activation a com.microsoft.dml fused node stands for (dml_fusion.unfused),
    the activation and the value between them named as in the model where it has them."""
    op, activation = unfused(fused)
    user = next((n for n in origin.nodes if list(n.output) == list(fused.output) and n.op_type == activation.op_type), None)
    if user is not None:
        activation.name = user.name
        op.output[0] = activation.input[0] = user.input[0]
    return [op, activation]


def model_metadata(plan: Plan) -> dict[str, str]:
    metadata = {
        VERSION: __version__,
        FEATURE_LEVEL: str(plan.feature_level),
        RELEASE: plan.qdq_rules or NO_QDQ_RULES,
        INPUT_SHAPES: json.dumps({value.name: list(value.shape) for value in plan.inputs if value.shape is not None}),
    }
    if plan.assumed:
        metadata[ASSUMED] = json.dumps(plan.assumed)
    return metadata


def annotate(properties, metadata: dict[str, str]) -> None:
    """Set ``metadata`` in a metadata_props field, replacing the dml_ep keys it held (a model
    dml_ep wrote, planned again, says where its nodes run now)."""
    kept = [(p.key, p.value) for p in properties if not p.key.startswith("dml_ep.")]
    del properties[:]
    for key, value in [*kept, *metadata.items()]:
        properties.add(key=key, value=value)


def value_infos(planner: Planner, names: list[str]) -> list[onnx.ValueInfoProto]:
    """Each value's declaration in the model, as onnxruntime keeps it (its symbolic dimensions are
    what onnxruntime's fusions match shapes by: a Reshape's output has none otherwise); else its
    type and shape as onnxruntime infers them."""
    declared = {value.name: value for value in planner.source.graph.value_info}
    infos = []
    for name in names:
        info = planner.static.get(name)
        if name in declared:
            infos.append(declared[name])
        elif info is not None and info.type:
            infos.append(value_info(info))
    return infos


def value_info(info: ValueInfo) -> onnx.ValueInfoProto:
    """A value's type, and its shape where known (unknown dimensions left open)."""
    value = onnx.helper.make_value_info(info.name, type_proto(info.type))
    if info.dtype is not None and info.shape is not None:
        shape = value.type.tensor_type.shape
        shape.SetInParent()  # a scalar: a shape without dimensions
        for size in info.shape:
            dim = shape.dim.add()
            if size is not None:
                dim.dim_value = size
    return value


def model_writer(model: onnx.ModelProto) -> files.Writer:
    """How files.write_files writes the model; refused before any file is written if protobuf
    cannot hold it (dml_ep writes no external data)."""
    if model.ByteSize() > MAXIMUM_PROTOBUF:
        raise DmlEpError(f"the rewritten model is {model.ByteSize() / 2**30:.1f} GiB, more than an ONNX file without external data holds (2 GiB)")
    return lambda f: f.write(model.SerializeToString())


def rewritten_writer(path: str, planner: Planner, plan: Plan) -> tuple[files.Writer, str]:
    """``--save-rewritten PATH``'s writer (inspect's, compare's), and the line that says what the file holds once written."""
    rewritten = rewritten_model(planner, plan)
    said = (f"\n{'stdout' if path == '-' else path}: the rewritten model, {len(rewritten.graph.node)} node(s), "
            "each with where it runs in its metadata (dml_ep.*)")
    return model_writer(rewritten), said


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy to annotate: the planner's nodes stay as they are."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy
