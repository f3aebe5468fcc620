"""DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD (com.microsoft QLinearAdd): desc, import, kernel, exact value.

Import, as DmlOperatorQLinearAdd.cpp: A, B and the output are right-aligned to at least 4
dimensions (at most 8) and read with the output's sizes, ONNX broadcasting a stride of 0; the
scales and zero points get the same dimension count.

Kernel. DirectML: ``Output = clamp(round(((A - za) * sa + (B - zb) * sb) / sc) + zc)``.
``"directml"`` evaluates it in float64 (each product is exact) and settles the elements near a
half-integer exactly. ``"onnxruntime"`` follows MLAS's AVX2 kernel (qladd_avx2.cpp), on raw codes
in float32 with ``rAC = sa/sc``, ``rBC = sb/sc`` and ``y = fma(a, rAC, fma(b, rBC, fixed))``,
``fixed = zc - fma(rAC, za, rBC*zb)``. The source writes ``fixed`` and the scalar-B addend
``fixed + b*rBC`` as separate multiplies and adds, but the shipped binary (GCC, ``-mfma``)
contracts both into FMAs: measured against onnxruntime 1.32 on inputs where the variants round to
different codes (tests/operators/test_element_wise_quantized_linear_add.py), only the contracted form matches. So the scalar-B
loop computes what the general loop does, and only the operand order differs: when A is constant
over the span (``input0scalar``, checked first) onnxruntime swaps the operands, A's role going to B.

The span is the innermost run of output dimensions (size > 1) over which each input keeps its
broadcast state (onnxruntime's ``Broadcaster``); it is read off the descs' zero strides.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import view
from ..numerics.kernels import compiled as native
from ..numerics.kernels import quantize
from ..numerics.kernels.float32_fma import fma32
from ..numerics.kernels.parameters import checked_scale, read4d, scalar
from ..numerics.kernels.strided_rows import address, strided_rows
from .base import QUANTIZED_BINARY_INPUTS, Operator, QuantizedBinaryDesc
from .importing import NodeContext, broadcast, check_scale, check_zero_point, operand, output_type, quantized_type, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC(QuantizedBinaryDesc):
    """ELEMENT_WISE_QUANTIZED_LINEAR_ADD (com.microsoft QLinearAdd), DML_FEATURE_LEVEL_4_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_QUANTIZED_LINEAR_ADD
    INTRODUCED = FL.FL_4_0
    TENSOR_RULES = QuantizedBinaryDesc.tensor_rules(lambda field: {FL.FL_4_0: (1, 8)})

    def validate_shapes(self, feature_level: FL) -> None:
        tensors = self.tensors()
        for field, each in tensors.items():
            if each.DimensionCount != self.ATensor.DimensionCount:
                self.fail(f"DimensionCount {each.DimensionCount} must equal ATensor's {self.ATensor.DimensionCount}", field)
            if ("Scale" in field or "ZeroPoint" in field) and each.element_count != 1:
                self.fail(f"must hold exactly 1 element (sizes {list(each.Sizes)})", field)
        for field in ("ATensor", "BTensor"):
            if tensors[field].Sizes != self.OutputTensor.Sizes:
                self.fail(f"sizes {list(tensors[field].Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", field)


# --- import from ONNX ------------------------------------------------------------------------


def qlinear_add(ctx: NodeContext) -> DmlNode:
    a_type = quantized_type(ctx, 0, "A")
    b_type = quantized_type(ctx, 3, "B")
    a_shape, b_shape = ctx.info(0).shape, ctx.info(3).shape
    out_shape, sizes = broadcast(ctx, a_shape, b_shape)
    for index in (1, 4, 6):
        check_scale(ctx, index, ctx.parameter(index))
    c_type = output_type(ctx)
    for index, dtype in ((2, a_type), (5, b_type), (7, c_type)):
        check_zero_point(ctx, index, ctx.parameter(index), dtype)
    ones = (1,) * len(sizes)

    def zero_point(index, dtype):
        return tensor(dtype, ones) if ctx.input_name(index) else None

    desc = DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC(
        ATensor=operand(a_type, a_shape, sizes, ctx.input_name(0) in ctx.constants),
        AScaleTensor=tensor(np.float32, ones),
        AZeroPointTensor=zero_point(2, a_type),
        BTensor=operand(b_type, b_shape, sizes, ctx.input_name(3) in ctx.constants),
        BScaleTensor=tensor(np.float32, ones),
        BZeroPointTensor=zero_point(5, b_type),
        OutputScaleTensor=tensor(np.float32, ones),
        OutputZeroPointTensor=zero_point(7, c_type),
        OutputTensor=tensor(c_type, sizes),
    )
    return ctx.dml_node(desc, QUANTIZED_BINARY_INPUTS, out_shape)


