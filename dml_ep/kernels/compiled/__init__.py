"""dml_ep's compiled kernels: Cython modules built when the package is installed (setup.py), each
the fused, one-pass form of a numpy twin in ``dml_ep.kernels`` or ``dml_ep.operators``.

The ``"onnxruntime"`` engine runs them; the ``"numpy"`` engine runs the twins, so the two engines
cross-check each other and the tests compare every kernel with its twin bit for bit. A module that
was not built (no C compiler at install) is None here, ``MISSING`` says why, and its twin runs.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

MODULES = ("direct_convolution", "im2col", "quantize", "requantize", "scale_bias", "table_lookup")


def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None


# Any: a compiled module has no stubs for mypy
direct_convolution: Any = _load("direct_convolution")
im2col: Any = _load("im2col")
quantize: Any = _load("quantize")
requantize: Any = _load("requantize")
scale_bias: Any = _load("scale_bias")
table_lookup: Any = _load("table_lookup")
MISSING = [name for name in MODULES if globals()[name] is None]
