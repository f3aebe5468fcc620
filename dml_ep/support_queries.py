"""The real DML EP's support queries, replayed: the checks that send a node with a DML kernel to the CPU.

Each query is a C++ function of an operator file (onnxruntime/core/providers/dml/
DmlExecutionProvider/src/Operators/, the line where each starts at 1.24's commit) that reads the node's
attributes, its input and output counts, which optional ones are present, and their edge types; none
of those replayed here reads a shape. They did not change from the release that registered them to
1.24. ``NOT_REPLAYED`` names the queries a static replay does not make.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import onnx


@dataclasses.dataclass(frozen=True)
class QueryContext:
    """What a support query sees of a node (IMLOperatorSupportQueryContextPrivate)."""

    node: onnx.NodeProto
    input_types: tuple[str | None, ...]  # onnxruntime type names per input; None: absent or unknown
    input_shapes: tuple[tuple | None, ...]
    output_types: tuple[str | None, ...]
    output_shapes: tuple[tuple | None, ...]
    release: str = "1.24"

    def attribute(self, name: str, default=None):
        found = next((a for a in self.node.attribute if a.name == name), None)
        value = default if found is None else onnx.helper.get_attribute_value(found)
        return value.decode() if isinstance(value, bytes) else value

    def input_valid(self, index: int) -> bool:
        """IsInputValid: the input exists and is not an omitted optional one."""
        return index < len(self.node.input) and bool(self.node.input[index])

    def output_valid(self, index: int) -> bool:
        return index < len(self.node.output) and bool(self.node.output[index])


def _query_resize(ctx: QueryContext) -> str | None:
    """QueryResize, DmlOperatorResize.cpp L324."""
    if ctx.attribute("mode", "nearest") == "cubic":
        return "QueryResize declines mode 'cubic'"
    if ctx.attribute("exclude_outside", 0) != 0:
        return "QueryResize declines exclude_outside != 0"
    if ctx.attribute("extrapolation_value", 0.0) != 0.0:
        return "QueryResize declines extrapolation_value != 0"
    return None


def _query_skip_layer_normalization(ctx: QueryContext) -> str | None:
    """QuerySkipLayerNormalization, DmlOperatorSkipLayerNormalization.cpp L209: outputs mean (1)
    and inv_std_var (2) unused."""
    used = [index for index in (1, 2) if ctx.output_valid(index)]
    return f"QuerySkipLayerNormalization declines a used output {used[0]} (mean, inv_std_var)" if used else None


def _query_layer_normalization(ctx: QueryContext) -> str | None:
    """QueryLayerNormalization, DmlOperatorLayerNormalization.cpp L257: one output."""
    count = len(ctx.node.output)
    return None if count == 1 else f"QueryLayerNormalization declines {count} outputs (it takes Y alone)"


def _query_attention(ctx: QueryContext) -> str | None:
    """QueryAttention, DmlOperatorAttention.cpp L541."""
    if ctx.input_valid(4):
        return "QueryAttention declines a past input"
    if ctx.input_valid(6):
        return "QueryAttention declines a past_sequence_length input"
    if ctx.output_valid(1):
        return "QueryAttention declines a present output"
    for name in ("unidirectional", "do_rotary", "past_present_share_buffer"):
        if ctx.attribute(name, 0) != 0:
            return f"QueryAttention declines {name}=1"
    return None


def _query_qattention(ctx: QueryContext) -> str | None:
    """QueryQAttention, DmlOperatorQAttention.cpp L677."""
    if ctx.attribute("unidirectional", 0) != 0 and ctx.input_valid(5):
        return "QueryQAttention declines unidirectional=1 with a mask input"
    return next((f"QueryQAttention declines {name}=1" for name in ("do_rotary", "past_present_share_buffer")
                 if ctx.attribute(name, 0) != 0), None)


def _query_matmul_nbits(ctx: QueryContext) -> str | None:
    """QueryMatMulNBits, DmlOperatorMatMulNBits.cpp L176: 4 or 8 bits, K a whole number of blocks."""
    bits, k, block = ctx.attribute("bits", 4), ctx.attribute("K"), ctx.attribute("block_size")
    if bits not in (4, 8):
        return f"QueryMatMulNBits declines bits={bits}"
    if k is not None and block and k % block:
        return f"QueryMatMulNBits declines K={k}, not a multiple of block_size={block}"
    return None


def _query_max_pool(ctx: QueryContext) -> str | None:
    """QueryMaxPool, DmlOperatorPooling.cpp L184."""
    return "QueryMaxPool declines storage_order != 0" if ctx.attribute("storage_order", 0) != 0 else None


def _query_batch_normalization(ctx: QueryContext) -> str | None:
    """QueryBatchNormalization, DmlOperatorBatchNormalization.cpp L166: inference mode, five
    tensor inputs of the input's type."""
    if ctx.attribute("training_mode", 0) != 0:
        return "QueryBatchNormalization declines training_mode=1"
    if len(ctx.node.input) < 5:
        return f"QueryBatchNormalization declines {len(ctx.node.input)} inputs (it takes 5)"
    differing = next((i for i in range(1, 5) if ctx.input_types[i] != ctx.input_types[0]), None)
    if differing is not None:
        return f"QueryBatchNormalization declines input {differing} of type {ctx.input_types[differing]}, not the input's {ctx.input_types[0]}"
    return None


