"""Which arithmetic the kernels use: DirectML's documented math, or onnxruntime CPU's.

- ``"directml"`` (the default): each quantized operator is "mathematically equivalent to
  dequantizing the inputs, performing the float operation, then quantizing the output"; dml_ep
  evaluates that ideal value and rounds it correctly, halves to even.
- ``"onnxruntime"``: what onnxruntime's CPU EP computes on x86-64, read from its MLAS source
  (see docs/onnxruntime_arithmetic.md): float32 requantization multipliers, QLinearAdd's
  fused-multiply-add form, and on CPUs with AVX2 but no VNNI the int16 saturation of pairs of
  uint8 x int8 products (VPMADDUBSW), detected from the host's CPU flags unless set explicitly.
"""

from __future__ import annotations

import dataclasses
import functools
import platform

from .enums import DML_TENSOR_DATA_TYPE
from .errors import DmlEpError

ARITHMETICS = ("directml", "onnxruntime")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (Linux /proc/cpuinfo; empty where unavailable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def host_saturates_u8s8(flags: frozenset[str] | None = None) -> bool:
    """Whether onnxruntime's uint8 x int8 GEMM saturates product pairs to int16 on this CPU.

    MLAS picks VPMADDUBSW kernels on AVX2 and AVX512 (BW) CPUs without VNNI; AVX-VNNI,
    AVX512-VNNI and AMX kernels accumulate in int32 exactly.
    """
    if flags is None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return False
        flags = cpu_flags()
    exact = {"avx_vnni", "avx512_vnni"} & flags or {"amx_tile", "amx_int8"} <= flags
    return "avx2" in flags and not exact


@dataclasses.dataclass(frozen=True)
class Arithmetic:
    """The kernels' arithmetic mode; ``u8s8_saturation=None`` follows the host CPU."""

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
