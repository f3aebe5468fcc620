"""The skeleton the integer products share (QUANTIZED_LINEAR_CONVOLUTION, QUANTIZED_LINEAR_MATRIX_MULTIPLY,
MATRIX_MULTIPLY_INTEGER, MATRIX_MULTIPLY_INTEGER_TO_FLOAT): an exact integer core, onnxruntime's
u8s8 saturation where the arithmetic asks for it, then the step after the core (:meth:`finish`),
which is what differs: the shared requantize step for the quantized products (the default),
nothing for an INT32 output, scale and bias for a float output.

DirectML: ``Output = Quantize(Dequantize(A) (x) Dequantize(B), OutputScale, OutputZeroPoint)``,
i.e. ``round(acc * AScale * BScale / OutputScale) + OutputZeroPoint`` with ``acc`` the product's
exact sums of ``(a - za) * (b - zb)``. A subclass says what differs: how A is read (its
``operand``), the integer core (``accumulate``, on the session's engine: ``dml_ep.numerics.engines``), the
u8s8 correction of that core, the requantize parameters and how the result is laid out.
"""

from __future__ import annotations

import numpy as np

from ...core.enums import DML_TENSOR_FLAGS
from ..arithmetic import Arithmetic
from .parameters import checked_scale, read4d
from . import quantize


