"""dml_ep: an emulator of onnxruntime's DirectML execution provider for quantized ONNX models."""

from .arithmetic import ARITHMETICS, Arithmetic
from .enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from .errors import DmlEpError
from .session import InferenceSession, NodeArg

__version__ = "0.1.0"

__all__ = [
    "ARITHMETICS",
    "Arithmetic",
    "DML_FEATURE_LEVEL",
    "DML_OPERATOR_TYPE",
    "DML_TENSOR_DATA_TYPE",
    "DML_TENSOR_FLAGS",
    "DmlEpError",
    "InferenceSession",
    "NodeArg",
]
