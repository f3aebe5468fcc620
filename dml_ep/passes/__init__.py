"""The graph rewrites onnxruntime applies before the DML EP sees a graph, each a small named pass.

Every pass edits an :class:`EditableGraph` in place and returns whether it changed anything.
:func:`constant_nodes_to_initializers` and :func:`constant_folding` do what onnxruntime does loading
a model (Level 1). :func:`qdq_transformer` runs onnxruntime's QDQ passes in its order (inference_session.cc,
graph_transformer_utils.cc): EnsureUniqueDQForNodeUnit; WeightBiasQuantization (1.20+);
ReluQuantFusion/ClipQuantFusion where the release applies them; the QDQ selector-action rules for
the nodes of one execution provider; QDQFinalCleanupTransformer. The DML EP's own activation
fusion (:func:`dml_operator_fusion`) runs after them, once types are known.

Not modelled (documented in docs/dml_ep_mapping.md): DoubleQDQPairsRemover, QDQPropagation, the
Split rule (WeightBiasQuantization's quantization of a float weight is: it changes the weights the
DirectML operators read).
"""

from __future__ import annotations

from ..core.releases import DEFAULT_RELEASE, RELEASE_NAMES, RELEASES
from .constant_folding import constant_folding, constant_nodes_to_initializers
from .dml_fusion import dml_operator_fusion
from .editable import EditableGraph, Origin
from .ensure_unique_dq import ensure_unique_dq_for_node_unit
from .matmul_integer_to_float import matmul_integer_to_float_fusion
from .onnxruntime_fusions import onnxruntime_fusions
from .qdq_actions import MATMUL_NBITS_ACCURACY_LEVEL, set_matmul_nbits_accuracy_level
from .qdq_final_cleanup import qdq_final_cleanup
from .qdq_rules import CPU, DEFAULT_RULE_SET, DML, RULE_SETS, qdq_selector_action_transformer
from .relu_clip_quant import relu_clip_quant_fusion
from .weight_bias_quantization import weight_bias_quantization

__all__ = [
    "CPU",
    "DEFAULT_RELEASE",
    "DEFAULT_RULE_SET",
    "DML",
    "EditableGraph",
    "MATMUL_NBITS_ACCURACY_LEVEL",
    "Origin",
    "RELEASES",
    "RELEASE_NAMES",
    "RULE_SETS",
    "constant_folding",
    "constant_nodes_to_initializers",
    "dml_operator_fusion",
    "matmul_integer_to_float_fusion",
    "onnxruntime_fusions",
    "qdq_transformer",
]


def qdq_transformer(graph: EditableGraph, rule_set: str = DEFAULT_RULE_SET, provider: str = DML, int8_allowed: bool = False,
                    level: int = 2, matmul_nbits_accuracy_level: int = MATMUL_NBITS_ACCURACY_LEVEL) -> bool:
    """onnxruntime's QDQ passes, with the rules of release range ``rule_set`` (a key of
    :data:`RULE_SETS`), for a graph whose nodes run on ``provider``; True if anything changed.
    At optimization ``level`` 1 (ORT_ENABLE_BASIC) only the Level-1 passes run: no QDQ group is fused.
    ``matmul_nbits_accuracy_level``: session.qdq_matmulnbits_accuracy_level, the level of the
    MatMulNBits nodes DQMatMulToMatMulNBits makes."""
    rules = RULE_SETS[rule_set]
    if not graph.has_op("QuantizeLinear", "DequantizeLinear"):  # every QDQ pass starts from a Q or DQ
        return False
    opset = graph.opset()
    changed = ensure_unique_dq_for_node_unit(graph)
    if rules.weight_bias_quantization:
        changed |= weight_bias_quantization(graph)
    if level < 2:
        return changed
    if provider in rules.relu_clip_providers:
        changed |= relu_clip_quant_fusion(graph)
    changed |= qdq_selector_action_transformer(graph, rules, provider, opset, int8_allowed)
    if matmul_nbits_accuracy_level != MATMUL_NBITS_ACCURACY_LEVEL:
        set_matmul_nbits_accuracy_level(graph, matmul_nbits_accuracy_level)
    changed |= qdq_final_cleanup(graph)
    return changed
