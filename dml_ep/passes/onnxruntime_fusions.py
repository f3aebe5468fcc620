"""onnxruntime's own float fusions for the DML EP's nodes: Gelu, LayerNormalization,
SkipLayerNormalization, Attention, EmbedLayerNormalization, BiasGelu, FastGelu, QuickGelu,
FusedMatMul (MatmulTransposeFusion, MatMulScaleFusion), Gemm (MatMulAddFusion), and the Level-1
eliminations and constant folding, as onnxruntime itself makes them.

dml_ep does not write these again: it has onnxruntime optimize the graph (an
``ORT_ENABLE_EXTENDED`` session on the CPU EP, saved with ``optimized_model_filepath``) with every
transformer that does not run for DML nodes disabled (``NOT_FOR_DML``: their provider lists,
graph_transformer_utils.cc, lack the DML EP), and the ones dml_ep runs itself per release (the QDQ
passes, MatMulIntegerToFloatFusion), and reads the graph back. A node onnxruntime left as it was
keeps its origin; a node it made stands for the user's nodes it replaced (those whose outputs
now come from it, and those only they read), under the name of the fusion that makes its op type.

Not modelled: MatMulActivationFusion (DML nodes only, so a CPU session cannot run it); the
Level-1 TransposeOptimizer, QDQPropagationTransformer and DoubleQDQPairsRemover, which
onnxruntime runs before the QDQ rules, and ConstantSharing and CommonSubexpressionElimination
(memory only; the latter would also merge the DQs EnsureUniqueDQForNodeUnit copied). The float
fusions are those of the installed onnxruntime, whatever release's QDQ rules are chosen.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from ..core import graph as graph_module
from .editable import EditableGraph, Origin
from .function_inlining import inlined_on_cpu, restore, stand_in

NOT_FOR_DML = (
    # dml_ep's own passes, per release
    "QDQS8ToU8Transformer", "QDQSelectorActionTransformer", "QDQFinalCleanupTransformer", "MatMulIntegerToFloatFusion",
    "EnsureUniqueDQForNodeUnit", "WeightBiasQuantization", "Level2_RuleBasedTransformer",  # ClipQuant/ReluQuant rules
    # before the QDQ rules in onnxruntime: not modelled
    "DoubleQDQPairsRemover", "QDQPropagationTransformer", "TransposeOptimizer",
    # memory only, and CSE would merge the DQs EnsureUniqueDQForNodeUnit copied
    "ConstantSharing", "CommonSubexpressionElimination",
    # provider lists without the DML EP; the Level-2 TransposeOptimizer runs for CPU nodes alone, and
    # reshapes initializers in place (same name, other shape), which a graph read back keeps the old ones of
    "TransposeOptimizer_CPUExecutionProvider", "GemmActivationFusion", "DynamicQuantizeMatMulFusion", "ConvActivationFusion", "SimplifiedLayerNormFusion",
    "GatherSliceToSplitFusion", "GatherToSliceFusion", "BiasSoftmaxFusion", "BiasDropoutFusion", "Avx2WeightS8ToU8Transformer",
    "MatMulNBitsFusion", "GroupQueryAttentionFusion", "GeluApproximation",
)
FUSION_OF = {  # the onnxruntime transformer that makes each op type
    "Gelu": "GeluFusion", "LayerNormalization": "LayerNormFusion", "SkipLayerNormalization": "SkipLayerNormFusion",
    "Attention": "AttentionFusion", "EmbedLayerNormalization": "EmbedLayerNormFusion", "BiasGelu": "BiasGeluFusion",
    "FastGelu": "FastGeluFusion", "QuickGelu": "QuickGeluFusion", "FusedMatMul": "MatmulTransposeFusion/MatMulScaleFusion",
    "Gemm": "MatMulAddFusion", "Reshape": "ReshapeFusion",
}
NAME = "onnxruntime Level 1-2"
INSERTED_CAST = "InsertedPrecisionFreeCast_"
INLINED = "_inlfunc_"  # the names onnxruntime gives an inlined function body's values (function_utils.cc)
INLINING = "onnxruntime function inlining"  # a node of a function body inlined because no EP took the node (InlineNodes)


def onnxruntime_fusions(graph: EditableGraph, level: int = 2, qdq: bool = True,
                        taken_whole: Callable[[list[onnx.NodeProto]], list[onnx.NodeProto]] | None = None) -> bool:
    """Apply the fusions onnxruntime makes for DML nodes at optimization ``level`` (1: Level 1
    only, ORT_ENABLE_BASIC), with its QDQ handling on or off (``session.disable_quant_qdq``);
    True if the graph changed. ``taken_whole``: of the function ops the CPU session would inline,
    those the DML EP takes, which stay whole (:mod:`.function_inlining`)."""
    whole = _whole(graph, taken_whole)
    if whole is None:
        return False
    optimized = _optimized(graph, level, qdq, whole)
    if optimized is None:  # the CPU EP cannot run some node, so cannot rewrite the graph: it stays as it is
        return False
    ours = {_key(node): node for node in graph.nodes}
    order, made = [], []
    for node in graph_module.detached(optimized.graph.node):
        key = _key(node)
        mine = ours.get(key)
        if mine is not None and _attributes(mine) <= _attributes(node):  # onnxruntime writes defaults out
            del ours[key]
            order.append(mine)
        else:
            order.append(node)
            made.append(node)
    gone = {id(node) for node in ours.values()}
    removed = [node for node in graph.nodes if id(node) in gone]  # in graph order
    if not made and not removed:
        return False
    for name, array in _new_constants(optimized, graph):
        graph.put_constant(name, array)
    owner = _owners(graph, removed, made)
    owned_by: dict[int, list[onnx.NodeProto]] = {}
    for node in removed:
        if id(node) in owner:
            owned_by.setdefault(id(owner[id(node)]), []).append(node)
    for new in made:
        owned = owned_by.get(id(new), [])
        rule = _rule(new, owned)
        if owned:
            graph.replace(owned, new, rule, at=owned[-1])
        else:
            graph.insert_before(graph.nodes[0], new, Origin((rule,), ()), None)
    dropped = [node for node in removed if id(node) not in owner]
    if dropped:
        graph.replace(dropped, None, NAME, at=dropped[0])
    graph.reorder(order)  # onnxruntime's order: every node after the ones it reads
    return True


def _whole(graph: EditableGraph, taken_whole: Callable | None) -> list[onnx.NodeProto] | None:
    """The function ops to keep whole; None if no rewrite can apply (nothing to inline either)."""
    candidates = inlined_on_cpu(graph)  # onnxruntime inlines those no EP takes, whatever else matches
    if not candidates:
        return [] if may_rewrite(graph) else None
    return taken_whole(candidates) if taken_whole is not None else []


# What the enabled transformers start a match from (their source): a graph with none of it is
# left as it is, and needs no onnxruntime session (as long as one takes to create).
ALWAYS = {"Identity", "Dropout", "Expand", "Cast", "Shape", "Slice", "Pad", "Not", "Erf", "Tanh", "ReduceMean", "Gelu",
          "LayerNormalization", "MatMul", "Gemm", "Reshape", "BatchNormalization", "Softmax", "FusedMatMul"}
READ_BY = {"Sigmoid": {"Mul"}, "Conv": {"Add", "Mul", "BatchNormalization"}, "Relu": {"Clip"}, "Clip": {"Clip", "Relu"}}
NOOP_CONSTANT = {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1}  # NoopElimination; DivMulFusion starts from Div(1, x)


def may_rewrite(graph: EditableGraph) -> bool:
    """Whether some enabled transformer may match: an op it starts from (EliminateIdentity,
    CastElimination, ConstantFolding of a Shape, GeluFusion, LayerNormFusion, MatMulAddFusion,
    ReshapeFusion, ...), a Sigmoid read by a Mul (QuickGeluFusion), a float Conv read by an
    Add, Mul or BatchNormalization (ConvAddFusion, ...), a Relu or Clip read by a Clip or Relu
    (FuseReluClip), or an arithmetic op with a constant identity operand (NoopElimination, DivMulFusion)."""
    if not graph.has_op(*ALWAYS, *READ_BY, *NOOP_CONSTANT):
        return False
    identities: dict[tuple[str, int], bool] = {}  # (constant, identity) -> whether it is all that identity: a chain shares one
    read_by = {op_type: readers for op_type, readers in READ_BY.items() if graph.has_op(*readers)}  # whose readers are there
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx", "com.microsoft"):
            continue
        op_type = node.op_type
        if op_type in ALWAYS:
            return True
        readers = read_by.get(op_type)
        if readers and any(r.op_type in readers for name in graph.io(node).outputs if name for r in graph.consumers(name)):
            return True
        identity = NOOP_CONSTANT.get(op_type)
        if identity is None:
            continue
        for name in graph.io(node).inputs:
            if (name, identity) not in identities:
                identities[name, identity] = _all_equal(graph.constant(name), identity)
            if identities[name, identity]:
                return True
    return False


def _all_equal(array, value) -> bool:
    return array is not None and array.size <= 1024 and bool((array == value).all())


def _optimized(graph: EditableGraph, level: int, qdq: bool, whole: list[onnx.NodeProto]) -> onnx.ModelProto | None:
    """The graph as onnxruntime's Level 1 and 2 leave it with the transformers of NOT_FOR_DML off
    (None if the CPU EP cannot make a session of it). The large initializers go to onnxruntime as
    the arrays they are (``add_external_initializers``), not copied into the model, and come back
    in a file beside the optimized model, read only when they are new."""
    model = graph.to_model()
    kept = stand_in(model, whole, graph)
    options = ort.SessionOptions()
    _weights_as_arrays(model, graph, options)
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED if level >= 2 else ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if not qdq:
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    with tempfile.TemporaryDirectory(prefix="dml_ep-") as folder:
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "4096")
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                                 disabled_optimizers=list(NOT_FOR_DML))
        except Exception:  # noqa: BLE001  a node the CPU EP has no kernel for: its session cannot be made
            return None

        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
        restore(optimized.graph, kept)
        _float16_inlined_constants(optimized.graph)
        _undo_inserted_casts(optimized.graph)
        # onnx's walk over every tensor: the main graph's initializers first, then those of the
        # subgraphs (an If branch's folded constants go to the file too) and of attributes
        top_level = len(optimized.graph.initializer)
        for index, tensor in enumerate(onnx.external_data_helper._get_all_tensors(optimized)):
            known = index < top_level and tensor.name in graph.constants
            if not known and onnx.external_data_helper.uses_external_data(tensor):
                onnx.external_data_helper.load_external_data_for_tensor(tensor, folder)
    return optimized


def _weights_as_arrays(model: onnx.ModelProto, graph: EditableGraph, options: ort.SessionOptions) -> None:
    """The initializers the skeleton made graph inputs become initializers again, whose data
    onnxruntime takes from the arrays themselves; those no node reads any longer (a DQ's weight
    that a rewrite replaced) go, since onnxruntime drops them before it takes the arrays."""
    weights = [value for value in model.graph.input if value.name in graph.constants and value.name not in graph.graph_inputs]
    if not weights:
        return
    names = {value.name for value in weights}
    kept = [value for value in model.graph.input if value.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    read = {name for node in graph.nodes for name in graph_module.node_reads(node)} | set(graph.graph_outputs)
    given = []
    for value in (value for value in weights if value.name in read):
        array = graph.constants[value.name]
        if array.dtype.kind not in "biuf":  # int4, uint4 (ml_dtypes): no OrtValue takes them, so their data goes in the model
            model.graph.initializer.append(numpy_helper.from_array(array, value.name))
            continue
        array = np.ascontiguousarray(array)
        given.append((value.name, ort.OrtValue.ortvalue_from_numpy(array)))
        stand_in = model.graph.initializer.add(name=value.name, data_type=value.type.tensor_type.elem_type, dims=array.shape)
        stand_in.data_location = onnx.TensorProto.EXTERNAL
        stand_in.external_data.add(key="location", value="given-as-arrays")  # never read: the arrays override it
    if given:
        options.add_external_initializers([name for name, _ in given], [array for _, array in given])


def _float16_inlined_constants(graph: onnx.GraphProto) -> None:
    """The constants of a float16 function body onnxruntime inlined (``_inlfunc_<op>_<name>``, a
    Gelu-20's 0.5), which InsertCastTransformer turned into float32 in place for the nodes the CPU
    runs in float32 (the nodes reading them alone): float16 again, as the DML EP receives them."""
    recast: set[str] = set()
    other: set[str] = set()
    for node in graph.node:
        float32 = any(name.startswith(INSERTED_CAST) for name in (*node.input, *node.output))
        (recast if float32 else other).update(node.input)
    for tensor in graph.initializer:
        if (tensor.name.startswith(INLINED) and tensor.data_type == onnx.TensorProto.FLOAT and tensor.name in recast
                and tensor.name not in other and not onnx.external_data_helper.uses_external_data(tensor)):
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name))


def _undo_inserted_casts(graph: onnx.GraphProto) -> None:
    """Remove the Casts that the CPU EP's InsertCastTransformer put around float16 values for its
    float32-only kernels (a session step of the CPU EP, which no option turns off), and give back
    the names it moved to their float32 stand-ins (``InsertedPrecisionFreeCast_<name>``): the DML EP
    runs float16 as it is. A Cast to a float16 value from its own stand-in goes too (the end of a
    chain the CPU ran in float32: Sigmoid -> Mul -> Mul of a SiLU)."""
    def back(node: onnx.NodeProto) -> bool:
        return node.op_type == "Cast" and node.input[0] == INSERTED_CAST + node.output[0]

    into_float32 = {node.output[0]: node.input[0] for node in graph.node if node.op_type == "Cast" and node.output[0].startswith(INSERTED_CAST)}
    nodes = [node for node in graph.node if node.output[0] not in into_float32 and not back(node)]
    if len(nodes) == len(graph.node):
        return
    produced = {name for node in nodes for name in node.output}

    def restored(name: str) -> str:
        name = into_float32.get(name, name)
        plain = name[len(INSERTED_CAST):]
        return plain if name.startswith(INSERTED_CAST) and plain not in produced else name

    for node in nodes:
        node.input[:] = [restored(name) for name in node.input]
        node.output[:] = [restored(name) for name in node.output]
    del graph.node[:]
    graph.node.extend(nodes)


def _key(node: onnx.NodeProto) -> tuple:
    """A node by what it reads and writes, not its name."""
    return node.domain or "ai.onnx", node.op_type, tuple(node.input), tuple(node.output)


def _attributes(node: onnx.NodeProto) -> set[bytes]:
    return {a.SerializeToString() for a in node.attribute}


def _rule(new: onnx.NodeProto, owned: list) -> str:
    """The rewrite that made ``new`` from ``owned``: the fusion that makes its op type, or for a
    node only rewired, the elimination of the other nodes it replaced."""
    types = {n.op_type for n in owned}
    others = sorted(types - {new.op_type})
    if new.op_type in types and others:
        return "elimination of " + ", ".join(others)
    if new.op_type not in FUSION_OF and any(name.startswith(INLINED) for name in (*new.input, *new.output)):
        return INLINING  # a body node (a SequenceMap's Loop): the real EP partitions it afresh, no rule made it for DirectML
    return FUSION_OF.get(new.op_type, NAME)


def _new_constants(optimized: onnx.ModelProto, graph: EditableGraph):
    for tensor in optimized.graph.initializer:
        if tensor.name not in graph.constants:
            yield tensor.name, numpy_helper.to_array(tensor)


def _owners(graph: EditableGraph, removed: list, made: list) -> dict:
    """Each removed node's new node: the one that now makes one of its outputs, or else the owner
    of a removed node reading it (removed nodes taken last to first)."""
    maker = {name: new for new in made for name in new.output if name}
    owner: dict[int, onnx.NodeProto] = {}
    for node in reversed(removed):
        new = next((maker[n] for n in node.output if n in maker), None)
        if new is None:
            readers = [owner.get(id(r)) for n in node.output if n for r in graph.consumers(n)]
            new = next((r for r in readers if r is not None), None)
        if new is not None:
            owner[id(node)] = new
    return owner