# --- kernel ----------------------------------------------------------------------------------


def constant_over_span(desc_a, desc_b) -> tuple[bool, bool]:
    """Whether A (resp. B) is constant over onnxruntime's innermost broadcast span.

    It is when the input does not move along the innermost output dimension of size > 1.
    """
    for size, stride_a, stride_b in zip(reversed(desc_a.Sizes), reversed(desc_a.element_strides), reversed(desc_b.element_strides)):
        if size > 1:
            return stride_a == 0, stride_b == 0
    return True, True


def code_table(desc, tensors: dict, options, state: KernelState) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple | None]:
    """A and B (views with the output's sizes), the output as a function of their two 8-bit codes
    (a 256 x 256 table, flat) and, in MLAS's arithmetic, its :func:`mlas_terms`; per arithmetic
    and parameters (the kernel's ``state`` keeps the last ones: parameters bound at run time may
    change from run to run)."""
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    scale_fields = ("AScaleTensor", "BScaleTensor", "OutputScaleTensor")
    scales = tuple(np.float32(scalar(tensors, desc, f)) for f in scale_fields)
    zero_points = tuple(scalar(tensors, desc, f) for f in ("AZeroPointTensor", "BZeroPointTensor", "OutputZeroPointTensor"))
    key = ("table", options.mode)
    made = state.derived.get(key)
    if made is None or made[0] != (scales, zero_points):
        for field, scale in zip(scale_fields, scales):
            checked_scale(scale, tensor=field)
        codes_a = np.arange(256, dtype=np.uint8).view(a.dtype)[:, None]  # indexed by the code's byte
        codes_b = np.arange(256, dtype=np.uint8).view(b.dtype)[None, :]
        if options.onnxruntime:
            terms = mlas_terms(desc, *scales, *zero_points)
            table = _onnxruntime_add(desc, codes_a, codes_b, terms)
        else:
            terms, table = None, _directml_add(desc, codes_a, codes_b, *scales, *zero_points)
        made = state.derived[key] = (scales, zero_points), table.reshape(-1), terms
    return a, b, made[1], made[2]


def quantized_linear_add(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """The table (:func:`code_table`), then one gather over the output, in memory order."""
    a, b, table, _ = code_table(desc, tensors, options, state)
    axes = memory_axes(a if 0 not in a.strides else b)  # work in memory order: the output keeps the layout
    a, b = a.transpose(axes), b.transpose(axes)
    index = np.left_shift(a.view(np.uint8), 8, dtype=np.uint16)  # (a's byte << 8) | b's byte
    np.bitwise_or(index, b.view(np.uint8), out=index)
    return table.take(index, mode="wrap").transpose(np.argsort(axes))


def quantized_linear_add_compiled(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """:func:`quantized_linear_add` compiled: one pass reading A and B through their strides, no
    index array; the walk over them is worked out once per layout. In MLAS's arithmetic, where the
    build has a hardware FMA, the values are computed (``kernels.compiled.quantized_add``), else
    looked up in the table (``kernels.compiled.table_lookup``). Inputs with negative strides take
    the twin."""
    a, b, table, terms = code_table(desc, tensors, options, state)
    if native.table_lookup is None or any(s < 0 for s in a.strides + b.strides):
        return quantized_linear_add(desc, tensors, options, state)
    layout = (a.shape, a.strides, b.strides)
    walk = state.derived.get(layout)
    if walk is None:
        axes = memory_axes(a if 0 not in a.strides else b)
        moved = (a.transpose(axes), b.transpose(axes))  # 8-bit: strides in bytes are in elements
        walk = state.derived[layout] = axes, np.argsort(axes), strided_rows(moved[0].shape, *(x.strides for x in moved))
    axes, back, (span, (a_step, b_step), (a_rows, b_rows)) = walk
    out_dtype = desc.OutputTensor.DataType.numpy()
    out = np.empty([a.shape[axis] for axis in axes], out_dtype)
    if not out.size:
        return out.transpose(back)
    if terms is not None and mlas_add_computed(a.dtype, b.dtype, out_dtype):
        swapped, r_ac, r_bc, fixed = terms
        first, second = ((b, b_rows, b_step), (a, a_rows, a_step)) if swapped else ((a, a_rows, a_step), (b, b_rows, b_step))
        native.quantized_add.add(address(first[0]), *first[1:], address(second[0]), *second[1:], out.view(np.uint8).reshape(-1), span,
                                 r_ac, r_bc, fixed, *quantize.quant_range(out_dtype), out_dtype == np.int8)
    else:
        native.table_lookup.lookup(table.view(np.uint8), address(a), a_rows, a_step, address(b), b_rows, b_step,
                                   out.view(np.uint8).reshape(-1), span)
    return out.transpose(back)


def mlas_add_computed(a_dtype, b_dtype, out_dtype) -> bool:
    """Whether MLAS's arithmetic is computed rather than looked up: one 8-bit type for A, B and the
    output (as onnxruntime's QLinearAdd has), and a build with a hardware FMA."""
    return native.quantized_add is not None and native.quantized_add.HARDWARE_FMA and a_dtype == b_dtype == out_dtype


def memory_axes(x: np.ndarray) -> list[int]:
    """``x``'s axes from outermost to innermost in memory: ``x.transpose(axes)`` is row-major where
    ``x`` is dense (a channels-last output a convolution returned as NCHW, say)."""
    return sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis]))


