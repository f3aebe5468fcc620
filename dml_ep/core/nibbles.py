"""4-bit integers as ONNX (int4, uint4), MatMulNBits and DirectML (INT4, UINT4) store them: two to a
byte, the first element in the low nibble; an odd count leaves the last high nibble unused
(ONNX ``onnx.in.proto``; DirectML's DML_TENSOR_DATA_TYPE page: "[1,2,3,4,5] ... yields 3 bytes
[0x21, 0x43, 0x05]"; MatMulNBits packs each block of B and each row of its zero points alike)."""

from __future__ import annotations

import numpy as np


def pack(values: np.ndarray) -> np.ndarray:
    """The 4-bit values along the last axis (0..15, or -8..7 as their two's complement), packed:
    ``ceil(n / 2)`` bytes per row, the unused high nibble of an odd row 0."""
    codes = np.asarray(values).astype(np.uint8) & 0x0F
    if codes.shape[-1] % 2:
        codes = np.concatenate([codes, np.zeros((*codes.shape[:-1], 1), np.uint8)], axis=-1)
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack(packed: np.ndarray, count: int, signed: bool) -> np.ndarray:
    """The first ``count`` 4-bit values of a byte buffer, in order: uint8 0..15, or int8 -8..7 (``signed``)."""
    data = np.asarray(packed).reshape(-1).view(np.uint8)
    codes = np.empty(data.size * 2, np.uint8)
    codes[0::2] = data & 0x0F
    codes[1::2] = data >> 4
    codes = codes[:count]
    if signed:
        return (codes.astype(np.int8) ^ 8) - 8  # sign-extend bit 3
    return codes
