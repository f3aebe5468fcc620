"""The kernel dispatch: each desc runs on its operator's kernel, as the operator table names it
(``dml_ep.operators.registration.OPERATORS``).

Element-wise and activation kernels are ``kernel(desc, tensors, arithmetic, state) -> array``; the
engine picks an operator's compiled kernel or its numpy twin. The
quantized products are classes prepared once per node, engine and arithmetic (their constant
parameters, the engine's product for their weights, the requantize step), then called with the
tensors of each run; their ``accumulate`` is the integer core alone. ``tensors`` maps the desc's
tensor field names to raw buffers, read through the desc's sizes and strides; ``engine`` computes
the quantized products' exact integer sums (``dml_ep.numerics.engines``); ``state`` is what the
kernel keeps between runs (:class:`dml_ep.operators.kernel_state.KernelState`).
"""

from __future__ import annotations

from ..numerics.kernels.quantized_product import PreparedQuantizedProduct
from .kernel_state import KernelState
from .registration import operator_of


def product_class(desc) -> type[PreparedQuantizedProduct]:
    """The prepared class of a quantized product's desc."""
    product = operator_of(desc).prepared
    assert product is not None, f"{desc.OPERATOR_TYPE} has a kernel, not a prepared product"
    return product


def prepared(desc, tensors: dict, arithmetic, engine, state: KernelState):
    """The node's prepared quantized product for this engine and arithmetic, made once (from the
    buffers bound at initialization, which ``tensors`` must hold)."""
    key = (engine.name, arithmetic)
    made = state.prepared.get(key)
    if made is None:
        made = state.prepared[key] = product_class(desc)(desc, tensors, arithmetic, engine, state.products)
    return made


def run_kernel(desc, tensors: dict, arithmetic, engine, state: KernelState, constants: dict | None = None):
    """Execute one desc on its input buffers. A quantized product is prepared, the first time,
    from ``constants``, the buffers bound at initialization (default: all of ``tensors``, for a
    desc run once): what is bound at execution comes with each run."""
    operator = operator_of(desc)
    if operator.prepared is not None:
        return prepared(desc, tensors if constants is None else constants, arithmetic, engine, state)(tensors)
    kernel = operator.compiled_kernel if engine.compiled_kernels and operator.compiled_kernel else operator.kernel
    assert kernel is not None, "every operator has a kernel or a prepared product"
    return kernel(desc, tensors, arithmetic, state)


def prepare_kernel(desc, arithmetic, engine, state: KernelState) -> None:
    """Do a kernel's once-per-node work before its first run, from the buffers bound at
    initialization (``state.constants``)."""
    if operator_of(desc).prepared is not None:
        prepared(desc, state.constants, arithmetic, engine, state)


def integer_core(desc, tensors: dict, engine):
    """A quantized product's exact integer sums alone: convolutions channels last, [N, OH, OW, OC];
    matrix multiplies [batch, channel, M, N]."""
    return product_class(desc).integer_core(desc, tensors, engine)
