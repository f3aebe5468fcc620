"""dml_ep: an emulator of onnxruntime's DirectML execution provider for quantized ONNX models."""

from .arithmetic import ARITHMETICS, Arithmetic
from .enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from .errors import DmlEpError
from .session import PROVIDERS, InferenceSession, ModelMetadata, NodeArg

# What scripts written for onnxruntime take from its module, so that ``import dml_ep as ort`` runs them.
from onnxruntime import GraphOptimizationLevel, OrtValue, RunOptions, SessionOptions  # noqa: E402


def get_available_providers() -> list[str]:
    return list(PROVIDERS)


def get_device() -> str:
    return "DML"

__version__ = "0.1.0"

__all__ = [
    "ARITHMETICS",
    "Arithmetic",
    "DML_FEATURE_LEVEL",
    "DML_OPERATOR_TYPE",
    "DML_TENSOR_DATA_TYPE",
    "DML_TENSOR_FLAGS",
    "DmlEpError",
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
