"""dml_ep's compiled kernels: Cython modules built when the package is installed (setup.py), each
the fused, one-pass form of a numpy twin in ``dml_ep.kernels`` or ``dml_ep.operators``.

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

MODULES = ("direct_convolution", "im2col", "quantize", "quantized_add", "requantize", "scale_bias", "sgemm", "table_lookup")

LEVELS: dict[str, str] = {}  # each loaded module's build: an x86-64 level, or "baseline"


def _levels() -> list[str]:
    """The x86-64 levels the running CPU supports above the baseline, highest first."""
    try:
        level = importlib.import_module(f"{__name__}.cpu_level").x86_64_level()
    except ImportError:
        return []
    return [f"x86_64_v{each}" for each in (4, 3) if each <= level]


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


SUPPORTED = _levels()
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
    """What runs, for ``--version`` and reports: the compiled kernels and their widest build, or
    which are missing (their numpy twins run)."""
    if MISSING:
        return f"compiled kernels not built: {', '.join(MISSING)} (their numpy twins run)"
    widest = max(LEVELS.values(), key=lambda level: (level != "baseline", level))
    return f"compiled kernels ({widest.replace('_', '-')})"


def flagged(kernel: Callable[..., int], elements: int, *arguments) -> np.ndarray:
    """The flat indices a DirectML-arithmetic kernel lists for its exact tier: ``kernel(*arguments,
    suspects)`` writes them into ``suspects`` and returns their count. The buffer has room for
    every element, and its pages are touched only for the indices written."""
    suspects = np.empty(elements, np.int64)
    return suspects[: kernel(*arguments, suspects)]
