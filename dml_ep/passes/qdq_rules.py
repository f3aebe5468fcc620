"""onnxruntime's QDQ rule table, release by release, and the transformer that applies it.

Each :class:`Rule` is a row of ``qdq_selector_action_transformer.cc``: its name, the target ops,
the selector, the action, and the execution providers whose nodes it applies to. A rule applies
when the target node is assigned to one of its providers; the first rule (in registration order)
whose selector selects the group wins. dml_ep assigns every target to the provider it emulates:
the DML EP registers a float kernel for each target op of these rules.

Rule sets (``RULE_SETS``), read from onnxruntime's source (docs/dml_ep_mapping.md has the detail):

- ``"1.24+"`` (the default): the unary rule takes AveragePool, GlobalAveragePool and Sigmoid on
  DML; LeakyRelu and Softmax are CPU-only again (the DML EP has no QLinearLeakyRelu/QLinearSoftmax).
- ``"1.20-1.23"``: every rule has an explicit provider list; the unary rule also takes LeakyRelu
  and Softmax on DML, making nodes the real EP has no kernel for; Resize's drop is CPU-only.
- ``"1.17-1.19"``: no provider lists on the drop, Concat and Conv rules (so Resize's Q/DQ drop too
  on DML), the unary rules CPU-only, fewer drop ops, Relu/Clip before a Q removed for every EP,
  and no weight/bias quantization. (1.17 itself kept MatMul CPU-only; 1.18 enabled it for DML.)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import onnx

from .editable import EditableGraph
from . import qdq_actions as actions
from . import qdq_selectors as selectors
from .relu_clip_quant import made_redundant

CPU, DML = "CPUExecutionProvider", "DmlExecutionProvider"
BOTH = frozenset({CPU, DML})


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row of onnxruntime's QDQ rule table."""

    name: str
    ops: dict[str, tuple[int, ...]]  # op type -> the opset versions it applies to (empty: any)
    select: Callable
    action: Callable
    providers: frozenset[str]
    makes: str  # what the action makes, for messages

    def covers(self, node: onnx.NodeProto, opset: int) -> bool:
        """Whether the rule takes this node: its op, at one of the rule's since-versions."""
        versions = self.ops.get(node.op_type)
        if node.domain not in ("", "ai.onnx") or versions is None:
            return False
        return not versions or onnx.defs.get_schema(node.op_type, opset).since_version in versions


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """What a range of onnxruntime releases does to QDQ groups before an EP sees them."""

    rules: tuple[Rule, ...]
    relu_clip_providers: frozenset[str]  # whose Relu/Clip before a Q is removed when the Q makes it redundant
    weight_bias_quantization: bool  # a float Conv/Gemm bias quantized into int32 + DQ (1.20+)

    @functools.cached_property
    def by_op_type(self) -> dict[str, tuple[Rule, ...]]:
        """The rules naming each op type, in table order: a node is matched against those only."""
        ops = dict.fromkeys(op for rule in self.rules for op in rule.ops)
        return {op: tuple(rule for rule in self.rules if op in rule.ops) for op in ops}


