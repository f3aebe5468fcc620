"""DML_OPERATOR_GEMM (DML_FEATURE_LEVEL_1_0; 2 to 4 dimensions from 4_0): desc, import, kernel.

``Output = FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C)``, {Batch, Channel, M, K} x
{Batch, Channel, K, N} (the page). The real EP builds it for MatMulNBits (the second of its two
operators, TransB TRANSPOSE, Alpha 1, Beta 0, no C: ``matmul_nbits``), and for float MatMul,
FusedMatMul and Gemm (DmlOperatorMatMul, DmlOperatorFusedMatMul, DmlOperatorGemm).

Import: the internal com.microsoft.dml ``DmlGemm`` a MatMulNBits split makes: A as it is (2 to 4
dimensions), the dequantized weight {N, K} read with stride 0 over A's batch dimensions, TransB
TRANSPOSE. MatMul and FusedMatMul: both operands read with the output's batch sizes (stride 0
where they broadcast), FusedMatMul's transA, transB and alpha as TransA, TransB and Alpha. Gemm:
its transforms, alpha, beta, and C read with the output's sizes.

Kernel. DirectML's page gives no summation order or accumulator width; nor does the real EP's code.
- ``"directml"``: the exact sum rounded once to the output type, taken as the float64 product of
  the float64 values (exact products of float32 or float16 inputs; float64 sums, whose error is far
  below a float32 or float16 ulp for the sizes of real models: within ``K * 2^-53`` of the sum of
  magnitudes). dml_ep's choice: one rounding is what a float32 accumulation approaches on a GPU
  that sums in a tree; float16 tensors are summed in float32 or wider, as DirectML without
  DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION (which the real EP's fused partitions are
  compiled without: DmlGraphFusionHelper.cpp) does.
- ``"onnxruntime"``: float32 MatMul, FusedMatMul and Gemm as onnxruntime's CPU EP computes them,
  bit for bit: MLAS's SGEMM on this host (``kernels.mlas_sgemm``: its threads, kernels and panel
  order; a constant 2-D B is packed, as onnxruntime packs it when the session loads). Float16 ones
  too, as onnxruntime 1.32's x86-64 CPU EP computes them (measured, bit for bit at M 1 and 8, K and N
  256 to 1024, B constant or fed): the float32 node between Casts (InsertCastTransformer): widen, SGEMM
  with B packed where it is a constant initializer, round once to float16 (MLAS's HGEMM is ARM64-only;
  an onnxruntime whose CPU MatMul<MLFloat16> runs Eigen's float32 GEMM on x86 would sum in another order). A 4-bit
  MatMulNBits' GEMM at accuracy levels 0 to 3 (float32 or float16): as MLAS's SQ4BitGemm_CompFp32,
  bit for bit but for a part of one row (:func:`sqnbit_fp32_gemm`); at level 4, A quantized to
  int8 per block as MLAS's CompInt8 does, then the product rounded once: within float32 rounding
  of onnxruntime's (:func:`sqnbit_int8_gemm`). Otherwise (8 bits) a float32 GEMM in
  numpy's order, within float32 rounding of onnxruntime's, not bit for bit; compare names the
  differences ("float summation order", "int8 activations" in the "directml" arithmetic).
No exact value: GEMM does not quantize.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_MATRIX_TRANSFORM
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import ShapeError
from ..core.tensor_desc import broadcast_shapes, broadcast_strides, view
from ..numerics.kernels.matmul_nbits import host_runs_sqnbit_int8, int8_blocks
from ..numerics.kernels.mlas_sgemm import GemmCall, host_runs_sqnbit_fp32, host_sgemm, packed_panels, panel_sum, sgemm_batch
from ..numerics.kernels.mlas_sqnbit_m1 import host_m1_kernel, m1_code_product, m1_product
from ..realep.placement import ASSIGNED_TO_DML, ON_DML
from .activation import ActivationDesc, apply_activation, validate_fused_activation
from .base import FLOATS, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, tensor
from .dequantize import weight_codes
from .kernel_state import PRODUCER, KernelState
from .nodes import DmlNode, Imported

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
    made = ctx.dml_node(desc, ("ATensor", "BTensor"), output_shape)
    if ctx.attr("bits", 4) == 4:
        made.imported = Imported(SQNBIT_FP32) if ctx.attr("accuracy_level", 0) < 4 else Imported(SQNBIT_INT8, ctx.attr("block_size", 0))
    return made


def matmul(ctx: NodeContext) -> DmlNode:
    """MatMul as DmlOperatorMatMul, com.microsoft FusedMatMul as DmlOperatorFusedMatMul: both
    operands read with the output's batch sizes (stride 0 where they broadcast); FusedMatMul's
    transA, transB and alpha as TransA, TransB and Alpha."""
    if ctx.attr("transBatchA", 0) or ctx.attr("transBatchB", 0):
        raise Fallback("FusedMatMul's transBatchA/transBatchB (batch strides rotated) are not modelled by dml_ep", ON_DML)
    a_shape, b_shape = ctx.shape(A), ctx.shape(1)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise Fallback("a 1-D operand of MatMul is not modelled by dml_ep", ON_DML)
    trans_a, trans_b = (DML_MATRIX_TRANSFORM(int(bool(ctx.attr(name, 0)))) for name in ("transA", "transB"))
    m = a_shape[-1] if trans_a else a_shape[-2]
    n = b_shape[-2] if trans_b else b_shape[-1]
    try:
        batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ShapeError(f"batch dimensions {list(a_shape[:-2])} and {list(b_shape[:-2])} do not broadcast", node=ctx.node) from None
    if len(batch) > 2:
        raise Fallback(f"the product has {len(batch) + 2} dimensions; DirectML's GEMM takes 2 to 4", ASSIGNED_TO_DML)
    batch4 = (1,) * (2 - len(batch)) + tuple(batch)  # the real EP's descs have 4 dimensions (NCHW), valid at every level
    dtype = ctx.info(A).dtype
    desc = DML_GEMM_OPERATOR_DESC(
        ATensor=_operand(dtype, a_shape, batch4), BTensor=_operand(dtype, b_shape, batch4), CTensor=None,
        OutputTensor=tensor(dtype, (*batch4, m, n)), TransA=trans_a, TransB=trans_b, Alpha=float(ctx.attr("alpha", 1.0)), Beta=0.0)
    return _onnxruntime_sgemm(ctx.dml_node(desc, ("ATensor", "BTensor"), (*batch, m, n)))


def gemm(ctx: NodeContext) -> DmlNode:
    """Gemm as DmlOperatorGemm: 2-D A and B with their transforms, C (optional) read with the
    output's sizes (stride 0 where it broadcasts), alpha and beta."""
    trans_a, trans_b = (DML_MATRIX_TRANSFORM(int(bool(ctx.attr(name, 0)))) for name in ("transA", "transB"))
    a_shape, b_shape = ctx.shape(A), ctx.shape(1)
    sizes = (a_shape[1] if trans_a else a_shape[0], b_shape[0] if trans_b else b_shape[1])
    dtype = ctx.info(A).dtype
    c = _operand(dtype, ctx.shape(2), (1, 1), sizes) if ctx.input_name(2) else None
    desc = DML_GEMM_OPERATOR_DESC(
        ATensor=tensor(dtype, (1, 1, *a_shape)), BTensor=tensor(dtype, (1, 1, *b_shape)), CTensor=c, OutputTensor=tensor(dtype, (1, 1, *sizes)),
        TransA=trans_a, TransB=trans_b, Alpha=float(ctx.attr("alpha", 1.0)), Beta=float(ctx.attr("beta", 1.0)))
    return _onnxruntime_sgemm(ctx.dml_node(desc, ("ATensor", "BTensor", "CTensor"), sizes))


