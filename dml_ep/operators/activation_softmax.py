"""DML_OPERATOR_ACTIVATION_SOFTMAX1 on float tensors (ONNX Softmax 1, 11 and 13): desc, import, kernel.

Import, as DmlOperatorActivation.cpp builds it: input and output of the node's shape, right-aligned
to at least 4 dimensions (DmlOperator::Initialize), and ``Axes`` the ONNX axes moved by that
padding (GetDmlAdjustedAxes). Softmax 1 and 11 (axis default 1) normalize over the flattened
``[axis, rank)`` dims: every one of them is an axis. Softmax 13 (axis default -1) normalizes over
its one axis. The real EP builds both as SOFTMAX1 (its remappedOperatorType). In an LLM or a
transformer it is the attention's softmax of a decomposed attention.

Support (DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC's page): from DML_FEATURE_LEVEL_5_1, 1 to 8
dimensions, FLOAT32 and FLOAT16.

Kernel, per row (the elements an output element's normalization reads):
- ``"directml"``: the page's ``exp(x - max) / sum(exp(x - max))``: ``x - max`` in float32, its exp
  correctly rounded to float32 (through float64), the sum of those in float64 rounded once to float32,
  then one IEEE float32 division. float16 tensors are widened to float32 and the quotient rounded once.
  A GPU's exp is Direct3D's ``exp`` (2^x within 2^-21 relative), its sum in some order: WebNN holds a
  softmax to ``3N + 3`` ULP (N the softmax axis length), which ``device_precision`` gives.
- ``"onnxruntime"``: onnxruntime's CPU Softmax (providers/cpu/math/softmax.cc, a Softmax-13 on another
  axis transposed to the last) is MlasComputeSoftmax (mlas/lib/compute.cpp): the row's maximum, then
  MlasComputeSumExpF32Kernel's exp of ``x + (-max)`` and their sum, then each exp multiplied by
  ``1.0f / sum``. On x86-64 with AVX-512F the sum-exp kernel is TransKernelAvx512F.S (16 lanes, 48
  elements a step, ``vscalefps``); with AVX2 and FMA3 TransKernelFma3.S (8 lanes, 24 a step, the scale
  2^m made in the exponent bits, a lower clamp at -88.376); without FMA3 (x86-64 before Haswell) the
  generic SSE2 one (compute.cpp, 4 lanes, each multiply-add rounded twice). ``mlas_softmax``
  (numerics/kernels/mlas_exp.py) emulates each bit for bit: MLAS's exp polynomial, its lane
  accumulators and their horizontal reduction order. Which one the host runs is measured once on
  onnxruntime's Softmax (``host_sum_exp_lanes``). onnxruntime has no float16 Softmax on the CPU: it
  inlines ONNX's Softmax function and runs that chain in float32 (:func:`onnxruntime_float16_softmax`:
  the Exp node's MLAS kernel, measured on onnxruntime's Exp by ``host_exp_lanes``, which is not the
  sum-exp kernel's choice, Eigen's row sums as ReduceSum's, a division), rounded once to float16.
  Not modelled: ARM64's kernels; NaN inputs (MLAS's maximum ignores a NaN in some lanes).

No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import InvalidAttributeError
from ..core.tensor_desc import view
from ..numerics.kernels.mlas_exp import host_exp_lanes, host_sum_exp_lanes, mlas_exp, mlas_softmax
from ..realep.kernel_registry import since_version
from ..realep.placement import ON_DML_AS
from .base import FLOATS, DevicePrecision, Operator, rules
from .element_wise_unary_math import UnaryDesc
from .importing import Fallback, NodeContext, padded_sizes, tensor
from .kernel_state import KernelState
from .nodes import DmlNode
from .reduce import check_axes, eigen_sums

# --- desc ------------------------------------------------------------------------------------

_DIMS = {FL.FL_5_1: (1, 8)}
_FIELDS = ("InputTensor", "OutputTensor")


@dataclasses.dataclass(frozen=True)
class DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC(UnaryDesc):
    """ACTIVATION_SOFTMAX1: ``exp(x - max) / sum(exp(x - max))`` over the elements that differ only in
    ``Axes``."""

    AxisCount: int
    Axes: tuple[int, ...]

    OPERATOR_TYPE = OP.ACTIVATION_SOFTMAX1
    INTRODUCED = FL.FL_5_1
    TENSOR_RULES = rules({f: (False, _DIMS) for f in _FIELDS}, {f: FLOATS for f in _FIELDS})

    def validate_shapes(self, feature_level: FL) -> None:
        super().validate_shapes(feature_level)
        check_axes(self, self.AxisCount, self.Axes)

    @property
    def axis_length(self) -> int:
        """N, the number of elements one normalization reads."""
        return int(np.prod([self.InputTensor.Sizes[axis] for axis in self.Axes]))


# --- import from ONNX ------------------------------------------------------------------------


def softmax(ctx: NodeContext) -> DmlNode:
    """ONNX Softmax on float32 or float16: one axis from since-version 13, the flattened
    ``[axis, rank)`` before."""
    dtype = ctx.info(0).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise Fallback(f"element type {dtype} is not supported by ACTIVATION_SOFTMAX1 (FLOAT32, FLOAT16)", ON_DML_AS.format("ACTIVATION_SOFTMAX1"))
    shape = ctx.shape(0)
    rank = len(shape)
    one_axis = since_version("", "Softmax", ctx.opset) >= 13
    axis = int(ctx.attr("axis", -1 if one_axis else 1))
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise InvalidAttributeError(f"axis {axis} is outside [-{rank}, {rank - 1}]", node=ctx.node)
    axis %= max(rank, 1)
    sizes = padded_sizes(shape)
    shift = len(sizes) - rank
    axes = (axis + shift,) if one_axis else tuple(range(axis + shift, len(sizes)))
    desc = DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC(InputTensor=tensor(dtype, sizes), OutputTensor=tensor(dtype, sizes),
                                                 AxisCount=len(axes), Axes=axes)
    return ctx.dml_node(desc, ("InputTensor",), shape)


# --- kernel ----------------------------------------------------------------------------------


def onnxruntime_float16_softmax(rows: np.ndarray, lanes: int) -> np.ndarray:
    """onnxruntime's float16 Softmax on the CPU (float32 ``rows`` of float16 values): it has no float16
    kernel, so it inlines ONNX's Softmax-13 function (ReduceMax, Sub, Exp, ReduceSum, Div) and runs the
    chain in float32 between one Cast in and one out: MLAS's Exp, Eigen's row sums, an IEEE division."""
    exps = mlas_exp(np.subtract(rows, rows.max(axis=1, keepdims=True), dtype=np.float32), lanes)
    sums = eigen_sums(exps, np.arange(rows.shape[0]) * rows.shape[1])
    return np.divide(exps, sums[:, None], dtype=np.float32)


def directml_softmax(rows: np.ndarray) -> np.ndarray:
    """DirectML's formula as a float32 point value (the module docstring says how it rounds)."""
    shifted = np.subtract(rows, rows.max(axis=1, keepdims=True), dtype=np.float32)
    exps = np.exp(shifted.astype(np.float64)).astype(np.float32)
    total = exps.sum(axis=1, dtype=np.float64).astype(np.float32)
    return np.divide(exps, total[:, None], dtype=np.float32)


