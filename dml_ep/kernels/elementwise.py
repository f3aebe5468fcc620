"""DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD and DML_OPERATOR_ELEMENT_WISE_ADD1.

QUANTIZED_LINEAR_ADD, DirectML: ``Output = clamp(round(((A - za) * sa + (B - zb) * sb) / sc) + zc)``.
``"directml"`` evaluates it in float64 (each product is exact) and settles the elements near a
half-integer exactly. ``"onnxruntime"`` follows MLAS's AVX2 kernel (qladd_avx2.cpp), on raw codes
in float32 with ``rAC = sa/sc``, ``rBC = sb/sc`` and ``y = fma(a, rAC, fma(b, rBC, fixed))``,
``fixed = zc - fma(rAC, za, rBC*zb)``. The source writes ``fixed`` and the scalar-B addend
``fixed + b*rBC`` as separate multiplies and adds, but the shipped binary (GCC, ``-mfma``)
contracts both into FMAs: measured against onnxruntime 1.32 on inputs where the variants round to
different codes (tests/test_qlinear_add.py), only the contracted form matches. So the scalar-B
loop computes what the general loop does, and only the operand order differs: when A is constant
over the span (``input0scalar``, checked first) onnxruntime swaps the operands, A's role going to B.

The span is the innermost run of output dimensions (size > 1) over which each input keeps its
broadcast state (onnxruntime's ``Broadcaster``); it is read off the descs' zero strides.

ADD1: ``FusedActivation(A + B)`` computed in float32 and rounded once to the tensors' type: for
float16 the sum is not rounded before the activation (DirectML computes float16 in float32 unless
half-precision computation is allowed; onnxruntime's CPU EP, lacking a float16 LeakyRelu, runs the
Add and the activation in float32 between casts, which gives the same). A single float16 addition
is correctly rounded either way. The real DML EP maps an Add with no activation to
ELEMENT_WISE_ADD; ADD1 without an activation is the same math.
"""

from __future__ import annotations

import numpy as np

from ..tensor_desc import view
from . import quantize
from .activation import apply_activation
from .float32_fma import fma32
from .parameters import scalar


def constant_over_span(desc_a, desc_b) -> tuple[bool, bool]:
    """Whether A (resp. B) is constant over onnxruntime's innermost broadcast span.

    It is when the input does not move along the innermost output dimension of size > 1.
    """
    for size, stride_a, stride_b in zip(reversed(desc_a.Sizes), reversed(desc_a.element_strides), reversed(desc_b.element_strides)):
        if size > 1:
            return stride_a == 0, stride_b == 0
    return True, True


def quantized_linear_add(desc, tensors: dict, options, cache: dict) -> np.ndarray:
    """The output is a function of the two 8-bit codes only: a 256 x 256 table per arithmetic (kept
    in the node's ``cache``), then one gather over the output."""
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    key = ("table", options.mode)  # scales and zero points are constants (the importer sees to it)
    if key not in cache:
        scales = tuple(np.float32(scalar(tensors, desc, f)) for f in ("AScaleTensor", "BScaleTensor", "OutputScaleTensor"))
        zero_points = tuple(scalar(tensors, desc, f) for f in ("AZeroPointTensor", "BZeroPointTensor", "OutputZeroPointTensor"))
        codes_a = np.arange(256, dtype=np.uint8).view(a.dtype)[:, None]  # indexed by the code's byte
        codes_b = np.arange(256, dtype=np.uint8).view(b.dtype)[None, :]
        add = _onnxruntime_add if options.onnxruntime else _directml_add
        cache[key] = add(desc, codes_a, codes_b, *scales, *zero_points).reshape(-1)
    axes = memory_axes(a if 0 not in a.strides else b)  # work in memory order: the output keeps the layout
    a, b = a.transpose(axes), b.transpose(axes)
    index = np.left_shift(a.view(np.uint8), 8, dtype=np.uint16)  # (a's byte << 8) | b's byte
    np.bitwise_or(index, b.view(np.uint8), out=index)
    return cache[key].take(index, mode="wrap").transpose(np.argsort(axes))


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


def _onnxruntime_add(desc, a, b, sa, sb, sc, za, zb, zc) -> np.ndarray:
    """MLAS's float32 arithmetic, with its operand order for the broadcast case, rounded by cvtps2dq."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    za, zb = np.float32(za), np.float32(zb)
    if constant_over_span(desc.ATensor, desc.BTensor)[0]:  # onnxruntime passes (B, A) to the scalar-B kernel
        a, b, sa, sb, za, zb = b, a, sb, sa, zb, za
    r_ac, r_bc = sa / sc, sb / sc
    fixed = np.float32(zc) - fma32(r_ac, za, r_bc * zb)
    y = fma32(a, r_ac, fma32(b, r_bc, fixed))
    out_dtype = desc.OutputTensor.DataType.numpy()
    lo, hi = quantize.quant_range(out_dtype)
    rounded = np.rint(y.astype(np.float64))
    rounded[rounded >= 2.0**31] = lo  # cvtps2dq turns out-of-range values into INT_MIN
    return np.clip(rounded, lo, hi).astype(out_dtype)


def element_wise_add1(desc, tensors: dict, options, cache: dict) -> np.ndarray:
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    with np.errstate(over="ignore", invalid="ignore"):  # IEEE: overflow to infinity, inf - inf is NaN
        out = np.add(a, b, dtype=np.float32)
        if desc.FusedActivation is not None:
            out = apply_activation(desc.FusedActivation, out)
        return out.astype(a.dtype, copy=False)
