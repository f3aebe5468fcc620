"""DML_BUFFER_TENSOR_DESC and the shape helpers that turn ONNX shapes into DirectML tensor descs.

DirectML sees every tensor as sizes plus element strides; ONNX broadcasting becomes a stride of 0,
never a copy. :func:`view` is the executor's side of that contract: it reads a buffer through a
desc exactly as DirectML would.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

from .enums import DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from . import nibbles

MAX_ELEMENTS = 2**32 - 1


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of a packed tensor of these sizes."""
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def calc_buffer_tensor_size(data_type: DML_TENSOR_DATA_TYPE, sizes: Sequence[int], strides: Sequence[int] | None) -> int:
    """TotalTensorSizeInBytes as DirectML's DMLCalcBufferTensorSize computes it.

    Packed: product of sizes times element size; strided: index of the last element plus one,
    times element size; both rounded up to a multiple of 4 bytes.
    """
    bits = DML_TENSOR_DATA_TYPE(data_type).bits
    if strides is None:
        elements = math.prod(sizes)
    else:
        elements = sum((size - 1) * stride for size, stride in zip(sizes, strides)) + 1
    return ((elements * bits + 7) // 8 + 3) & ~3  # 4-bit elements two to a byte


@dataclasses.dataclass(frozen=True)
class DML_BUFFER_TENSOR_DESC:
    """A DirectML buffer tensor desc; ``Strides`` is None for a packed tensor, as in DirectML."""

    DataType: DML_TENSOR_DATA_TYPE
    Flags: DML_TENSOR_FLAGS
    DimensionCount: int
    Sizes: tuple[int, ...]
    Strides: tuple[int, ...] | None
    TotalTensorSizeInBytes: int
    GuaranteedBaseOffsetAlignment: int = 0

    @classmethod
    def create(cls, data_type, sizes, strides=None, flags=DML_TENSOR_FLAGS.NONE) -> "DML_BUFFER_TENSOR_DESC":
        """A desc with TotalTensorSizeInBytes computed; packed strides are stored as None.

        Descs are immutable, so equal ones are one object (:func:`_interned`): a graph of
        thousands of nodes of a few shapes holds a few descs, not three per node."""
        # mypy checks the class against Hashable by its instances' __hash__ (a class is always hashable)
        return _interned(cls, data_type, tuple(sizes), None if strides is None else tuple(strides), flags)  # type: ignore[arg-type]

    @classmethod
    def _make(cls, data_type, sizes, strides, flags) -> "DML_BUFFER_TENSOR_DESC":
        data_type = DML_TENSOR_DATA_TYPE(data_type)
        sizes = tuple(int(s) for s in sizes)
        strides = None if strides is None else tuple(int(s) for s in strides)
        if strides == packed_strides(sizes):
            strides = None
        return cls(
            DataType=data_type,
            Flags=DML_TENSOR_FLAGS(flags),
            DimensionCount=len(sizes),
            Sizes=sizes,
            Strides=strides,
            TotalTensorSizeInBytes=calc_buffer_tensor_size(data_type, sizes, strides),
        )

    @functools.cached_property
    def element_strides(self) -> tuple[int, ...]:
        return packed_strides(self.Sizes) if self.Strides is None else self.Strides

    @functools.cached_property
    def element_count(self) -> int:
        return math.prod(self.Sizes)

    @functools.cached_property
    def elements_spanned(self) -> int:
        """How many elements of the buffer the desc reads: the last element's index plus one."""
        return sum((size - 1) * stride for size, stride in zip(self.Sizes, self.element_strides)) + 1

    def describe(self) -> str:
        """``UINT8 {1,64,56,56}`` plus strides when they are not packed."""
        text = f"{self.DataType.name} {{{','.join(map(str, self.Sizes))}}}"
        if self.Strides is not None:
            text += f" strides {{{','.join(map(str, self.Strides))}}}"
        return text

    def to_dict(self) -> dict:
        return {
            "DataType": self.DataType.name,
            "Flags": self.Flags.name if self.Flags else "NONE",
            "DimensionCount": self.DimensionCount,
            "Sizes": list(self.Sizes),
            "Strides": None if self.Strides is None else list(self.Strides),
            "TotalTensorSizeInBytes": self.TotalTensorSizeInBytes,
            "GuaranteedBaseOffsetAlignment": self.GuaranteedBaseOffsetAlignment,
        }


@functools.lru_cache(maxsize=4096)
def _interned(cls, data_type, sizes: tuple, strides: tuple | None, flags) -> DML_BUFFER_TENSOR_DESC:
    return cls._make(data_type, sizes, strides, flags)


def left_pad(shape: Sequence[int], rank: int = 4) -> tuple[int, ...]:
    """Prefix 1s up to ``rank`` dimensions (DirectML wants at least 4-D for most operators)."""
    shape = tuple(int(s) for s in shape)
    return (1,) * (rank - len(shape)) + shape


def broadcast_strides(shape: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """Element strides that read a packed tensor of ``shape`` as ``target`` (ONNX broadcasting).

    ``shape`` is right-aligned to ``target``. As in the DML EP's TensorDesc, every dimension of size
    1 gets stride 0 once anything broadcasts; a shape equal to the target reads packed.
    Raises ValueError when the shapes do not broadcast.
    """
    return _broadcast_strides(tuple(shape), tuple(target))


@functools.lru_cache(maxsize=4096)
def _broadcast_strides(shape: tuple, target: tuple) -> tuple[int, ...]:
    if len(shape) > len(target):
        raise ValueError(f"shape {list(shape)} has more dimensions than {list(target)}")
    shape = left_pad(shape, len(target))
    if any(size != want and size != 1 for size, want in zip(shape, target)):
        raise ValueError(f"shape {list(shape)} does not broadcast to {list(target)}")
    if shape == tuple(target):
        return packed_strides(shape)
    return tuple(0 if size == 1 else stride for size, stride in zip(shape, packed_strides(shape)))


def broadcast_desc(data_type, shape: Sequence[int], target: Sequence[int]) -> DML_BUFFER_TENSOR_DESC:
    """A desc reading a packed tensor of ``shape`` with the sizes ``target``."""
    return DML_BUFFER_TENSOR_DESC.create(data_type, target, broadcast_strides(shape, target))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The ONNX multidirectional broadcast of shapes; ValueError when they do not broadcast."""
    return _broadcast_shapes(tuple(tuple(s) for s in shapes))


@functools.lru_cache(maxsize=4096)
def _broadcast_shapes(shapes: tuple) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def checked_buffer(array, desc: DML_BUFFER_TENSOR_DESC) -> np.ndarray:
    """The buffer as an array; ValueError when it is smaller than the elements the desc reads."""
    array = np.asarray(array)
    if array.size < desc.elements_spanned:
        raise ValueError(f"buffer of {array.size} elements is too small for {desc.describe()}")
    return array


def view(array: np.ndarray, desc: DML_BUFFER_TENSOR_DESC) -> np.ndarray:
    """Read a buffer through a desc: the desc's sizes with its element strides (0 broadcasts).

    The buffer is the array's elements in row-major order, whatever its memory layout: a packed
    desc reshapes the array (a view, also of a channels-last array a kernel returned as NCHW);
    other strides index its elements in that order. The view is read-only, as DirectML inputs are.
    """
    if desc.DataType.bits == 4:  # a byte buffer of packed nibbles: unpacked, then read as any other
        array = np.asarray(array)
        count = min(array.size * 2, desc.elements_spanned)
        array = nibbles.unpack(array, count, signed=desc.DataType == DML_TENSOR_DATA_TYPE.INT4)
    array = checked_buffer(array, desc)
    if desc.Strides is None and array.size == desc.element_count:  # packed: a plain reshape
        packed = array.view() if array.shape == desc.Sizes else array.reshape(desc.Sizes)  # view(): 4x cheaper
        packed.setflags(write=False)  # half the time of flags.writeable = False
        return packed
    flat = np.ascontiguousarray(array).reshape(-1)
    strided = np.ndarray(desc.Sizes, flat.dtype, flat, 0, tuple(st * flat.itemsize for st in desc.element_strides))  # as_strided, 8x faster
    strided.setflags(write=False)
    return strided