def _rules(unary_dml: set[str], *, newer: bool) -> tuple[Rule, ...]:
    """The table; ``newer`` (1.20+) adds the later drop ops and positive-scale check, and makes Resize CPU-only."""
    unary_ops = ("AveragePool", "LeakyRelu", "GlobalAveragePool", "Sigmoid", "Softmax")
    drop_ops = ("Expand", "Flatten", "Gather", "GatherElements", "Reshape", "Slice", "Squeeze", "Tile", "Transpose", "Unsqueeze")
    old_drop_ops = ("Gather", "Reshape", "Transpose", "Squeeze", "Unsqueeze")
    dml_unary = [op for op in unary_ops if op in unary_dml]
    cpu_unary = [op for op in unary_ops if op not in unary_dml]
    rules = [
        Rule("drop", {op: () for op in (drop_ops if newer else old_drop_ops)}, selectors.drop_qdq_16bit,
             actions.merge_into_target, BOTH, "drops its Q/DQ"),
    ]
    if newer:
        rules += [
            Rule("drop_no_int16_support", {"Resize": ()}, selectors.drop_qdq, actions.merge_into_target,
                 frozenset({CPU}), "drops its Q/DQ"),
            Rule("drop_no_int16_support_and_positive_scale", {"MaxPool": (12,), "ReduceMax": (), "ReduceMin": ()},
                 selectors.drop_qdq_positive_scale, actions.merge_into_target, BOTH, "drops its Q/DQ"),
        ]
    else:
        rules.append(Rule("drop_no_int16_support", {"MaxPool": (12,), "Resize": ()}, selectors.drop_qdq,
                          actions.merge_into_target, BOTH, "drops its Q/DQ"))
    rules += [
        Rule("dropDQ", {"ArgMax": ()}, selectors.drop_dq, actions.merge_into_target, BOTH, "drops its DQ"),
        Rule("1DQ", {op: () for op in dml_unary}, selectors.unary, actions.replace_with_qlinear(actions.MS_DOMAIN),
             BOTH, "com.microsoft QLinear<Op>"),
        Rule("1DQ", {op: () for op in cpu_unary}, selectors.unary, actions.replace_with_qlinear(actions.MS_DOMAIN),
             frozenset({CPU}), "com.microsoft QLinear<Op>"),
        Rule("2DQ", {"Add": (), "Mul": ()}, selectors.binary, actions.replace_with_qlinear(actions.MS_DOMAIN),
             frozenset({CPU}), "com.microsoft QLinear<Op>"),
        Rule("2DQ_DML", {"Add": ()}, selectors.binary, actions.replace_with_qlinear(actions.MS_DOMAIN),
             frozenset({DML}), "com.microsoft QLinearAdd"),
        Rule("*DQ", {"Concat": ()}, selectors.variadic, actions.variadic_replace_with_qlinear, BOTH,
             "com.microsoft QLinearConcat"),
        Rule("Conv", {"Conv": ()}, selectors.conv, actions.conv_replace_with_qlinear, BOTH, "QLinearConv"),
        Rule("MatMul", {"MatMul": ()}, selectors.matmul, actions.matmul_replace, BOTH,
             "QLinearMatMul (MatMulIntegerToFloat without a Q)"),
        Rule("Gemm", {"Gemm": ()}, selectors.gemm, actions.gemm_replace_with_quant, frozenset({CPU}), "com.microsoft QGemm"),
        Rule("Where", {"Where": ()}, selectors.where, actions.where_replace_with_qlinear, frozenset({CPU}),
             "com.microsoft QLinearWhere"),
    ]
    if newer:  # CPU-only in 1.19 (11bf309736); DML nodes too from 1.20 (05acfb90ab); Gemm and 2/8-bit weights from 1.25
        rules.append(Rule("DQMatMulToMatMulNBits", {"MatMul": ()}, selectors.dq_matmul_nbits, actions.dq_matmul_to_matmul_nbits,
                          BOTH, "com.microsoft MatMulNBits"))
    return tuple(r for r in rules if r.ops)


RULE_SETS = {
    "1.24+": RuleSet(_rules({"AveragePool", "GlobalAveragePool", "Sigmoid"}, newer=True), frozenset({CPU}), True),
    "1.20-1.23": RuleSet(_rules({"AveragePool", "LeakyRelu", "GlobalAveragePool", "Sigmoid", "Softmax"}, newer=True),
                         frozenset({CPU}), True),
    "1.17-1.19": RuleSet(_rules(set(), newer=False), BOTH, False),
}
DEFAULT_RULE_SET = "1.24+"


