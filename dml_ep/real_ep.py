"""What the real DML EP does with nodes dml_ep does not model: the reason a plan gives for each.

dml_ep models the DirectML operators of its operator table (``dml_ep.operators.registration``);
the real EP runs many more. A node dml_ep leaves to the CPU
fallback is either one the real EP runs on DirectML too (dml_ep just does not model its
operator), or one the real EP has no kernel for (it runs on the CPU EP there as well).
"""

from __future__ import annotations

import onnx

from .passes.editable import Origin

# What the real EP does with a node dml_ep leaves to the CPU fallback: every fallback reason ends with one.
ON_DML = "on DirectML in the real EP, not modelled by dml_ep"
ON_DML_AS = "on DirectML in the real EP as DML_OPERATOR_{}, not modelled by dml_ep"
ON_CPU = "on the CPU in the real EP too"
ASSIGNED_TO_DML = "the real EP assigns it to DirectML (no support query declines it) and fails creating the operator"

# Ops the real DML EP has no kernel for among those QDQ rewrites can make (its kernel list,
# docs/OperatorKernels.md): onnxruntime's rules make them only for CPU nodes (1.20-1.23 made
# QLinearLeakyRelu and QLinearSoftmax for DML too, which the real EP then failed to run).
NO_DML_KERNEL = {
    ("com.microsoft", "QLinearMul"),
    ("com.microsoft", "QLinearLeakyRelu"),
    ("com.microsoft", "QLinearSoftmax"),
    ("com.microsoft", "QLinearWhere"),
    ("com.microsoft", "QGemm"),
}


def has_dml_kernel(node: onnx.NodeProto) -> bool:
    domain = "" if node.domain == "ai.onnx" else node.domain
    return (domain, node.op_type) not in NO_DML_KERNEL


def _attribute(node: onnx.NodeProto, name: str, default=None):
    found = next((a for a in node.attribute if a.name == name), None)
    return default if found is None else onnx.helper.get_attribute_value(found)


def _query_resize(node: onnx.NodeProto) -> str | None:
    """QueryResize (DmlOperatorResize.cpp L324-357)."""
    mode = _attribute(node, "mode", b"nearest")
    if (mode.decode() if isinstance(mode, bytes) else mode) == "cubic":
        return "QueryResize declines mode 'cubic'"
    if _attribute(node, "exclude_outside", 0) != 0:
        return "QueryResize declines exclude_outside != 0"
    if _attribute(node, "extrapolation_value", 0.0) != 0.0:
        return "QueryResize declines extrapolation_value != 0"
    return None


def _query_skip_layer_normalization(node: onnx.NodeProto) -> str | None:
    """QuerySkipLayerNormalization: the optional outputs mean (1) and inv_std_var (2) unused."""
    used = [index for index in (1, 2) if index < len(node.output) and node.output[index]]
    return f"QuerySkipLayerNormalization declines a used output {used[0]} (mean, inv_std_var)" if used else None


def _query_qattention(node: onnx.NodeProto) -> str | None:
    """QueryQAttention (DmlOperatorQAttention.cpp L677-700)."""
    if _attribute(node, "unidirectional", 0) == 1 and len(node.input) > 5 and node.input[5]:
        return "QueryQAttention declines unidirectional=1 with a mask input"
    if _attribute(node, "do_rotary", 0) == 1:
        return "QueryQAttention declines do_rotary=1"
    if _attribute(node, "past_present_share_buffer", 0) == 1:
        return "QueryQAttention declines past_present_share_buffer=1"
    return None


# The support queries of ops dml_ep does not model (those it models are in its registration rows):
# a node they decline runs on the CPU in the real EP.
SUPPORT_QUERIES = {
    ("", "Resize"): _query_resize,
    ("com.microsoft", "SkipLayerNormalization"): _query_skip_layer_normalization,
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): _query_skip_layer_normalization,
    ("com.microsoft", "QAttention"): _query_qattention,
}


def not_modelled_reason(node: onnx.NodeProto, origin: Origin, float_op: bool = False) -> str:
    """Why a node with no dml_ep importer runs on the CPU fallback, and what the real EP does:
    declined by its support query (CPU), no DML kernel (CPU), or on DirectML. ``float_op``: its
    output is floating point, a float operator outside dml_ep's bit-exact scope."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    name = f"{domain or 'ai.onnx'}::{node.op_type}"
    query = SUPPORT_QUERIES.get((domain, node.op_type))
    declined = query(node) if query is not None else None
    if not has_dml_kernel(node):
        reason = f"{name}: the real DML EP has no kernel for it"
    elif declined:
        reason = f"{name}: {declined}; {ON_CPU}"
    else:
        reason = f"{name}: {'float op ' if float_op else ''}{ON_DML}"
    return f"{reason} ({origin.note})" if origin.note else reason


# Where a node runs in the real EP, as pictures colour it: dml_ep models its DirectML operator; the
# real EP runs it on DirectML (or assigns it there) but dml_ep does not model it; or it runs on the CPU.
PLACEMENTS = ("modelled", "real-ep-dml", "cpu")


def fallback_placement(reason: str) -> str:
    """Where the real EP runs a node dml_ep leaves to the CPU fallback, read from the end every
    fallback reason has (ON_DML and its variants, ASSIGNED_TO_DML, ON_CPU, no kernel)."""
    return "real-ep-dml" if "on DirectML in the real EP" in reason or "the real EP assigns it to DirectML" in reason else "cpu"