def _query_pad(ctx: QueryContext) -> str | None:
    """QueryPad, DmlOperatorPadding.cpp L104: the ``pads`` attribute (Pad-7) has no negative count."""
    return "QueryPad declines negative pads" if any(p < 0 for p in ctx.attribute("pads", [])) else None


def _query_slice(ctx: QueryContext) -> str | None:
    """QuerySlice, DmlOperatorSlice.cpp L45."""
    return None if len(ctx.node.input) <= 5 else f"QuerySlice declines {len(ctx.node.input)} inputs"


def _query_scatter(ctx: QueryContext) -> str | None:
    """QueryScatter, DmlOperatorScatter.cpp L111."""
    reduction = ctx.attribute("reduction", "none")
    return None if reduction == "none" else f"QueryScatter declines reduction '{reduction}'"


def _query_recurrent_neural_network(ctx: QueryContext) -> str | None:
    """QueryRecurrentNeuralNetwork, DmlOperatorRecurrentNeuralNetwork.cpp L413."""
    return None if ctx.attribute("layout", 0) == 0 else "QueryRecurrentNeuralNetwork declines layout=1"


def _query_qlinear_sigmoid(ctx: QueryContext) -> str | None:
    """QueryQLinearSigmoid, DmlOperatorQLinearSigmoid.cpp L166: both zero points given."""
    return None if len(ctx.node.input) >= 5 else f"QueryQLinearSigmoid declines {len(ctx.node.input)} inputs (both zero points needed)"


QUERIES: dict[str, Callable[[QueryContext], str | None]] = {
    "QueryAttention": _query_attention,
    "QueryBatchNormalization": _query_batch_normalization,
    "QueryLayerNormalization": _query_layer_normalization,
    "QueryMatMulNBits": _query_matmul_nbits,
    "QueryMaxPool": _query_max_pool,
    "QueryPad": _query_pad,
    "QueryQAttention": _query_qattention,
    "QueryQLinearSigmoid": _query_qlinear_sigmoid,
    "QueryRecurrentNeuralNetwork": _query_recurrent_neural_network,
    "QueryResize": _query_resize,
    "QueryScatter": _query_scatter,
    "QuerySkipLayerNormalization": _query_skip_layer_normalization,
    "QuerySlice": _query_slice,
}
NOT_REPLAYED = {
    "QueryEinSum": "EinSumHelper's recognition of the equation (which products, reductions and transposes "
                   "DirectML runs) is not replayed: an Einsum counts as accepted",
}


def declined(query_name: str, context: QueryContext) -> str | None:
    """None when the query accepts the node (or is one NOT_REPLAYED); else why it declines it."""
    query = QUERIES.get(query_name)
    return query(context) if query is not None else None
