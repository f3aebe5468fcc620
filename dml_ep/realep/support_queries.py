"""The real DML EP's support queries, replayed: the checks that send a node with a DML kernel to the CPU.

Each query is a C++ function of an operator file (onnxruntime/core/providers/dml/DmlExecutionProvider/
src/Operators/, lines at 1.24's commit) called by GetCapability through AbiCustomRegistry.cpp's
supportQuery lambda. Its context (MLSupportQueryContext, MLOperatorAuthorImpl.cpp) shows the node's
attributes, with the schema's defaults filled in by Graph::VerifyNodeAndOpMatch; GetInputCount and
GetOutputCount, which count omitted ("") optional values too; IsInputValid and IsOutputValid; and
each value's edge type and data type. It has no shape accessor: no query reads a shape, so the
context's shapes are not read here either. A query that throws (ML_CHECK_VALID_ARGUMENT) fails the
session's creation (the real EP fails); the replay raises RealEpError there. Only QueryEinSum changed from 1.17 to 1.24
(ac216267254, 1.19); MatMulNBits's ``bits`` has a schema default from 1.23 (2bdb57bb0a0).
"""

from __future__ import annotations

import dataclasses
import string
from typing import Any, Callable, Sequence

import onnx

from ..core.errors import RealEpError


@dataclasses.dataclass(frozen=True)
class QueryContext:
    """What dml_ep knows of a node when a support query runs on it."""

    node: onnx.NodeProto
    input_types: tuple[str | None, ...]  # onnxruntime type names per input; None: absent or unknown
    input_shapes: tuple[tuple | None, ...]  # a dim None: unknown; None: rank unknown or absent input
    output_types: tuple[str | None, ...]
    output_shapes: tuple[tuple | None, ...]
    release: str = "1.24"


_REQUIRED: Any = object()


def _version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _attribute(ctx: QueryContext, name: str, default: Any = _REQUIRED) -> Any:
    """The attribute's value (a string decoded), else the schema's ``default``; a required one missing
    fails loading the model."""
    found = next((a for a in ctx.node.attribute if a.name == name), None)
    if found is None:
        if default is _REQUIRED:
            raise RealEpError(f"{ctx.node.op_type} lacks its required attribute {name!r}: onnxruntime refuses the model", node=ctx.node)
        return default
    value = onnx.helper.get_attribute_value(found)
    return value.decode() if isinstance(value, bytes) else value


def _int32(ctx: QueryContext, name: str) -> int:
    """GetOptionalAttribute<int32_t>(name, 0): gsl::narrow_cast wraps the int64 value."""
    return (_attribute(ctx, name, 0) + 2**31) % 2**32 - 2**31


def _valid(names: Sequence[str], index: int) -> bool:
    """IsInputValid, IsOutputValid: within the count and not an omitted optional value."""
    return index < len(names) and bool(names[index])


def _nonzero(ctx: QueryContext, query: str, names: tuple[str, ...]) -> str | None:
    """The first of the int32 attributes ``names`` that is not 0, as the query's reason."""
    for name in names:
        if value := _int32(ctx, name):
            return f"{query} declines {name}={value}"
    return None


def _query_attention(ctx: QueryContext) -> str | None:
    """QueryAttention, DmlOperatorAttention.cpp L541-582."""
    for index, what in ((4, "a past input"), (6, "a past_sequence_length input")):
        if _valid(ctx.node.input, index):
            return f"QueryAttention declines {what}"
    if _valid(ctx.node.output, 1):
        return "QueryAttention declines a present output"
    return _nonzero(ctx, "QueryAttention", ("unidirectional", "do_rotary", "past_present_share_buffer"))


def _query_batch_normalization(ctx: QueryContext) -> str | None:
    """QueryBatchNormalization, DmlOperatorBatchNormalization.cpp L166-205."""
    if reason := _nonzero(ctx, "QueryBatchNormalization", ("training_mode",)):
        return reason
    if len(ctx.node.input) < 5:
        return f"QueryBatchNormalization declines {len(ctx.node.input)} inputs (it takes 5)"
    types = ctx.input_types[:5]
    for index, (name, kind) in enumerate(zip(ctx.node.input, types)):
        if not name or kind is not None and "(" in kind:  # GetInputEdgeDescription fails, or edgeType != Tensor
            return f"QueryBatchNormalization declines input {index} ({kind or 'omitted'}): no tensor"
    # The real EP knows every type; one dml_ep does not (None) is not compared.
    differing = next((i for i in range(1, 5) if None not in (types[0], types[i]) and types[i] != types[0]), None)
    if differing is not None:
        return f"QueryBatchNormalization declines input {differing} of type {types[differing]}, not the input's {types[0]}"
    return None


