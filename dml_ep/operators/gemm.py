"""DML_OPERATOR_GEMM (DML_FEATURE_LEVEL_1_0; 2 to 4 dimensions from 4_0): desc, import, kernel.

``Output = FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C)``, {Batch, Channel, M, K} x
{Batch, Channel, K, N} (the page). The real EP builds it for MatMulNBits (the second of its two
operators, TransB TRANSPOSE, Alpha 1, Beta 0, no C: ``matmul_nbits``), and for float MatMul and Gemm
(not modelled yet: they run on the CPU here, their plan rows say so).

Import (the internal com.microsoft.dml ``DmlGemm`` a MatMulNBits split makes): A as it is (2 to 4
dimensions), the dequantized weight {N, K} read with stride 0 over A's batch dimensions, TransB
TRANSPOSE.

Kernel. DirectML's page gives no summation order or accumulator width; nor does the real EP's code.
- ``"directml"``: the exact sum rounded once to the output type, taken as the float64 product of
  the float64 values (exact products of float32 or float16 inputs; float64 sums, whose error is far
  below a float32 or float16 ulp for the sizes of real models: within ``K * 2^-53`` of the sum of
  magnitudes). dml_ep's choice: one rounding is what a float32 accumulation approaches on a GPU
  that sums in a tree; float16 tensors are summed in float32 or wider, as DirectML without
  DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION (which the real EP's fused partitions are
  compiled without: DmlGraphFusionHelper.cpp) does.
- ``"onnxruntime"``: a float32 GEMM (the float32 inputs multiplied and summed in float32, BLAS's
  order), as onnxruntime's CPU MatMulNBits at accuracy levels 0 to 3 does after dequantizing B to
  float32 (CompFp32, MLAS sqnbitgemm; float16 A converted to float32 first and the output rounded
  once). MLAS sums in its own order, so the two agree to float32 rounding, not bit for bit; its
  accuracy level 4 (int8 A) is a cause compare names, not this kernel's arithmetic.
No exact value: GEMM does not quantize.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..enums import DML_FEATURE_LEVEL as FL
from ..enums import DML_MATRIX_TRANSFORM
from ..enums import DML_OPERATOR_TYPE as OP
from ..plan import DmlNode
from ..real_ep import ASSIGNED_TO_DML
from ..tensor_desc import view
from .activation import ActivationDesc, apply_activation, validate_fused_activation
from .base import FLOATS, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, tensor

# --- desc ------------------------------------------------------------------------------------

DIMS = {FL.FL_1_0: (4, 4), FL.FL_4_0: (2, 4)}
FIELDS = ("ATensor", "BTensor", "CTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_GEMM_OPERATOR_DESC(OperatorDesc):
    """GEMM: ``FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C)``, DML_FEATURE_LEVEL_1_0 and up."""

    ATensor: TensorDesc
    BTensor: TensorDesc
    CTensor: TensorDesc | None
    OutputTensor: TensorDesc
    TransA: DML_MATRIX_TRANSFORM
    TransB: DML_MATRIX_TRANSFORM
    Alpha: float
    Beta: float
    FusedActivation: Optional[ActivationDesc] = None

    OPERATOR_TYPE = OP.GEMM
    INTRODUCED = FL.FL_1_0
    TENSOR_RULES = rules({field: (field == "CTensor", DIMS) for field in FIELDS}, dict.fromkeys(FIELDS, FLOATS))
    SAME_TYPE = (FIELDS,)

    def validate_shapes(self, feature_level: FL) -> None:
        """One DimensionCount; {.., M, K} x {.., K, N} = {.., M, N} after the transforms, the batch
        sizes equal; C of the output's sizes."""
        for field in ("ATensor", "BTensor", "CTensor"):
            tensor = getattr(self, field)
            if tensor is not None and tensor.DimensionCount != self.OutputTensor.DimensionCount:
                self.fail(f"DimensionCount {tensor.DimensionCount} must equal OutputTensor's {self.OutputTensor.DimensionCount}", field)
        (m, k), (k_b, n) = self.matrix("ATensor", self.TransA), self.matrix("BTensor", self.TransB)
        batch = self.OutputTensor.Sizes[:-2]
        if k != k_b:
            self.fail(f"K is {k} in ATensor and {k_b} in BTensor", "BTensor")
        for field in ("ATensor", "BTensor"):
            if getattr(self, field).Sizes[:-2] != batch:
                self.fail(f"batch sizes {list(getattr(self, field).Sizes[:-2])} must equal OutputTensor's {list(batch)}", field)
        if self.OutputTensor.Sizes[-2:] != (m, n):
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must end in [{m}, {n}]", "OutputTensor")
        if self.CTensor is not None and self.CTensor.Sizes != self.OutputTensor.Sizes:
            self.fail(f"sizes {list(self.CTensor.Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", "CTensor")
        validate_fused_activation(self, feature_level)

    def matrix(self, field: str, transform: DML_MATRIX_TRANSFORM) -> tuple[int, int]:
        """A tensor's matrix sizes after its transform."""
        rows, columns = getattr(self, field).Sizes[-2:]
        return (columns, rows) if transform == DML_MATRIX_TRANSFORM.TRANSPOSE else (rows, columns)