# What onnxruntime's CPU EP computes a GEMM with (the DmlNode's ``imported``): MatMul, FusedMatMul and Gemm
# with MLAS's SGEMM; a 4-bit MatMulNBits at accuracy levels 0 to 3 with MLAS's SQNBitGemm CompFp32.
MLAS, SQNBIT_FP32, SQNBIT_INT8 = "MLAS SGEMM", "MLAS SQNBitGemm CompFp32", "MLAS SQNBitGemm CompInt8"
SQNBIT_ROWS = 128  # SQNBitGemm's rows per thread's part (StrideM)


def _onnxruntime_sgemm(node: DmlNode) -> DmlNode:
    node.imported = Imported(MLAS)
    return node


def _operand(dtype, shape, batch, matrix=None):
    """A tensor of ``shape`` read as ``batch`` + its matrix (or ``matrix``), stride 0 where it broadcasts."""
    sizes = (*batch, *(matrix or shape[-2:]))
    try:
        strides = broadcast_strides(tuple(shape), sizes)
    except ValueError:
        raise ShapeError(f"shape {list(shape)} does not broadcast to {list(sizes)}") from None
    return tensor(dtype, sizes, strides)


# --- kernel ----------------------------------------------------------------------------------


def gemm_kernel(desc, tensors: dict, arithmetic, state: KernelState, compiled: bool = False) -> np.ndarray:
    """``Alpha * A x B + Beta * C`` in float64 rounded once (directml), or in float32 (onnxruntime:
    as onnxruntime's CPU EP computes the node where dml_ep knows how, :func:`onnxruntime_gemm`;
    ``compiled``: MLAS's panels summed by ``kernels.compiled.sgemm``)."""
    if arithmetic.onnxruntime:
        computed = onnxruntime_gemm(desc, tensors, state, compiled)
        if computed is not None:
            return computed
    wide = np.float32 if arithmetic.onnxruntime else np.float64
    a = _matrices(view(tensors["ATensor"], desc.ATensor), desc.TransA, wide)
    b = _weight(tensors, desc, wide, state, as_described=not arithmetic.onnxruntime)
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


