"""onnxruntime's CPU EP kernel registry, read once: which ai.onnx ops it has kernels for, at which
versions and types. The planner asks it which function ops the CPU session would inline; compare,
which float16 ops the CPU EP runs in float32."""

from __future__ import annotations

import functools

from ..core.graph import op_domain

CPU = "CPUExecutionProvider"


@functools.lru_cache(maxsize=1)
def cpu_kernels() -> dict[str, list]:
    """The CPU EP's kernel definitions of ai.onnx ops, by op (onnxruntime's own registry)."""
    from onnxruntime.capi import _pybind_state

    kernels: dict[str, list] = {}
    for kernel in _pybind_state.get_all_opkernel_def():
        if kernel.provider == CPU and op_domain(kernel.domain) == "":
            kernels.setdefault(kernel.op_name, []).append(kernel)
    return kernels
