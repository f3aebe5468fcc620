"""dml_ep: an emulator of onnxruntime's DirectML execution provider for quantized ONNX models.

The API's names are imported on first use (PEP 562): ``import dml_ep`` and ``dml-ep --version``
then cost no onnxruntime, onnx or numpy. Without onnxruntime the package still imports, so that
``dml-ep`` can say in one line what to install; each name of the API raises the typed error.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.errors import DmlEpError, MissingRuntimeError, missing_runtime
from .version import __version__  # noqa: F401 (the package's version, re-exported)

if TYPE_CHECKING:
    from onnxruntime import (ExecutionMode, ExecutionOrder, GraphOptimizationLevel, OrtValue, RunOptions, SessionOptions, get_build_info,
                             get_version_string, set_default_logger_severity, set_default_logger_verbosity)

    from .numerics.arithmetic import ARITHMETICS, Arithmetic
    from .core.enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
    from .runtime.io_binding import IOBinding
    from .runtime.session import InferenceSession, ModelMetadata, NodeArg, get_available_providers, get_device
    from .sweep.run import sweep

# Each lazy name -> the module it comes from. What scripts written for onnxruntime take from its module, so that
# ``import dml_ep as ort`` runs them, is onnxruntime's own where they are plain onnxruntime objects (the logger's
# settings apply to the onnxruntime sessions dml_ep runs fallback nodes in; the version is the onnxruntime whose
# behaviour dml_ep gives).
_SOURCES = {
    **dict.fromkeys(["ARITHMETICS", "Arithmetic"], ".numerics.arithmetic"),
    **dict.fromkeys(["DML_FEATURE_LEVEL", "DML_OPERATOR_TYPE", "DML_TENSOR_DATA_TYPE", "DML_TENSOR_FLAGS"], ".core.enums"),
    "IOBinding": ".runtime.io_binding",
    **dict.fromkeys(["InferenceSession", "ModelMetadata", "NodeArg", "get_available_providers", "get_device"], ".runtime.session"),
    "sweep": ".sweep.run",
    **dict.fromkeys(["ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel", "OrtValue", "RunOptions", "SessionOptions",
                     "get_build_info", "get_version_string", "set_default_logger_severity", "set_default_logger_verbosity"],
                    "onnxruntime"),
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'dml_ep' has no attribute {name!r}")
    missing = missing_runtime()
    if missing is not None:
        raise missing
    value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute's
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "ARITHMETICS",
    "Arithmetic",
    "DML_FEATURE_LEVEL",
    "DML_OPERATOR_TYPE",
    "DML_TENSOR_DATA_TYPE",
    "DML_TENSOR_FLAGS",
    "DmlEpError",
    "MissingRuntimeError",
    "ExecutionMode",
    "ExecutionOrder",
    "GraphOptimizationLevel",
    "IOBinding",
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "OrtValue",
    "RunOptions",
    "SessionOptions",
    "get_available_providers",
    "get_build_info",
    "get_device",
    "get_version_string",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "sweep",
]
