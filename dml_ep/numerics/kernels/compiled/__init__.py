"""dml_ep's compiled kernels: Cython modules built when the package is installed (setup.py), each
the fused, one-pass form of a numpy twin in ``dml_ep.numerics.kernels`` or ``dml_ep.operators``.

The ``"onnxruntime"`` engine runs them; the ``"numpy"`` engine runs the twins, so the two engines
cross-check each other and the tests compare every kernel with its twin bit for bit. A module that
was not built (no C compiler at install) is None here, ``MISSING`` names it, and its twin runs.
On x86-64 some are also built for wider vectors (``<name>_x86_64_v4``, setup.py): the highest
level the CPU supports is loaded, and ``LEVELS`` says which.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

import numpy as np

from ....core.about import KERNELS as MODULES, kernels_summary, x86_64_levels


LEVELS: dict[str, str] = {}  # each loaded module's build: an x86-64 level, or "baseline"


def _load(name: str) -> ModuleType | None:
    """The module built for the highest x86-64 level this CPU supports, else the baseline one."""
    for level in [*SUPPORTED, "baseline"]:
        try:
            module = importlib.import_module(f"{__name__}.{name}" + ("" if level == "baseline" else f"_{level}"))
        except ImportError:
            continue
        LEVELS[name] = level
        return module
    return None


SUPPORTED = list(x86_64_levels())  # the x86-64 levels this CPU runs above the baseline, highest first
# Any: a compiled module has no stubs for mypy
direct_convolution: Any = _load("direct_convolution")
im2col: Any = _load("im2col")
quantize: Any = _load("quantize")
quantized_add: Any = _load("quantized_add")
requantize: Any = _load("requantize")
scale_bias: Any = _load("scale_bias")
sgemm: Any = _load("sgemm")
table_lookup: Any = _load("table_lookup")
MISSING = [name for name in MODULES if globals()[name] is None]


def summary() -> str:
    """What runs, for ``--version`` and reports (:func:`dml_ep.core.about.kernels_summary`)."""
    return kernels_summary(LEVELS, MISSING)


def flagged(kernel: Callable[..., int], elements: int, *arguments) -> np.ndarray:
    """The flat indices a DirectML-arithmetic kernel lists for its exact tier: ``kernel(*arguments,
    suspects)`` writes them into ``suspects`` and returns their count. The buffer has room for
    every element, and its pages are touched only for the indices written."""
    suspects = np.empty(elements, np.int64)
    return suspects[: kernel(*arguments, suspects)]
