"""DirectML's enums, with the names and values of DirectML.h (DML_TARGET_VERSION 0x6400).

The member names drop DirectML's common prefix (``DML_TENSOR_DATA_TYPE_UINT8`` is
``DML_TENSOR_DATA_TYPE.UINT8``) so a desc reads like the C struct.
"""

from __future__ import annotations

import enum

import numpy as np

from .feature_levels import DML_FEATURE_LEVEL  # noqa: F401 (DirectML's enums are all here too)


class DML_TENSOR_DATA_TYPE(enum.IntEnum):
    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13

    @classmethod
    def from_numpy(cls, dtype) -> "DML_TENSOR_DATA_TYPE":
        """The DirectML data type of a numpy dtype (UNKNOWN when DirectML has none)."""
        return _FROM_NUMPY.get(np.dtype(dtype), cls.UNKNOWN)

    def numpy(self) -> np.dtype:
        return _TO_NUMPY[self]

    @property
    def element_size(self) -> int:
        """Bytes per element (the 4-bit types count as one byte here: :attr:`bits` tells them apart)."""
        return 1 if self.bits == 4 else self.numpy().itemsize

    @property
    def bits(self) -> int:
        """Bits per element: DirectML packs UINT4 and INT4 two to a byte, the first in the low nibble."""
        return _BITS[self]


_TO_NUMPY: dict[DML_TENSOR_DATA_TYPE, np.dtype] = {
    DML_TENSOR_DATA_TYPE.FLOAT32: np.dtype(np.float32),
    DML_TENSOR_DATA_TYPE.FLOAT16: np.dtype(np.float16),
    DML_TENSOR_DATA_TYPE.UINT32: np.dtype(np.uint32),
    DML_TENSOR_DATA_TYPE.UINT16: np.dtype(np.uint16),
    DML_TENSOR_DATA_TYPE.UINT8: np.dtype(np.uint8),
    DML_TENSOR_DATA_TYPE.INT32: np.dtype(np.int32),
    DML_TENSOR_DATA_TYPE.INT16: np.dtype(np.int16),
    DML_TENSOR_DATA_TYPE.INT8: np.dtype(np.int8),
    DML_TENSOR_DATA_TYPE.FLOAT64: np.dtype(np.float64),
    DML_TENSOR_DATA_TYPE.UINT64: np.dtype(np.uint64),
    DML_TENSOR_DATA_TYPE.INT64: np.dtype(np.int64),
    DML_TENSOR_DATA_TYPE.UINT4: np.dtype(np.uint8),
    DML_TENSOR_DATA_TYPE.INT4: np.dtype(np.int8),
}
_BITS = {dml_type: 4 if dml_type.name.endswith("INT4") else 8 * dtype.itemsize for dml_type, dtype in _TO_NUMPY.items()}
_FROM_NUMPY = {
    dtype: dml_type
    for dml_type, dtype in _TO_NUMPY.items()
    if dml_type not in (DML_TENSOR_DATA_TYPE.UINT4, DML_TENSOR_DATA_TYPE.INT4)
}


class DML_TENSOR_TYPE(enum.IntEnum):
    INVALID = 0
    BUFFER = 1


class DML_TENSOR_FLAGS(enum.IntFlag):
    NONE = 0
    OWNED_BY_DML = 1


class DML_OPERATOR_TYPE(enum.IntEnum):
    INVALID = 0
    ELEMENT_WISE_IDENTITY = 1
    ELEMENT_WISE_ADD = 4
    ELEMENT_WISE_CLIP = 8
    ELEMENT_WISE_DIVIDE = 10
    ELEMENT_WISE_MULTIPLY = 24
    ELEMENT_WISE_SUBTRACT = 30
    ELEMENT_WISE_QUANTIZE_LINEAR = 33
    ELEMENT_WISE_DEQUANTIZE_LINEAR = 34
    ACTIVATION_ELU = 35
    ACTIVATION_HARD_SIGMOID = 37
    ACTIVATION_IDENTITY = 38
    ACTIVATION_LEAKY_RELU = 39
    ACTIVATION_LINEAR = 40
    ACTIVATION_PARAMETRIC_SOFTPLUS = 43
    ACTIVATION_RELU = 44
    ACTIVATION_SCALED_ELU = 45
    ACTIVATION_SCALED_TANH = 46
    ACTIVATION_SIGMOID = 47
    ACTIVATION_SOFTPLUS = 49
    ACTIVATION_SOFTSIGN = 50
    ACTIVATION_TANH = 51
    ACTIVATION_THRESHOLDED_RELU = 52
    CONVOLUTION = 53
    GEMM = 54
    MAX_POOLING = 58
    JOIN = 63
    GATHER = 67
    ELEMENT_WISE_ADD1 = 89
    ACTIVATION_SHRINK = 90
    MAX_POOLING2 = 110
    SLICE1 = 111
    MATRIX_MULTIPLY_INTEGER = 117
    QUANTIZED_LINEAR_MATRIX_MULTIPLY = 118
    CONVOLUTION_INTEGER = 119
    QUANTIZED_LINEAR_CONVOLUTION = 120
    ACTIVATION_CELU = 128
    ELEMENT_WISE_QUANTIZED_LINEAR_ADD = 147
    DYNAMIC_QUANTIZE_LINEAR = 148
    QUANTIZED_LINEAR_AVERAGE_POOLING = 169
    MATRIX_MULTIPLY_INTEGER_TO_FLOAT = 170
    QUANTIZE = 173
    DEQUANTIZE = 174

    def __str__(self) -> str:
        return f"DML_OPERATOR_{self.name}"


class FieldEnum(enum.IntEnum):
    """A DirectML enum a desc field holds, written in full (``DML_MATRIX_TRANSFORM_NONE``)."""

    def __str__(self) -> str:
        return f"{type(self).__name__}_{self.name}"


class DML_QUANTIZATION_TYPE(FieldEnum):
    """What QUANTIZE's and DEQUANTIZE's QuantizationTensors hold (DirectML.h, DML_FEATURE_LEVEL_6_3)."""

    NONE = 0
    SCALE = 1
    SCALE_ZERO_POINT = 2


class DML_MATRIX_TRANSFORM(FieldEnum):
    """GEMM's TransA and TransB."""

    NONE = 0
    TRANSPOSE = 1


class DML_CONVOLUTION_MODE(FieldEnum):
    """CONVOLUTION's Mode: the filter flipped (CONVOLUTION) or not (CROSS_CORRELATION, what ONNX's Conv is)."""

    CONVOLUTION = 0
    CROSS_CORRELATION = 1


class DML_CONVOLUTION_DIRECTION(FieldEnum):
    """CONVOLUTION's Direction: FORWARD (ONNX Conv) or BACKWARD (ONNX ConvTranspose)."""

    FORWARD = 0
    BACKWARD = 1
