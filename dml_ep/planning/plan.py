"""The plan: the whole model as DirectML operators and fallbacks (:mod:`dml_ep.operators.nodes`), in
execution order, and the MACs of its nodes."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from ..core.graph import ValueInfo
from ..operators.nodes import DmlNode, FallbackNode, PlanEntry


# Ops whose MACs are estimated from value shapes: conv weight input, matmul A input, and
# element-wise arithmetic (one MAC per output element).
CONV_WEIGHT_INPUT = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3, "DmlFusedConv": 1}
TRANSPOSED_CONV = ("ConvTranspose", "DmlFusedConvTranspose")  # MACs from the input: each input element times the filter's {OC/G, k...}
MATMUL_A_INPUT = {"MatMul": 0, "MatMulInteger": 0, "QLinearMatMul": 0, "Gemm": 0, "QGemm": 0, "MatMulIntegerToFloat": 0,
                  "DynamicQuantizeMatMul": 0, "FusedMatMul": 0, "MatMulNBits": 0, "DmlGemm": 0}
ELEMENT_WISE = {"Add", "Sub", "Mul", "Div", "Sum", "QLinearAdd", "QLinearMul", "DmlFusedAdd", "DmlFusedSum"}
# Attention: Q.K^T and P.V over T keys, (query + output elements) * T; T from these values (GQA: the present key's rows;
# MultiHeadAttention: the key's rows plus the past key's).
ATTENTION_KEYS = {"GroupQueryAttention": ("output", 1, 2), "MultiHeadAttention": ("input", 1, 1)}


@dataclasses.dataclass
class Plan:
    """The whole model as DirectML operators and fallbacks, in execution order."""

    entries: list[PlanEntry]
    feature_level: object
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    values: dict[str, ValueInfo]
    constants: dict[str, np.ndarray]
    qdq_rules: str | None = None  # the onnxruntime release whose QDQ rules applied; None: off
    pending: list[onnx.NodeProto] = dataclasses.field(default_factory=list)  # shapes known only when run
    assumed: dict[str, int] = dataclasses.field(default_factory=dict)  # symbolic dims taken at a size
    refused: str | None = None  # onnxruntime's inference refused the input shapes inside a subgraph: its message

    @property
    def dml_nodes(self) -> list[DmlNode]:
        return [e for e in self.entries if isinstance(e, DmlNode)]

    @property
    def fallback_nodes(self) -> list[FallbackNode]:
        return [e for e in self.entries if isinstance(e, FallbackNode)]

    def summary(self) -> dict:
        """How many of the model's own nodes, and what share of MACs, run on DirectML.

        A node of the model counts once, on DirectML if any operator made from it runs there (a DQ
        that EnsureUniqueDQForNodeUnit copied may feed both sides).
        """
        macs = [node_macs(e.node, self.values) for e in self.entries]
        on_dml = {id(n) for e in self.dml_nodes for n in e.origin.nodes}
        everywhere = {id(n) for e in self.entries for n in e.origin.nodes}
        dml_macs = sum(m for m, e in zip(macs, self.entries) if isinstance(e, DmlNode))
        total = sum(macs)
        return {
            "feature_level": str(self.feature_level),
            "qdq_rules": self.qdq_rules,
            "model_nodes": len(everywhere),
            "dml": {"nodes": len(on_dml), "operators": len(self.dml_nodes), "macs": dml_macs,
                    "macs_percent": 100.0 * dml_macs / total if total else 0.0},
            "fallback": {"nodes": len(everywhere - on_dml), "macs": total - dml_macs},
        }


def macs_inputs(node: onnx.NodeProto) -> list[str]:
    """The values whose shapes :func:`node_macs` reads for ``node`` (none for an op it counts as 0)."""
    if node.op_type in CONV_WEIGHT_INPUT:
        return [node.output[0], node.input[CONV_WEIGHT_INPUT[node.op_type]]]
    if node.op_type in TRANSPOSED_CONV:
        return [node.output[0], node.input[0], node.input[1]]
    if node.op_type in MATMUL_A_INPUT:
        return [node.output[0], node.input[0]]
    if node.op_type in ATTENTION_KEYS:
        return [node.output[0], node.input[0], *(name for name in _attention_key_values(node) if name)]
    return node.output[:1] if node.op_type in ELEMENT_WISE else []


def node_macs(node: onnx.NodeProto, values: dict[str, "ValueInfo"]) -> int:
    """A node's multiply-accumulates from the value shapes, by one rule on DirectML and the fallback
    (so MACs move with a node between them): convolutions N*OC*OH*OW*(C/G)*KH*KW (transposed: N*C*H*W*(OC/G)*KH*KW), matmul-like
    outputs*K, attention (query + output elements)*T (Q.K^T and P.V over T keys), element-wise arithmetic one per output
    element, other ops 0."""
    out = known_shape(values.get(node.output[0]) if node.output else None)
    if out is None:  # not a tensor, or its shape known only when run
        return 0
    outputs = int(np.prod(out))
    if node.op_type in CONV_WEIGHT_INPUT:
        weight = known_shape(values.get(node.input[CONV_WEIGHT_INPUT[node.op_type]]))
        return outputs * int(np.prod(weight[1:])) if weight is not None else 0
    if node.op_type in TRANSPOSED_CONV:
        x, weight = known_shape(values.get(node.input[0])), known_shape(values.get(node.input[1]))
        return int(np.prod(x)) * int(np.prod(weight[1:])) if x is not None and weight is not None else 0
    if node.op_type in MATMUL_A_INPUT:
        a = known_shape(values.get(node.input[0]))
        if not a:
            return 0
        transposed = any(attr.name == "transA" and attr.i for attr in node.attribute)
        return outputs * a[-2 if transposed else -1]
    if node.op_type in ATTENTION_KEYS:
        return _attention_macs(node, values, outputs)
    return outputs if node.op_type in ELEMENT_WISE else 0


def _attention_key_values(node: onnx.NodeProto) -> list[str]:
    """The values whose rows are an attention's keys: GQA's present key; MultiHeadAttention's key and past key."""
    where, index, _ = ATTENTION_KEYS[node.op_type]
    names = node.output if where == "output" else node.input
    past = [node.input[6]] if where == "input" and len(node.input) > 6 else []
    return [names[index] if len(names) > index else "", *past]


def _attention_macs(node: onnx.NodeProto, values: dict[str, "ValueInfo"], outputs: int) -> int:
    query = known_shape(values.get(node.input[0]))
    axis = ATTENTION_KEYS[node.op_type][2]
    names = _attention_key_values(node)
    keys = known_shape(values.get(names[0])) if names[0] else None
    past = known_shape(values.get(names[1])) if len(names) > 1 and names[1] else ()
    if query is None or keys is None or past is None or len(keys) <= axis:
        return 0
    return (int(np.prod(query)) + outputs) * (keys[axis] + (past[2] if len(past) == 4 else 0))


def known_shape(info: ValueInfo | None) -> tuple[int, ...] | None:
    """A tensor's shape when every dimension is known, else None."""
    return info.shape if info is not None and info.known else None