def _einsum_components(equation: str, node: onnx.NodeProto) -> list[list[int]] | None:
    """EinSumHelper::ParseEquationComponents (OperatorHelper.cpp L1393-1488): each component's label
    indices, the output last; None for an ellipsis."""
    labels: dict[str, int] = {}
    repeated: set[str] = set()
    components: list[list[int]] = []
    current: list[int] = []
    found_output = False
    characters = iter(equation.split("\0")[0] + "\0")
    for ch in characters:
        if ch in string.ascii_letters:
            if ch not in labels:
                if found_output:
                    raise RealEpError(f"QueryEinSum throws on {equation!r}: output label {ch!r} is no input's", node=node)
                labels[ch] = len(labels)
            elif not found_output:
                repeated.add(ch)
            current.append(labels[ch])
        elif ch != " ":
            components.append(current)
            current = []
            if ch == "-":
                if next(characters) != ">" or found_output:
                    raise RealEpError(f"QueryEinSum throws on {equation!r}: one '->' expected", node=node)
                found_output = True
            elif ch == ".":
                return None
            elif ch not in ",\0":
                raise RealEpError(f"QueryEinSum throws on {equation!r}: character {ch!r}", node=node)
    if not found_output:
        components.append([labels[ch] for ch in sorted(labels) if ch not in repeated])
    return components


# DetermineRecognizedOperatorType's table before 1.19 (OperatorHelper.cpp L1553-1570 at 1.18's
# commit): component ranks and label indices of the DML operators it maps equations to.
_EINSUM_PATTERNS_1_18 = {
    ((2, 2, 2), (0, 1, 1, 2, 0, 2)), ((3, 3, 3), (0, 1, 2, 0, 2, 3, 0, 1, 3)),
    ((4, 4, 4), (0, 1, 2, 3, 0, 1, 3, 4, 0, 1, 2, 4)), ((1, 1, 2), (0, 1, 0, 1)),
    ((2, 2, 2), (0, 1, 0, 2, 1, 2)), ((3, 3, 3), (0, 1, 2, 0, 1, 3, 0, 2, 3)),
    ((4, 4, 4), (0, 1, 2, 3, 0, 1, 2, 4, 0, 1, 3, 4)), ((2, 2, 2), (0, 1, 2, 1, 0, 2)),
    ((3, 3, 3), (0, 1, 2, 0, 3, 2, 0, 1, 3)), ((4, 4, 4), (0, 1, 2, 3, 0, 1, 4, 3, 0, 1, 2, 4)),
    ((1, 1, 0), (0, 0)), ((4, 4, 4), (0, 1, 2, 3, 0, 3, 2, 4, 0, 1, 2, 4)),
    ((4, 4, 4), (0, 1, 2, 3, 0, 1, 2, 4, 0, 3, 2, 4)), ((4, 4, 4), (0, 1, 2, 3, 0, 4, 2, 3, 0, 1, 2, 4)),
    ((2, 1), (0, 1, 0)), ((2, 1), (0, 1, 1)),
}


def _query_einsum(ctx: QueryContext) -> str | None:
    """QueryEinSum, DmlOperatorEinSum.cpp L406-416 (EinSumHelper: OperatorHelper.cpp L1386-1565)."""
    equation = _attribute(ctx, "equation")
    components = _einsum_components(equation, ctx.node)
    if components is None:
        return f"QueryEinSum declines equation {equation!r}: an ellipsis"
    if len(components) > 3:
        return f"QueryEinSum declines equation {equation!r}: {len(components) - 1} inputs"
    if _version(ctx.release) >= (1, 19):  # any 1- or 2-input equation
        return None
    *inputs, output = components
    if len(inputs) == 1 and len(output) in (0, len(inputs[0])):
        return None  # identity, transpose, reduction to a scalar
    if len(inputs) == 2 and inputs[0] == inputs[1] == output:
        return None  # elementwise multiplication
    pattern = (tuple(map(len, components)), tuple(label for c in components for label in c))
    if pattern in _EINSUM_PATTERNS_1_18:
        return None
    return f"QueryEinSum declines equation {equation!r}: none of its patterns before 1.19"


