"""dml_ep: an emulator of onnxruntime's DirectML execution provider for quantized ONNX models."""

from .errors import DmlEpError, MissingRuntimeError, missing_runtime
from .version import __version__  # noqa: F401 (the package's version, re-exported)

_missing = missing_runtime()
if _missing is not None:
    # The package still imports, so that ``dml-ep`` can say in one line what to install; each name
    # of the API raises the typed error.
    _error: MissingRuntimeError = _missing

    def __getattr__(name: str):
        if name in __all__:
            raise _error
        raise AttributeError(f"module 'dml_ep' has no attribute {name!r}")
else:
    from .arithmetic import ARITHMETICS, Arithmetic
    from .enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
    from .io_binding import IOBinding
    from .session import PROVIDERS, InferenceSession, ModelMetadata, NodeArg

    # What scripts written for onnxruntime take from its module, so that ``import dml_ep as ort`` runs them: onnxruntime's
    # own where they are plain onnxruntime objects (the logger's settings apply to the onnxruntime sessions dml_ep runs
    # fallback nodes in; the version is the onnxruntime whose behaviour dml_ep gives).
    from onnxruntime import (  # noqa: E402
        ExecutionMode,
        ExecutionOrder,
        GraphOptimizationLevel,
        OrtValue,
        RunOptions,
        SessionOptions,
        get_build_info,
        get_version_string,
        set_default_logger_severity,
        set_default_logger_verbosity,
    )

    def __getattr__(name: str):
        if name == "sweep":  # on first use: a sweep's modules (hashlib, the pages) would cost every session's user
            from .sweep_run import sweep

            return sweep
        raise AttributeError(f"module 'dml_ep' has no attribute {name!r}")

    def get_available_providers() -> list[str]:
        return list(PROVIDERS)

    def get_device() -> str:
        return "DML"

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