def onnxruntime_gemm(desc, tensors: dict, state: KernelState, compiled: bool = False) -> np.ndarray | None:
    """The node as onnxruntime's CPU EP computes it on this host, where dml_ep knows how (what the
    importer noted, ``state.imported``: :data:`MLAS`, :data:`SQNBIT_FP32`, :data:`SQNBIT_INT8`); else None."""
    imported = state.imported.onnxruntime
    if imported == MLAS and desc.OutputTensor.DataType in (DT.FLOAT32, DT.FLOAT16):
        return mlas_gemm(desc, tensors, state, compiled)
    if imported == SQNBIT_FP32 and host_runs_sqnbit_fp32():
        return sqnbit_fp32_gemm(desc, tensors, state, compiled)
    if imported == SQNBIT_INT8 and host_runs_sqnbit_int8():
        return sqnbit_int8_gemm(desc, tensors, state, state.imported.block_size)
    return None


def mlas_gemm(desc, tensors: dict, state: KernelState, compiled: bool = False) -> np.ndarray:
    """onnxruntime's MatMul, FusedMatMul or Gemm on this host (``kernels.mlas_sgemm``): one GEMM
    of all of A's rows where B has no batch and A is not transposed (``MatMulComputeHelper``),
    else one per batch; B (as :func:`_weight` reads it, once per buffer) packed where it is a
    constant 2-D tensor; Gemm's C as the output's start and its beta (0 without C)."""
    trans_a, trans_b = desc.TransA == DML_MATRIX_TRANSFORM.TRANSPOSE, desc.TransB == DML_MATRIX_TRANSFORM.TRANSPOSE
    a = view(tensors["ATensor"], desc.ATensor).astype(np.float32, copy=False)
    a = np.swapaxes(a, -1, -2) if trans_a else a
    b = _weight(tensors, desc, np.float32, state)
    constant_b = state.constants.get("BTensor")
    with_c = desc.CTensor is not None and desc.Beta != 0.0
    call = GemmCall(trans_a, trans_b, desc.Alpha, desc.Beta if with_c else 0.0, constant_b is not None and constant_b.ndim == 2)
    m, n = a.shape[-2], b.shape[-1]
    c = view(tensors["CTensor"], desc.CTensor).astype(np.float32).reshape(1, m, n) if with_c else None
    if not trans_a and b.ndim == 2:
        y = sgemm_batch(a.reshape(1, -1, a.shape[-1]), b[None], call, host_sgemm(), c, compiled)
    else:
        stack = np.broadcast_to(b, (*a.shape[:-2], *b.shape[-2:])).reshape(-1, *b.shape[-2:])
        y = sgemm_batch(a.reshape(-1, m, a.shape[-1]), stack, call, host_sgemm(), c, compiled)
    return y.reshape(desc.OutputTensor.Sizes).astype(desc.OutputTensor.DataType.numpy(), copy=False)


