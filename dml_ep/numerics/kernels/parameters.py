"""How kernels read their inputs: through the desc, at least 4-D, and scale / zero-point values."""

from __future__ import annotations

import math

import numpy as np

from ...core.errors import QuantizationParameterError
from ...core.tensor_desc import checked_buffer, view


def as4d(array: np.ndarray) -> np.ndarray:
    """A view with 1s prefixed up to 4 dimensions, DirectML's {N, C, H, W} (or {B, C, M, N})."""
    return array if array.ndim >= 4 else array.reshape((1,) * (4 - array.ndim) + array.shape)


def read4d(tensors: dict, desc, field: str) -> np.ndarray:
    """The buffer bound to ``field``, read through the desc's sizes and strides, at least 4-D."""
    return as4d(view(tensors[field], getattr(desc, field)))


def scalar(tensors: dict, desc, field: str, default: float = 0.0) -> float:
    """A per-tensor parameter's value; ``default`` when the optional tensor is null (zero points: 0)."""
    tensor_desc = getattr(desc, field)
    if tensor_desc is None:
        return default
    return float(checked_buffer(tensors[field], tensor_desc).item(0))  # the desc's first element is the buffer's, whatever its strides


def parameter4d(tensors: dict, desc, field: str, default: float = 0.0) -> np.ndarray:
    """A per-tensor or per-axis parameter as float64, 4-D, broadcastable to the 4-D output."""
    if getattr(desc, field) is None:
        return np.full((1, 1, 1, 1), default)
    return read4d(tensors, desc, field).astype(np.float64)


def checked_scale(scale: np.ndarray, node=None, tensor: str | None = None) -> np.ndarray:
    """A scale's values as DirectML needs them, finite and positive (a zero scale is undefined
    behaviour in DirectML): checked when the model is planned for a constant, when it arrives for
    one bound at run time (the kernel names the desc field, the executor the node and its value)."""
    if np.size(scale) == 1:  # per tensor: Python's checks of one float, not two numpy reductions
        value = np.asarray(scale).item()
        finite, positive = math.isfinite(value), value > 0
    else:
        finite, positive = bool(np.all(np.isfinite(scale))), not np.any(scale <= 0)
    if not finite:
        raise QuantizationParameterError("scale is NaN or infinite", node=node, tensor=tensor)
    if not positive:
        flat = np.asarray(scale).reshape(-1)
        raise QuantizationParameterError(
            f"scale {flat[np.argmin(flat)]:g} is not positive (a zero scale is undefined behaviour in DirectML)", node=node, tensor=tensor)
    return scale
