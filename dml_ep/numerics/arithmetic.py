"""Which arithmetic the kernels use: DirectML's documented math, or onnxruntime CPU's.

- ``"directml"`` (the default): DirectML's documented formula as a point value. Where DirectML
  divides or multiplies in float, a float32 IEEE operation (round to nearest even): QuantizeLinear's
  and DynamicQuantizeLinear's ``x / scale`` is a float32 quotient, then rounded half to even (the
  same codes as MLAS). The quantized products and QLinearAdd ("mathematically equivalent to
  dequantizing the inputs, performing the float operation, then quantizing the output") still
  round their exact value correctly, halves to even. A device may differ from the point value
  within ``Operator.device_precision`` (D3D11.3's bounds, WebNN's tolerances).
- ``"onnxruntime"``: what onnxruntime's CPU EP computes on x86-64, read from its MLAS source
  (see docs/onnxruntime_arithmetic.md): float32 requantization multipliers, QLinearAdd's
  fused-multiply-add form, and on CPUs with AVX2 but no VNNI the int16 saturation of pairs of
  uint8 x int8 products (VPMADDUBSW), measured on the host's onnxruntime unless set explicitly.
"""

from __future__ import annotations

import dataclasses
import functools
import platform

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..core.choices import ARITHMETICS
from ..core.enums import DML_TENSOR_DATA_TYPE
from ..core.errors import DmlEpError
from ..core.graph import internal_model
from ..ort.reference import cpu_session
from .kernels.u8s8 import matmul_correction



@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags, for reports: Linux /proc/cpuinfo ("flags" on x86, "Features" on
    Arm); elsewhere only the machine and processor names the standard library offers."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset(name for name in (platform.machine(), platform.processor()) if name)


@functools.lru_cache(maxsize=1)
def host_saturates_u8s8() -> bool:
    """Whether the host's onnxruntime saturates pairs of uint8 x int8 products to int16, measured once.

    CPU flags would only guess MLAS's kernel choice (and are not portably readable), so this runs a
    MatMulInteger whose every pair leaves int16 on both sides (A = 255, B = 127 and -128) and checks
    for the result kernels/u8s8.py emulates. B is a constant 2-D initializer, which MatMulInteger
    prepacks: MLAS then runs its packed GEMM operation, as for QLinearMatMul's and QLinearConv's
    constant weights; and M = 2 rules out the GEMV kernel MLAS tries for one row of unpacked B.
    """
    a = np.full((2, 4), 255, np.uint8)
    b = np.tile(np.array([127, -128], np.int8), (4, 1))
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "u8s8_probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(b, "b")],
    )
    y = cpu_session(internal_model(graph, 10), threads=1).run(None, {"a": a})[0]
    return np.array_equal(y, a.astype(np.int32) @ b + matmul_correction(a, b))


@dataclasses.dataclass(frozen=True)
class Arithmetic:
    """The kernels' arithmetic mode; ``u8s8_saturation=None`` follows the host's onnxruntime."""

    mode: str = "directml"
    u8s8_saturation: bool | None = None

    def __post_init__(self):
        if self.mode not in ARITHMETICS:
            raise DmlEpError(f"unknown arithmetic {self.mode!r} (choose from {', '.join(ARITHMETICS)})")
        if self.u8s8_saturation is None:
            object.__setattr__(self, "u8s8_saturation", self.mode == "onnxruntime" and host_saturates_u8s8())

    @property
    def onnxruntime(self) -> bool:
        return self.mode == "onnxruntime"

    def saturates_u8s8(self, a_desc, b_desc) -> bool:
        """Whether a product of these two tensors saturates pairs (uint8 activations, int8 weights)."""
        return (
            self.onnxruntime
            and bool(self.u8s8_saturation)
            and a_desc.DataType == DML_TENSOR_DATA_TYPE.UINT8
            and b_desc.DataType == DML_TENSOR_DATA_TYPE.INT8
        )
