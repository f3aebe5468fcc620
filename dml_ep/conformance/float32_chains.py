"""Which float16 values the reference computed in float32 across nodes: onnxruntime's CPU EP has no
float16 kernel for many ai.onnx ops on x86-64 (Sigmoid, Mul, Add, MatMul, ...), so InsertCastTransformer
runs each in float32 between Casts and removes the Casts between adjacent ones: a chain such as the SiLU
MLP's Sigmoid -> Mul -> Mul -> MatMul reads unrounded float32 values where DirectML (and the real EP)
round every node's output to float16. No arithmetic of a single node reproduces that, so compare names
what none explains "graph" (:data:`FLOAT32_CHAIN`) instead of a cause of the node's own arithmetic.
"""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np

from ..core.graph import op_domain
from ..operators.nodes import PlanEntry
from ..ort.kernels import cpu_kernels

FLOAT32_CHAIN = ("onnxruntime's CPU EP runs these float16 nodes in float32 (no float16 kernel: InsertCastTransformer, which removes "
                 "the Casts between them), where DirectML rounds each node's output to float16")
FLOAT16 = "tensor(float16)"


@functools.lru_cache(maxsize=1)
def _float16_ops() -> frozenset[str]:
    """The ai.onnx ops for which the CPU EP registers a kernel admitting float16 in some type
    constraint (any opset: the x86-64 build's float16 kernels are few)."""
    return frozenset(op for op, kernels in cpu_kernels().items()
                     if any(FLOAT16 in allowed for kernel in kernels for allowed in kernel.type_constraints.values()))


def runs_in_float32(entry: PlanEntry, values: Mapping) -> bool:
    """Whether the CPU EP runs ``entry``'s node, a float16 ai.onnx op, in float32: it has no float16
    kernel for it. Contrib ops (SkipLayerNormalization, GroupQueryAttention, ...) are taken to have one."""
    node = entry.node
    output = values.get(entry.outputs[0]) if entry.outputs else None
    return (op_domain(node.domain) == "" and output is not None and np.asarray(output).dtype == np.float16
            and node.op_type not in _float16_ops())


def float32_chain(chain: list[PlanEntry], reference: Mapping, values: Mapping) -> bool:
    """Whether the reference made the last of ``chain`` (entries in plan order, run on the reference's
    inputs, ``values`` their outputs) from a float32 chain: a float16 value the reference does not show
    is made and read by nodes the CPU EP runs in float32, so InsertCastTransformer removed the Casts
    between them and the reader saw it unrounded."""
    in_float32 = [e for e in chain if runs_in_float32(e, values)]
    made = {name for e in in_float32 for name in e.outputs if name not in reference}
    return any(name in made for e in in_float32 for name in e.value_inputs)


def reads_float32(entry: PlanEntry, producers: Mapping, reference: Mapping) -> bool:
    """Whether ``entry``, run in float32 by the CPU EP, read a value the reference shows (its float16
    rounding: a Cast kept for another reader) unrounded from a producer also run in float32
    (``producers``: each value's plan index and entry)."""
    return runs_in_float32(entry, reference) and any(
        name in producers and runs_in_float32(producers[name][1], reference) for name in entry.value_inputs)