class PreparedQuantizedProduct:
    """What one quantized product desc needs at each run, worked out once per node, engine and
    arithmetic: its parameters (:meth:`prepare`), B as the engine's product when B is bound at
    initialization (OWNED_BY_DML), and the step after the integer core (:meth:`finish`). Engine products are shared by the
    node's arithmetics (``products``, its kernel state's).

    ``A_FIELD`` and ``B_FIELD`` name the desc's activation and weight tensors.
    """

    A_FIELD: str
    B_FIELD: str
    # Whether the engine's GEMM is onnxruntime's own (A, B and the order of K as its kernel has
    # them), so that a saturating engine product gives its saturated sums (see ``native_saturation``).
    ONNXRUNTIME_GEMM: bool = True

    def __init__(self, desc, tensors: dict, arithmetic, engine, products: dict):
        self.desc, self.engine, self.products = desc, engine, products
        self.initialized = frozenset(tensors)  # the fields bound at initialization: the others come with each run
        self.constant = bool(getattr(desc, self.B_FIELD).Flags & DML_TENSOR_FLAGS.OWNED_BY_DML)
        self.saturates_u8s8 = self.saturates(arithmetic, tensors)
        # onnxruntime's saturated sums straight from the engine (the host's own kernel, no correction
        # pass): where the sums saturate, the engine's onnxruntime saturates too and the GEMM is its own
        self.native_saturation = self.saturates_u8s8 and self.ONNXRUNTIME_GEMM and engine.saturates_u8s8
        self.prepare(tensors)
        self.prepare_finish(tensors, arithmetic)

    def saturates(self, arithmetic, tensors: dict) -> bool:
        """Whether onnxruntime's int16 saturation of uint8 x int8 pairs applies to these sums
        (``tensors``: those bound at initialization)."""
        return arithmetic.saturates_u8s8(*self.onnxruntime_operands(self.desc))

    @classmethod
    def onnxruntime_operands(cls, desc) -> tuple:
        """The tensor descs onnxruntime's GEMM takes as its A and B (uint8 x int8 may saturate)."""
        return getattr(desc, cls.A_FIELD), getattr(desc, cls.B_FIELD)

    @property
    def corrects_u8s8(self) -> bool:
        """Whether the exact sums get ``kernels/u8s8.py``'s correction (saturation the engine does not make)."""
        return self.saturates_u8s8 and not self.native_saturation

    @classmethod
    def integer_core(cls, desc, tensors: dict, engine) -> np.ndarray:
        """The exact integer sums alone (compare's ideal values), prepared for this call only."""
        return cls(desc, tensors, Arithmetic("directml"), engine, {}).accumulate(tensors)

    def product(self, b: np.ndarray, b_zero_point, rows=None, key=()):
        """The engine's product for B, made once per ``key`` (a B bound at run time is fed to it at
        each run)."""
        key = self.product_key(*key)
        if key not in self.products:
            self.products[key] = self.engine.product(np.ascontiguousarray(b), b_zero_point, self.constant, rows, self.native_saturation)
        return self.products[key]

    def product_key(self, *key) -> tuple:
        """An engine product's key in ``products``; ``key`` is what else tells products apart."""
        return ("product", self.engine.name, self.native_saturation, *key)

    def __call__(self, tensors: dict) -> np.ndarray:
        operand = self.operand(tensors)
        acc = self.accumulate(tensors, operand)
        if self.corrects_u8s8:
            acc = acc + self.u8s8_correction(tensors, operand)
        return self.output(self.finish(acc, tensors))

    # The step after the integer core: requantize, unless a subclass says otherwise.

    REQUANTIZE_FIELDS: tuple[str, ...] = ()  # the desc's A scale, B scale, output scale and zero point

    def prepare_finish(self, tensors: dict, arithmetic) -> None:
        """The once-per-node part of :meth:`finish`: the requantize step, from
        :meth:`requantize_parameters`; None when a scale or zero point comes with each run (one
        not among the buffers bound at initialization, ``tensors``)."""
        self.arithmetic = arithmetic
        runtime = any(self.bound_at_run_time(field) for field in self.REQUANTIZE_FIELDS)
        self.requantize = None if runtime else self._requantizer(tensors)

    def bound_at_run_time(self, field: str) -> bool:
        """Whether a tensor of the desc comes with each run (not bound at initialization)."""
        return getattr(self.desc, field, None) is not None and field not in self.initialized

    def _requantizer(self, tensors: dict) -> quantize.Requantizer:
        scale_a, scale_b, scale_out, zero_point = self.requantize_parameters(tensors)
        return quantize.Requantizer(scale_a, scale_b, scale_out, zero_point, self.desc.OutputTensor.DataType.numpy(), self.arithmetic,
                                    self.engine.compiled_kernels)

    def finish(self, acc: np.ndarray, tensors: dict) -> np.ndarray:
        """The output values from the integer core's sums (u8s8 correction included) and
        :meth:`bias_of`; ``tensors`` gives the parameters bound at run time, whose scales are checked
        as they come."""
        if self.requantize is not None:
            return self.requantize(acc, self.bias_of(tensors))
        for field in self.REQUANTIZE_FIELDS[:3]:
            checked_scale(read4d(tensors, self.desc, field), tensor=field)
        return self._requantizer(tensors)(acc, self.bias_of(tensors))

    def bias_of(self, tensors: dict) -> np.ndarray | None:
        """The int32 bias the requantize step adds to the sums along their last axis (None: none)."""
        return None

    # What a quantized product says for itself.

    def prepare(self, tensors: dict) -> None:
        """The once-per-node parameters; the engine's product when B is constant."""
        raise NotImplementedError

    def requantize_parameters(self, tensors: dict) -> tuple:
        """A's scale, B's scale, the output scale and zero point, broadcastable to ``accumulate``'s result."""
        raise NotImplementedError

    def operand(self, tensors: dict) -> np.ndarray:
        """This run's A as the integer core and the u8s8 correction read it."""
        raise NotImplementedError

    def accumulate(self, tensors: dict, operand: np.ndarray | None = None) -> np.ndarray:
        """The integer core: the exact sums, bias not included (int32, or float32 where that holds
        every sum exactly);
        ``operand``: this run's :meth:`operand`, where the caller has it."""
        raise NotImplementedError

    def u8s8_correction(self, tensors: dict, operand: np.ndarray) -> np.ndarray:
        """What onnxruntime's int16 saturation adds to the exact sums (``dml_ep.numerics.kernels.u8s8``)."""
        raise NotImplementedError

    def output(self, requantized: np.ndarray) -> np.ndarray:
        """The finished (requantized) values laid out as the output tensor's sizes."""
        raise NotImplementedError