def activation_softmax(desc: DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> np.ndarray:
    """The softmax over ``Axes``: the axes moved last and flattened into rows, normalized, moved back."""
    x = view(tensors["InputTensor"], desc.InputTensor)
    kept = [axis for axis in range(x.ndim) if axis not in desc.Axes]
    order = kept + list(desc.Axes)
    moved = np.transpose(x, order).astype(np.float32)
    rows = moved.reshape(-1, desc.axis_length)
    with np.errstate(over="ignore", invalid="ignore"):
        if not arithmetic.onnxruntime:
            y = directml_softmax(rows)
        elif x.dtype == np.float16:
            y = onnxruntime_float16_softmax(rows, host_exp_lanes())
        else:
            y = mlas_softmax(rows, host_sum_exp_lanes())
    return np.transpose(y.reshape(moved.shape), np.argsort(order)).astype(x.dtype)


def device_precision(desc: DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC) -> DevicePrecision:
    """WebNN's softmax tolerance, ``3N + 3`` ULP with N the softmax axis length."""
    ulp = 3 * desc.axis_length + 3
    return DevicePrecision(rule=f"WebNN softmax tolerance 3N+3 ULP, N = {desc.axis_length} (wpt webnn/resources/utils.js)", ulp32=ulp, ulp16=ulp)


OPERATORS = (Operator(desc=DML_ACTIVATION_SOFTMAX1_OPERATOR_DESC, kernel=activation_softmax, exact_value=None,
                      device_precision=device_precision),)
"""ONNX Softmax on DML_OPERATOR_ACTIVATION_SOFTMAX1 (``dml_ep/operators/activation_softmax.py``):
bit-exact with onnxruntime's CPU Softmax (MLAS's AVX-512F or FMA3 kernel), float32 and float16."""
