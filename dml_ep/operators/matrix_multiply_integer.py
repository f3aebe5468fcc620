"""DML_OPERATOR_MATRIX_MULTIPLY_INTEGER (ONNX MatMulInteger): desc, import, kernel.

Import, as DmlOperatorMatMulInteger.cpp: ONNX inputs A, B, a_zero_point, b_zero_point go to the
DML order A, AZeroPoint, B, BZeroPoint; A and B through QLinearMatMul's shape mapping
(``quantized_linear_matrix_multiply.matrix_shapes``: numpy matmul semantics folded to 4-D, batch
dimensions broadcast by zero strides); a_zero_point placed on H, per tensor {1,1,1,1} or per row
{1,1,M,1}; b_zero_point per tensor or per column {1,1,1,N}; a missing zero point is a null
tensor. A zero point may be a constant (then OWNED_BY_DML, bound at initialization, as the DML EP
binds initializers) or bound at run time: the MatMulInteger after a DynamicQuantizeLinear gets its
A zero point with each run.

Kernel. DirectML's page gives no formula; its fields imply
``Output[m, n] = sum_k (A[m, k] - AZeroPoint[m]) * (B[k, n] - BZeroPoint[n])``, INT32, which is
what both arithmetics compute: the integer core of the quantized matrix multiply
(``PreparedMatrixMultiply``) with no step after it. onnxruntime (``matmul_integer.cc``,
``MlasGemmBatch``): the same sums, except that on AVX2 CPUs without VNNI MLAS saturates pairs of
uint8 x int8 products to int16 (``kernels/u8s8.py``), which the onnxruntime arithmetic adds where
``Arithmetic.saturates_u8s8`` says so. Sums beyond int32 wrap (onnxruntime's int32 accumulator;
DirectML is silent on the accumulator's width).

No exact value for compare: the output is the exact sums, nothing is rounded.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from .base import INT32, QUANTIZED, Operator, OperatorDesc, TensorDesc, rules
from .importing import NodeContext, check_zero_point, one_matrix, optional_parameter, quantized_type, tensor
from .nodes import DmlNode
from .quantized_linear_matrix_multiply import PreparedMatrixMultiply, matrix_shapes, per_column_parameter, validate_matrix_sizes

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_MATRIX_MULTIPLY_INTEGER_OPERATOR_DESC(OperatorDesc):
    """MATRIX_MULTIPLY_INTEGER (ONNX MatMulInteger), DML_FEATURE_LEVEL_2_1 and up."""

    ATensor: TensorDesc
    AZeroPointTensor: TensorDesc | None
    BTensor: TensorDesc
    BZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc

    OPERATOR_TYPE = OP.MATRIX_MULTIPLY_INTEGER
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = rules(
        {
            "ATensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (2, 4)}),
            "AZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "BTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (2, 4)}),
            "BZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (2, 4), FL.FL_5_2: (1, 4)}),
            "OutputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (2, 4)}),
        },
        {"ATensor": QUANTIZED, "AZeroPointTensor": QUANTIZED, "BTensor": QUANTIZED, "BZeroPointTensor": QUANTIZED, "OutputTensor": INT32},
    )
    SAME_TYPE = (("ATensor", "AZeroPointTensor"), ("BTensor", "BZeroPointTensor"))

    def validate_shapes(self, feature_level: FL) -> None:
        same_dimension_count(self, ("ATensor", "BTensor", "OutputTensor"))
        validate_matrix_sizes(self, ("AZeroPointTensor",), ("BZeroPointTensor",))


def same_dimension_count(desc, fields: tuple[str, ...]) -> None:
    """DirectML: these tensors have the same DimensionCount."""
    first, *others = (field for field in fields if getattr(desc, field) is not None)
    for field in others:
        if getattr(desc, field).DimensionCount != getattr(desc, first).DimensionCount:
            desc.fail(f"DimensionCount {getattr(desc, field).DimensionCount} must equal {first}'s {getattr(desc, first).DimensionCount}", field)


# --- import from ONNX ------------------------------------------------------------------------

A, B, A_ZP, B_ZP = range(4)


def zero_points(ctx: NodeContext, a_index: int, a_type, b_index: int, b_type, m: int, n: int):
    """A's zero point on H (per tensor or per row), B's per tensor or per column: their descs."""
    one_matrix(ctx, a_index, "A zero point")
    b_value = ctx.parameter(b_index)
    if b_value is not None:
        b_value = per_column_parameter(b_value, n)
    else:
        one_matrix(ctx, b_index, "B zero point")
    a_zp = check_zero_point(ctx, a_index, ctx.parameter(a_index), a_type, (1, m))
    b_zp = check_zero_point(ctx, b_index, b_value, b_type, (1, n))
    return optional_parameter(ctx, a_index, a_zp, (1, 1, m, 1)), optional_parameter(ctx, b_index, b_zp, (1, 1, 1, n))


def matmul_integer(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, A, "A")
    b_type = quantized_type(ctx, B, "B")
    shapes = matrix_shapes(ctx, A, a_type, B, b_type)
    a_zp, b_zp = zero_points(ctx, A_ZP, a_type, B_ZP, b_type, shapes.m, shapes.n)
    desc = DML_MATRIX_MULTIPLY_INTEGER_OPERATOR_DESC(
        ATensor=shapes.a,
        AZeroPointTensor=a_zp,
        BTensor=shapes.b,
        BZeroPointTensor=b_zp,
        OutputTensor=tensor(np.int32, shapes.output_sizes),
    )
    return ctx.dml_node(desc, ("ATensor", "BTensor", "AZeroPointTensor", "BZeroPointTensor"), shapes.output_shape)


# --- kernel ----------------------------------------------------------------------------------


class PreparedMatrixMultiplyInteger(PreparedMatrixMultiply):
    """The matrix multiply's integer core, its parameters constant (OWNED_BY_DML) or read at each
    run, and nothing after it: the INT32 sums (with onnxruntime's u8s8 saturation where it applies)."""

    def prepare_finish(self, tensors: dict, arithmetic) -> None:
        pass

    def finish(self, acc: np.ndarray, tensors: dict) -> np.ndarray:
        return np.asarray(acc).astype(np.int32)


OPERATORS = (Operator(desc=DML_MATRIX_MULTIPLY_INTEGER_OPERATOR_DESC, prepared=PreparedMatrixMultiplyInteger, exact_value=None),)