# --- import from ONNX ------------------------------------------------------------------------

A, WEIGHT = 0, 1


def matmul_nbits_product(ctx: NodeContext) -> DmlNode:
    """DmlGemm (A, the dequantized weight {N, K}): A x weight^T, the weight read over A's batches."""
    a_shape = ctx.shape(A)
    n, k = ctx.shape(WEIGHT)
    if not 2 <= len(a_shape) <= 4:
        raise Fallback(f"A has {len(a_shape)} dimensions; GEMM takes 2 to 4", ASSIGNED_TO_DML)
    dtype = ctx.info(A).dtype
    batch = tuple(a_shape[:-2])
    weight = tensor(dtype, (*batch, n, k), (*(0,) * len(batch), k, 1))
    output_shape = (*a_shape[:-1], n)
    desc = DML_GEMM_OPERATOR_DESC(
        ATensor=tensor(dtype, a_shape), BTensor=weight, CTensor=None, OutputTensor=tensor(dtype, output_shape),
        TransA=DML_MATRIX_TRANSFORM.NONE, TransB=DML_MATRIX_TRANSFORM.TRANSPOSE, Alpha=1.0, Beta=0.0)
    return ctx.dml_node(desc, ("ATensor", "BTensor"), output_shape)


# --- kernel ----------------------------------------------------------------------------------


def gemm_kernel(desc, tensors: dict, arithmetic, cache: dict) -> np.ndarray:
    """``Alpha * A x B + Beta * C`` in float64 rounded once (directml), or in float32 (onnxruntime)."""
    wide = np.float32 if arithmetic.onnxruntime else np.float64
    a = _matrices(view(tensors["ATensor"], desc.ATensor), desc.TransA, wide)
    b = _weight(tensors, desc, wide, cache)
    if b.ndim == 2:  # one matrix for every batch: one product of all of A's rows
        y = (a.reshape(-1, a.shape[-1]) @ b).reshape(*a.shape[:-1], b.shape[-1])
    else:
        y = np.matmul(a, b)
    if desc.Alpha != 1.0:
        y *= wide(desc.Alpha)
    if desc.CTensor is not None and desc.Beta != 0.0:
        y += wide(desc.Beta) * view(tensors["CTensor"], desc.CTensor).astype(wide)
    if desc.FusedActivation is not None:
        y = apply_activation(desc.FusedActivation, y.astype(np.float32))
    return y.astype(desc.OutputTensor.DataType.numpy())


def _matrices(x: np.ndarray, transform: DML_MATRIX_TRANSFORM, dtype) -> np.ndarray:
    x = x.astype(dtype)
    return np.swapaxes(x, -1, -2) if transform == DML_MATRIX_TRANSFORM.TRANSPOSE else x


def _weight(tensors: dict, desc, dtype, cache: dict) -> np.ndarray:
    """B after its transform, in the arithmetic's type; one matrix where B's batch strides are 0
    (a weight), converted once per buffer (a constant weight's buffer is the same every run)."""
    buffer = tensors["BTensor"]
    key = ("B", np.dtype(dtype).str)
    made = cache.get(key)
    if made is not None and made[0] is buffer:
        return made[1]
    b = view(buffer, desc.BTensor)
    if desc.BTensor.DimensionCount > 2 and not any(desc.BTensor.element_strides[:-2]):
        b = b[(0,) * (b.ndim - 2)]
    b = _matrices(b, desc.TransB, dtype)
    cache[key] = (buffer, b)
    return b


OPERATORS = (Operator(desc=DML_GEMM_OPERATOR_DESC, kernel=gemm_kernel, exact_value=None),)