def _directml_add(desc, a, b, sa, sb, sc, za, zb, zc) -> np.ndarray:
    """DirectML's formula, correctly rounded: float64 estimate, exact check near half-integers."""
    out_dtype = desc.OutputTensor.DataType.numpy()
    da = a.astype(np.float64) - za
    db = b.astype(np.float64) - zb
    estimate = (da * np.float64(sa) + db * np.float64(sb)) / np.float64(sc)
    (pa, qa), (pb, qb), (pc, qc) = quantize.ratio(sa), quantize.ratio(sb), quantize.ratio(sc)

    def compare_with_half(index, twice_half):
        where = np.unravel_index(index, estimate.shape)
        exact_a = quantize.to_object(np.broadcast_to(da, estimate.shape)[where])
        exact_b = quantize.to_object(np.broadcast_to(db, estimate.shape)[where])
        # (2 * value - twice_half) times qa * qb * pc, with value = (da*pa/qa + db*pb/qb) * qc/pc
        return 2 * (exact_a * pa * qb + exact_b * pb * qa) * qc - twice_half * qa * qb * pc

    return quantize.saturate(quantize.round_half_even_exact(estimate, compare_with_half), zc, out_dtype)


def _onnxruntime_add(desc, a, b, terms: tuple) -> np.ndarray:
    """MLAS's float32 arithmetic with its :func:`mlas_terms`, rounded by cvtps2dq."""
    swapped, r_ac, r_bc, fixed = terms
    a, b = (b, a) if swapped else (a, b)
    return mlas_add(a, b, r_ac, r_bc, fixed, desc.OutputTensor.DataType.numpy())


def mlas_add(a, b, r_ac, r_bc, fixed, out_dtype) -> np.ndarray:
    """``fma(a, rAC, fma(b, rBC, fixed))`` on the codes, rounded by cvtps2dq and saturated."""
    y = fma32(a.astype(np.float32), r_ac, fma32(b.astype(np.float32), r_bc, fixed))
    lo, hi = quantize.quant_range(out_dtype)
    rounded = np.rint(np.atleast_1d(y).astype(np.float64))
    rounded[~(rounded < 2.0**31)] = lo  # cvtps2dq turns out-of-range values and NaN into INT_MIN
    return np.clip(rounded, lo, hi).astype(out_dtype).reshape(np.shape(y))


def mlas_terms(desc, sa, sb, sc, za, zb, zc) -> tuple[bool, np.float32, np.float32, np.float32]:
    """MLAS's operand order and float32 terms: whether A and B swap roles (onnxruntime passes
    (B, A) to its scalar-B kernel when A is constant over the span), then ``rAC``, ``rBC`` and
    ``fixed`` for ``y = fma(a, rAC, fma(b, rBC, fixed))`` on the (swapped) raw codes."""
    swapped = constant_over_span(desc.ATensor, desc.BTensor)[0]
    if swapped:
        sa, sb, za, zb = sb, sa, zb, za
    r_ac, r_bc = np.float32(sa) / np.float32(sc), np.float32(sb) / np.float32(sc)
    fixed = np.float32(zc) - np.float32(fma32(r_ac, np.float32(za), r_bc * np.float32(zb)))
    return swapped, r_ac, r_bc, fixed


# --- exact value (compare) -------------------------------------------------------------------


def exact_value(desc, tensors: dict, engine):
    """``((A - za) * sa + (B - zb) * sb) / sc``."""
    terms = [
        (read4d(tensors, desc, f"{x}Tensor") - scalar(tensors, desc, f"{x}ZeroPointTensor"), scalar(tensors, desc, f"{x}ScaleTensor"))
        for x in "AB"
    ]
    return terms, scalar(tensors, desc, "OutputScaleTensor")


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC, kernel=quantized_linear_add,
                      compiled_kernel=quantized_linear_add_compiled, exact_value=exact_value),)