def _query_layer_normalization(ctx: QueryContext) -> str | None:
    """QueryLayerNormalization, DmlOperatorLayerNormalization.cpp L257-260."""
    count = len(ctx.node.output)
    return None if count == 1 else f"QueryLayerNormalization declines {count} outputs (it takes Y alone)"


def _query_matmul_nbits(ctx: QueryContext) -> str | None:
    """QueryMatMulNBits, DmlOperatorMatMulNBits.cpp L176-199."""
    bits = _attribute(ctx, "bits", 4 if _version(ctx.release) >= (1, 23) else _REQUIRED)
    if bits not in (4, 8):
        return f"QueryMatMulNBits declines bits={bits}"
    k, block = _attribute(ctx, "K") % 2**32, _attribute(ctx, "block_size")  # K narrowed to uint32
    if block <= 0:
        raise RealEpError(f"QueryMatMulNBits throws on block_size={block}", node=ctx.node)
    return f"QueryMatMulNBits declines K={k}, not a multiple of block_size={block}" if k % block else None


def _query_max_pool(ctx: QueryContext) -> str | None:
    """QueryMaxPool, DmlOperatorPooling.cpp L184-197."""
    return "QueryMaxPool declines storage_order != 0" if _int32(ctx, "storage_order") else None


def _query_pad(ctx: QueryContext) -> str | None:
    """QueryPad, DmlOperatorPadding.cpp L104-119."""
    return "QueryPad declines negative pads" if any(p < 0 for p in _attribute(ctx, "pads", [])) else None


def _query_qattention(ctx: QueryContext) -> str | None:
    """QueryQAttention, DmlOperatorQAttention.cpp L677-701."""
    if (unidirectional := _int32(ctx, "unidirectional")) and _valid(ctx.node.input, 5):
        return f"QueryQAttention declines unidirectional={unidirectional} with a mask input"
    return _nonzero(ctx, "QueryQAttention", ("do_rotary", "past_present_share_buffer"))


def _query_qlinear_sigmoid(ctx: QueryContext) -> str | None:
    """QueryQLinearSigmoid, DmlOperatorQLinearSigmoid.cpp L166-178."""
    count = len(ctx.node.input)
    return None if count >= 5 else f"QueryQLinearSigmoid declines {count} inputs (both zero points needed)"


def _query_recurrent_neural_network(ctx: QueryContext) -> str | None:
    """QueryRecurrentNeuralNetwork, DmlOperatorRecurrentNeuralNetwork.cpp L413-433."""
    return _nonzero(ctx, "QueryRecurrentNeuralNetwork", ("layout",))


def _query_resize(ctx: QueryContext) -> str | None:
    """QueryResize, DmlOperatorResize.cpp L324-357."""
    if _attribute(ctx, "mode", "nearest") == "cubic":
        return "QueryResize declines mode 'cubic'"
    if _int32(ctx, "exclude_outside"):
        return "QueryResize declines exclude_outside != 0"
    if _attribute(ctx, "extrapolation_value", 0.0) != 0.0:
        return "QueryResize declines extrapolation_value != 0"
    return None


def _query_scatter(ctx: QueryContext) -> str | None:
    """QueryScatter, DmlOperatorScatter.cpp L111-125."""
    reduction = _attribute(ctx, "reduction", "none")
    return None if reduction == "none" else f"QueryScatter declines reduction '{reduction}'"


def _query_skip_layer_normalization(ctx: QueryContext) -> str | None:
    """QuerySkipLayerNormalization, DmlOperatorSkipLayerNormalization.cpp L209-226."""
    used = [index for index in (1, 2) if _valid(ctx.node.output, index)]
    return f"QuerySkipLayerNormalization declines a used output {used[0]} (mean, inv_std_var)" if used else None


def _query_slice(ctx: QueryContext) -> str | None:
    """QuerySlice, DmlOperatorSlice.cpp L45-48."""
    count = len(ctx.node.input)
    return None if count <= 5 else f"QuerySlice declines {count} inputs"


QUERIES: dict[str, Callable[[QueryContext], str | None]] = {
    "QueryAttention": _query_attention,
    "QueryBatchNormalization": _query_batch_normalization,
    "QueryEinSum": _query_einsum,
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


def declined(query_name: str, context: QueryContext) -> str | None:
    """None when the query accepts the node (or is unknown to QUERIES); else a short reason naming the
    query and what it declines. Raises RealEpError where the C++ query throws (the session fails)."""
    query = QUERIES.get(query_name)
    return query(context) if query is not None else None