def sqnbit_fp32_gemm(desc, tensors: dict, state: KernelState, compiled: bool = False) -> np.ndarray:
    """onnxruntime's 4-bit MatMulNBits at accuracy levels 0 to 3 (``SQ4BitGemm_CompFp32``,
    qnbitgemm.cpp): A's rows in parts of 128, each part against the weight dequantized to float32
    by MLAS's SGEMM kernel over all of K at once (one panel, k in order from zero). A float16 node
    is the same in float32 (matmul_nbits.cc ``ComputeBPacked<MLFloat16>``: A converted, exactly;
    the weight float32, as the DEQUANTIZE before gives it in this arithmetic; C rounded to float16). A part of one
    row runs MLAS's M=1 CompFp32 kernel of the host (``kernels.mlas_sqnbit_m1``). Where the host's
    onnxruntime has no such kernels (:func:`host_runs_sqnbit_fp32`), the float32 GEMM in numpy's
    order stands in for all (compare names the difference "float summation order")."""
    a = view(tensors["ATensor"], desc.ATensor)
    rows = a.reshape(-1, a.shape[-1]).astype(np.float32, copy=False)
    m1 = host_m1_kernel()
    codes = _per_buffer(tensors, state, "B codes", lambda buffer: _codes(buffer, desc, state), desc) if compiled and m1 else None
    if codes is not None and m1 is not None and rows.shape[0] == 1:  # a decode step: the weight read as its 4-bit codes
        differences, scales, block = codes
        y = m1_code_product(rows[0], differences, scales, block, m1)
        return y.reshape(desc.OutputTensor.Sizes).astype(desc.OutputTensor.DataType.numpy(), copy=False)
    b = _weight(tensors, desc, np.float32, state)[None]
    panels = _packed(b, tensors, desc, state) if compiled and rows.shape[0] > 1 else None
    out = np.empty((rows.shape[0], b.shape[-1]), np.float32)
    fused = host_sgemm().fused
    for start in range(0, rows.shape[0], SQNBIT_ROWS):
        part = rows[start:start + SQNBIT_ROWS]
        if len(part) > 1:
            out[start:start + len(part)] = panel_sum(part[None], b, fused, compiled, panels)[0]
        else:
            out[start] = part[0] @ b[0] if m1 is None else m1_product(part[0], b[0], m1, compiled)
    return out.reshape(desc.OutputTensor.Sizes).astype(desc.OutputTensor.DataType.numpy(), copy=False)


def sqnbit_int8_gemm(desc, tensors: dict, state: KernelState, block_size: int) -> np.ndarray:
    """onnxruntime's 4-bit MatMulNBits at accuracy level 4 (``SQ4BitGemm_CompInt8``): A's rows
    quantized to int8 per block of ``block_size`` along K as MLAS quantizes them
    (``kernels.matmul_nbits.int8_blocks``, exact), then their product with the weight rounded once;
    MLAS sums each block's integer dot product times the two scales in float32, so only that
    summation order differs (compare: "float summation order")."""
    a = view(tensors["ATensor"], desc.ATensor)
    rows = int8_blocks(a.reshape(-1, a.shape[-1]), block_size)
    y = rows @ _weight(tensors, desc, np.float64, state)
    return y.reshape(desc.OutputTensor.Sizes).astype(desc.OutputTensor.DataType.numpy())