def qdq_selector_action_transformer(graph: EditableGraph, rule_set: RuleSet, provider: str, opset: int,
                                    int8_allowed: bool = False) -> bool:
    """Apply the rule set's rules to every node ``provider`` runs, in topological order; True if any fired.

    A node that reads a DQ but no rule fuses gets a note saying why: the condition that rejected
    its group, or a rule that would fuse it but is for other providers only, or int8 activations
    that only CPU nodes get converted, or a redundant Relu/Clip before the Q that only CPU nodes
    get removed (then the rule is named as ``cpu_rule``: the CPU EP's graph fuses the group).
    """
    changed = False
    for target in list(graph.nodes):
        if target not in graph:  # removed as part of an earlier group
            continue
        if not any(selectors.is_dq(graph.producer(name)) for name in target.input if name):
            continue  # every selector needs a DQ input: a node without one is no QDQ group, and needs no note
        notes, other_provider_rule = [], None
        for rule in rule_set.by_op_type.get(target.op_type, ()):
            if not rule.covers(target, opset):
                continue
            group = rule.select(graph, target, int8_allowed)
            if provider not in rule.providers:
                if not isinstance(group, str):
                    notes.append(_other_providers_note(rule, target))
                    other_provider_rule = other_provider_rule or rule.name
                continue
            if isinstance(group, str):
                rejection, cpu_fuses = _rejection_notes(graph, rule_set, rule, target, provider, group)
                notes += rejection
                if cpu_fuses:
                    other_provider_rule = other_provider_rule or rule.name
                continue
            _apply(graph, rule, group)
            changed = True
            break
        else:
            if notes:
                graph.note(target, "; ".join(notes), other_provider_rule)
    return changed


def _other_providers_note(rule: Rule, target: onnx.NodeProto) -> str:
    """The note for a group that ``rule`` selects but only fuses for other providers' nodes."""
    only = " and ".join(p.removesuffix("ExecutionProvider") for p in sorted(rule.providers))
    makes = rule.makes.replace("<Op>", target.op_type)
    return f"onnxruntime's QDQ rule '{rule.name}' ({target.op_type} -> {makes}) is for {only} nodes only"


def _rejection_notes(graph: EditableGraph, rule_set: RuleSet, rule: Rule, target: onnx.NodeProto, provider: str,
                     reason: str) -> tuple[list[str], bool]:
    """The notes for a group ``rule``'s selector rejected for ``reason``, and whether CPU nodes would
    fuse it all the same: their int8 Q/DQ become uint8 (QDQS8ToU8Transformer), or their redundant
    Relu/Clip before the Q goes (ReluQuantFusion/ClipQuantFusion)."""
    notes, cpu_fuses = [f"onnxruntime's QDQ rule '{rule.name}' does not apply: {reason}"], False
    if reason == selectors.INT8_NOT_ALLOWED and provider != CPU:
        notes.append("CPU nodes get int8 Q/DQ converted to uint8 first (QDQS8ToU8Transformer) and fused")
        cpu_fuses = True
    activation = selectors.between_op_and_q(graph, target)
    if activation is not None and provider not in rule_set.relu_clip_providers and made_redundant(graph, activation):
        notes.append(f"the Q makes the {activation.op_type} redundant, but onnxruntime removes it "
                     f"({activation.op_type}QuantFusion) for CPU nodes only, which then fuse")
        cpu_fuses = True
    return notes, cpu_fuses


def _apply(graph: EditableGraph, rule: Rule, group: selectors.NodeGroup) -> None:
    """Run the action and remove the group (SafelyRemoveNodes): the new node takes over the Qs'
    outputs, so the target and Qs go; a DQ goes unless something outside the group reads it."""
    new = rule.action(graph, group)
    members = {id(n) for n in group.nodes}

    def only_read_by_group(dq):
        return dq.output[0] not in graph.graph_outputs and all(id(c) in members for c in graph.consumers(dq.output[0]))

    dqs = [dq for dq in group.dqs if dq is not None and only_read_by_group(dq)]
    graph.replace([*dqs, group.target, *group.qs], new, rule.name, at=group.target)
