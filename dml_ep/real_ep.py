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


def not_modelled_reason(node: onnx.NodeProto, origin: Origin) -> str:
    """Why a node with no dml_ep importer runs on the CPU fallback, and what the real EP does."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    name = f"{domain or 'ai.onnx'}::{node.op_type}"
    if has_dml_kernel(node):
        reason = f"{name}: {ON_DML}"
    else:
        reason = f"{name}: the real DML EP has no kernel for it"
    return f"{reason} ({origin.note})" if origin.note else reason
