"""What the operator modules' importers share: the node context, the fallback they raise, the
desc placement helpers and the scale and zero-point checks.

An importer is ``fn(ctx: NodeContext) -> DmlNode``; it raises ``Fallback(reason, real_ep)`` for
what DirectML cannot take (and what the real EP does with it), and dml_ep's typed errors for what
is invalid. The registration table (``registration.py``) names the importer of each ONNX op.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import onnx

from ..core.enums import DML_FEATURE_LEVEL, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from ..core.errors import QuantizationParameterError, ShapeError
from ..core.graph import NodeIO, ValueInfo, attributes, node_io
from ..core.tensor_desc import DML_BUFFER_TENSOR_DESC, broadcast_shapes, broadcast_strides, left_pad
from ..numerics.kernels.parameters import checked_scale
from ..passes.editable import Origin
from ..realep.placement import ASSIGNED_TO_DML, ON_CPU
from .nodes import DmlNode

MAX_DIMENSIONS = 8  # DML_TENSOR_DIMENSION_COUNT_MAX1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Fallback(Exception):
    """Raised by an importer: the node runs on onnxruntime's CPU EP, for the reason given;
    ``real_ep`` says what the real DML EP does with it (:data:`dml_ep.realep.placement.ON_DML`, ``ON_CPU``)."""

    def __init__(self, reason: str, real_ep: str):
        super().__init__(f"{reason}; {real_ep}")


@dataclasses.dataclass
class NodeContext:
    """One node plus what the importer knows of the graph around it; ``origin`` names the user's
    nodes it stands for."""

    node: onnx.NodeProto
    values: Mapping[str, ValueInfo]
    constants: Mapping[str, np.ndarray]
    feature_level: DML_FEATURE_LEVEL
    opset: int
    origin: Origin

    def attr(self, name: str, default=None):
        for attribute in attributes(self.node):
            if attribute.name == name:
                value = onnx.helper.get_attribute_value(attribute)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def input_name(self, index: int) -> str:
        return self.node.input[index] if index < len(self.node.input) else ""

    def info(self, index: int) -> ValueInfo:
        return self.values[self.input_name(index)]

    def shape(self, index: int) -> tuple[int, ...]:
        """A tensor input's shape: known, as a node is planned only from its inputs' known shapes."""
        shape = self.info(index).shape
        assert shape is not None, f"input {index} of a {self.node.op_type} node has no known shape"
        return shape

    def parameter(self, index: int) -> np.ndarray | None:
        """A scale's or zero point's value if it is a constant initializer; None if it comes at run
        time (the real EP binds it as a tensor, and the kernel checks its value when it arrives)."""
        return self.constants.get(self.input_name(index))

    def dml_node(self, desc, fields_by_input: tuple[str, ...], output_shape, more_output_shapes=()) -> DmlNode:
        """The node as ``desc``, each non-null desc tensor field bound to its node input: the
        constant array, or the graph value's name. ``fields_by_input`` names the desc field of
        input 0, 1, ... (the node's outputs are not inputs); ``more_output_shapes``, the shapes of
        its outputs after the first, for an operator with several."""
        input_index = {field: index for index, field in enumerate(fields_by_input) if desc.tensor(field) is not None}
        return bound(self.node, desc, input_index, (tuple(output_shape), *map(tuple, more_output_shapes)), self.constants, self.origin)


def bound(node: onnx.NodeProto, desc, input_index: dict[str, int], output_shapes: tuple, constants: Mapping[str, np.ndarray],
          origin: Origin, io: NodeIO | None = None) -> DmlNode:
    """``node`` as ``desc``, each field of ``input_index`` bound to the node input at that position:
    the constant array, or the graph value's name (an omitted input binds ""); its outputs of
    ``output_shapes`` in order; ``origin``, the user's nodes it stands for; ``io``, the node's
    inputs and outputs where read already."""
    node_inputs, outputs = io or node_io(node)
    count = len(node_inputs)
    names = {field: node_inputs[index] if index < count else "" for field, index in input_index.items()}
    inputs = {field: constants.get(name, name) for field, name in names.items()}
    first, *more = output_shapes
    return DmlNode(node, desc, inputs, outputs[0], first, origin, names=names, input_index=input_index,
                   more_outputs=tuple(zip(outputs[1:], more)) if more else ())


def as_int32(values) -> list[int]:
    """Integers as the DML EP reads int64 attributes and CPU tensors: clamped into int32
    (GetOptionalAttributeVectorInt32 in MLOperatorAuthorHelper.h, ReadCpuLocalTensorIntoInt32 in
    OperatorHelper.cpp), so that a valid ONNX stride of 2^62 reaches DirectML as 2^31-1."""
    return [min(max(int(value), INT32_MIN), INT32_MAX) for value in values]


def data_type(dtype) -> DML_TENSOR_DATA_TYPE:
    """DirectML's data type for a numpy dtype, or Fallback when DirectML has none."""
    dml_type = DML_TENSOR_DATA_TYPE.from_numpy(dtype)
    if dml_type == DML_TENSOR_DATA_TYPE.UNKNOWN:
        raise Fallback(f"element type {np.dtype(dtype)} has no DirectML tensor data type", ON_CPU)
    return dml_type


def tensor(dtype, sizes, strides=None, owned: bool = False) -> DML_BUFFER_TENSOR_DESC:
    flags = DML_TENSOR_FLAGS.OWNED_BY_DML if owned else DML_TENSOR_FLAGS.NONE
    return DML_BUFFER_TENSOR_DESC.create(data_type(dtype), sizes, strides, flags)


def parameter_tensor(array: np.ndarray, sizes) -> DML_BUFFER_TENSOR_DESC:
    """A scale or zero-point desc; a constant whose elements are all equal reads as a broadcast scalar.

    That is the DML EP's TryConvertTensorToBroadcastScalar: strides 0, 4 bytes.
    """
    flat = np.asarray(array).reshape(-1)
    if flat.size > 1 and np.all(flat == flat[0]):
        return tensor(array.dtype, sizes, strides=(0,) * len(sizes))
    return tensor(array.dtype, sizes)


def _one_axis(shape) -> bool:
    """At most one dimension above 1: a per-tensor, or per-axis ([N], [1, N], ...), parameter."""
    return sum(size > 1 for size in shape) <= 1


def parameter_shape(ctx: NodeContext, index: int) -> tuple[int, ...]:
    """A scale's or zero point's shape, constant or bound at run time."""
    value = ctx.parameter(index)
    return value.shape if value is not None else ctx.shape(index)


def check_scale(ctx: NodeContext, index: int, scale: np.ndarray | None, allowed_sizes: tuple[int, ...] = (1,),
                dtype=np.float32) -> np.ndarray | None:
    """A scale must be float32 (``dtype``: float16 where the operator takes it), finite and positive
    (DirectML: a zero scale is undefined behaviour). ``scale`` None: it comes at run time; its type
    and shape are checked here, its values by
    :func:`dml_ep.numerics.kernels.parameters.checked_scale` when they arrive."""
    name = ctx.input_name(index)
    runtime = scale is None
    scale = _value_or_stand_in(ctx, index, scale)
    if scale.dtype != dtype:
        if scale.dtype == np.float16:  # valid ONNX (QLinearMatMul-21), but DirectML's scales are FLOAT32
            raise Fallback(f"scale {name!r} is float16; DirectML's quantized operators take FLOAT32 scales", ASSIGNED_TO_DML)
        raise QuantizationParameterError(f"scale must be float32, not {scale.dtype}", node=ctx.node, tensor=name)
    _check_size(ctx, index, scale, allowed_sizes, "scale")
    if runtime:
        return None
    return checked_scale(scale, node=ctx.node, tensor=name)


def check_zero_point(ctx: NodeContext, index: int, zero_point, tensor_dtype, allowed_sizes: tuple[int, ...] = (1,)):
    """A zero point must have its tensor's type and a per-tensor (or allowed per-axis) size;
    ``zero_point`` None: absent, or (when the node has the input) bound at run time, checked from
    its type and shape."""
    name = ctx.input_name(index)
    if zero_point is None and not name:
        return None
    runtime = zero_point is None
    zero_point = _value_or_stand_in(ctx, index, zero_point)
    if zero_point.dtype != np.dtype(tensor_dtype):
        raise QuantizationParameterError(
            f"zero point type {zero_point.dtype} does not match its tensor's type {np.dtype(tensor_dtype)}",
            node=ctx.node,
            tensor=name,
        )
    _check_size(ctx, index, zero_point, allowed_sizes, "zero point")
    return None if runtime else zero_point


def _value_or_stand_in(ctx: NodeContext, index: int, value) -> np.ndarray:
    """A constant parameter's value; for one bound at run time an empty array of its type and
    shape, which stands in for them in the checks."""
    if value is None:
        return np.empty(ctx.shape(index), ctx.info(index).dtype)
    return np.asarray(value)


def _check_size(ctx: NodeContext, index: int, value: np.ndarray, allowed_sizes: tuple[int, ...], what: str) -> None:
    """A per-tensor, or allowed per-axis, number of elements along at most one axis."""
    if value.size not in allowed_sizes or not _one_axis(value.shape):
        sizes = " or ".join(str(s) for s in allowed_sizes)
        raise QuantizationParameterError(
            f"{what} has shape {list(value.shape)}; expected {sizes} element(s)", node=ctx.node, tensor=ctx.input_name(index)
        )


def quantized_type(ctx: NodeContext, index: int, what: str) -> np.dtype:
    """The element type of a quantized tensor input: uint8 or int8, else Fallback."""
    return _quantized(ctx.info(index).dtype, what)


def output_type(ctx: NodeContext) -> np.dtype:
    """The element type inference gave the node's output: its zero point must match it."""
    return _quantized(ctx.values[ctx.node.output[0]].dtype, "output")


def _quantized(dtype: np.dtype | None, what: str) -> np.dtype:
    if dtype is None or dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise Fallback(f"{what} type {dtype} is not supported (INT8, UINT8)", ON_CPU)
    return dtype


def broadcast(ctx: NodeContext, a_shape, b_shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """An element-wise node's ONNX output shape and DirectML sizes (right-aligned, at least 4-D):
    every tensor is read with the output's sizes, ONNX broadcasting a stride of 0."""
    try:
        out_shape = broadcast_shapes(a_shape, b_shape)
    except ValueError:
        raise ShapeError(f"input shapes {list(a_shape)} and {list(b_shape)} do not broadcast", node=ctx.node) from None
    return out_shape, padded_sizes(out_shape)


def within_dimensions(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape``, whose rank DirectML takes: Fallback beyond 8 dimensions."""
    if len(shape) > MAX_DIMENSIONS:
        raise Fallback(f"{len(shape)} dimensions (DirectML supports at most {MAX_DIMENSIONS})", ASSIGNED_TO_DML)
    return shape


def padded_sizes(shape: tuple[int, ...]) -> tuple[int, ...]:
    """An element-wise tensor's DirectML sizes: ``shape`` right-aligned to at least 4 dimensions;
    Fallback beyond 8."""
    return left_pad(within_dimensions(shape), max(4, len(shape)))


def operand(dtype, shape, sizes, owned=False) -> DML_BUFFER_TENSOR_DESC:
    """An element-wise operand of ONNX ``shape`` read with the output's ``sizes`` (zero strides)."""
    return tensor(dtype, sizes, broadcast_strides(shape, sizes), owned=owned)


def owned(desc: DML_BUFFER_TENSOR_DESC) -> DML_BUFFER_TENSOR_DESC:
    """``desc`` flagged OWNED_BY_DML: a constant, bound when DirectML initializes the operator."""
    return DML_BUFFER_TENSOR_DESC.create(desc.DataType, desc.Sizes, desc.Strides, DML_TENSOR_FLAGS.OWNED_BY_DML)


def one_matrix(ctx: NodeContext, index: int, what: str) -> None:
    """A per-row or per-column parameter must hold one row (column) for every batch: DirectML's are
    {1,1,M,1} and {1,1,1,N}. Per-batch ones ([D1, D2, M, 1], valid ONNX) leave the node to the CPU."""
    if ctx.input_name(index) and sum(size > 1 for size in parameter_shape(ctx, index)) > 1:
        raise Fallback(f"{what} has shape {list(parameter_shape(ctx, index))}, one per batch; DirectML's is one per row or column", ASSIGNED_TO_DML)


def placed_parameter(ctx: NodeContext, index: int, value, per_axis_sizes: tuple[int, ...],
                     own: bool = True) -> DML_BUFFER_TENSOR_DESC:
    """A scale's, zero point's (or bias's) desc: {1,1,1,1}, or ``per_axis_sizes`` when it has more
    than one element; a constant as ``parameter_tensor`` makes it, OWNED_BY_DML where ``own``
    says; one bound at run time from its type and shape (never the broadcast-scalar dedup, which
    needs the values)."""
    shape = parameter_shape(ctx, index)
    sizes = per_axis_sizes if int(np.prod(shape)) > 1 else (1, 1, 1, 1)
    if value is None:
        return tensor(ctx.info(index).dtype, sizes)
    desc = parameter_tensor(np.asarray(value), sizes)
    return owned(desc) if own else desc


def optional_parameter(ctx: NodeContext, index: int, value, per_axis_sizes: tuple[int, ...],
                       own: bool = True) -> DML_BUFFER_TENSOR_DESC | None:
    """:func:`placed_parameter` of an input the node may omit (a zero point): None when it does."""
    return placed_parameter(ctx, index, value, per_axis_sizes, own) if ctx.input_name(index) else None
