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
    from .session import PROVIDERS, InferenceSession, ModelMetadata, NodeArg

    # What scripts written for onnxruntime take from its module, so that ``import dml_ep as ort`` runs them.
    from onnxruntime import GraphOptimizationLevel, OrtValue, RunOptions, SessionOptions  # noqa: E402

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
    "GraphOptimizationLevel",
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "OrtValue",
    "RunOptions",
    "SessionOptions",
    "get_available_providers",
    "get_device",
]