def compiled_gemm_kernel(desc, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """:func:`gemm_kernel` with MLAS's panels summed by ``kernels.compiled.sgemm``."""
    return gemm_kernel(desc, tensors, arithmetic, state, compiled=True)


def exact_product(desc, tensors: dict) -> tuple[np.ndarray, np.ndarray, int]:
    """``Alpha * A x B + Beta * C`` in float64 (within float64 rounding of exact), its sum of
    magnitudes, and K: what compare's causes hold a reference's float32 GEMM against. A fused
    activation is applied to the float32 value (it changes an error by about its slope, at most 1
    but for Selu's 1.05)."""
    a = _matrices(view(tensors["ATensor"], desc.ATensor), desc.TransA, np.float64)
    b = _matrices(view(tensors["BTensor"], desc.BTensor), desc.TransB, np.float64)
    value, magnitude = np.matmul(a, b) * desc.Alpha, np.matmul(np.abs(a), np.abs(b)) * abs(desc.Alpha)
    if desc.CTensor is not None and desc.Beta != 0.0:
        c = view(tensors["CTensor"], desc.CTensor).astype(np.float64) * desc.Beta
        value, magnitude = value + c, magnitude + np.abs(c)
    if desc.FusedActivation is not None:
        value = apply_activation(desc.FusedActivation, value.astype(np.float32)).astype(np.float64)
    return value, magnitude, a.shape[-1]


def _matrices(x: np.ndarray, transform: DML_MATRIX_TRANSFORM, dtype) -> np.ndarray:
    x = x.astype(dtype)
    return np.swapaxes(x, -1, -2) if transform == DML_MATRIX_TRANSFORM.TRANSPOSE else x


def _weight(tensors: dict, desc, dtype, state: KernelState, as_described: bool = False) -> np.ndarray:
    """B after its transform, in the arithmetic's type, C-contiguous; one matrix where B's batch
    strides are 0 (a weight), converted once per buffer (:func:`_per_buffer`). ``as_described``:
    read as BTensor's DataType first, as DirectML reads it (a float16 MatMulNBits' weight comes
    float32 from the "onnxruntime" arithmetic's DEQUANTIZE, which compare may feed a "directml" GEMM)."""
    def converted(buffer: np.ndarray) -> np.ndarray:
        b = view(buffer, desc.BTensor)
        if desc.BTensor.DimensionCount > 2 and not any(desc.BTensor.element_strides[:-2]):
            b = b[(0,) * (b.ndim - 2)]
        if as_described:
            b = b.astype(desc.BTensor.DataType.numpy(), copy=False)
        return np.ascontiguousarray(_matrices(b, desc.TransB, dtype))

    return _per_buffer(tensors, state, ("B", np.dtype(dtype).str, as_described), converted, desc)


def _packed(b: np.ndarray, tensors: dict, desc, state: KernelState) -> np.ndarray | None:
    """B ({1, K, N}, from :func:`_weight`) packed for the compiled panels, once per buffer (a
    constant weight's: onnxruntime packs it once too)."""
    return _per_buffer(tensors, state, "B panels", lambda _: packed_panels(b), desc)


def _codes(buffer: np.ndarray, desc, state: KernelState) -> tuple[np.ndarray, np.ndarray, int] | None:
    """B as its maker's 4-bit codes minus zero points {K, N} (int8), scales {blocks, N} and block, where a
    MatMulNBits' DEQUANTIZE made this buffer from constants (``PRODUCER``) and GEMM reads it transposed; else None."""
    producer = state.shared.get("BTensor", {}).get(PRODUCER)
    found = weight_codes(producer[1], producer[2]) if producer is not None and producer[0] is buffer else None
    if found is None or desc.TransB != DML_MATRIX_TRANSFORM.TRANSPOSE:
        return None
    differences, scales, block = found
    return np.ascontiguousarray(differences.T), np.ascontiguousarray(scales.T), block


def _per_buffer(tensors: dict, state: KernelState, key, make, desc):
    """``make(buffer)`` of BTensor's buffer, kept in the kernel's ``state`` under ``key`` while the
    buffer stays the same (a constant weight's is the same every run); where BTensor is made from
    constants alone (a MatMulNBits' DEQUANTIZE), kept in what the GEMMs of every shape reading it
    share (``state.shared``), by B's desc and transform too."""
    buffer, b_desc = tensors["BTensor"], desc.BTensor
    store = state.shared.get("BTensor", state.derived)
    key = (key, desc.TransB)
    made = store.get(key)
    if made is None or made[0] is not buffer or (made[1] is not b_desc and made[1] != b_desc):  # descs are interned: hashing one costs more
        made = store[key] = (buffer, b_desc, make(buffer))
    return made[2]


def device_precision(desc: DML_GEMM_OPERATOR_DESC) -> DevicePrecision:
    """WebNN's gemm tolerance (wpt webnn/resources/utils.js ``getGemmPrecisionTolerance``): 2K ULP for
    the dot product's K multiplies and adds in their worst serial order (D3D11.3 3.1.3.2's bound on
    fused ops), one more for an Alpha other than 1, one for a C with Beta other than 0 and one more
    for a Beta other than 1. A fused activation's own tolerance is not added."""
    _, k = desc.matrix("ATensor", desc.TransA)
    ulp = 2 * k + (desc.Alpha != 1.0) + (desc.CTensor is not None and desc.Beta != 0.0) * (1 + (desc.Beta != 1.0))
    return DevicePrecision(f"WebNN's gemm tolerance 2K (+ alpha, beta) ULP, K = {k}: {ulp} ULP (wpt webnn/resources/utils.js)",
                           ulp32=ulp, ulp16=ulp)


OPERATORS = (Operator(desc=DML_GEMM_OPERATOR_DESC, kernel=gemm_kernel, compiled_kernel=compiled_gemm_kernel, exact_value=None, exact_float=exact_product,
                      device_precision=device_precision),)
