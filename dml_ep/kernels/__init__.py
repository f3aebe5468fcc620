"""Numpy kernels, one per DirectML operator.

Element-wise and activation kernels are ``kernel(desc, tensors, arithmetic, cache) -> array``. The
quantized products are classes prepared once per node, engine and arithmetic (their constant
parameters, the engine's product for their weights, the requantize step), then called with the
tensors of each run; their ``accumulate`` is the integer core alone. ``tensors`` maps the desc's
tensor field names to raw buffers, read through the desc's sizes and strides; ``engine`` computes
the quantized products' exact integer sums (``dml_ep.engines``); ``cache`` is the node's own dict.
"""

from __future__ import annotations

from .. import operator_descs as od
from .activation import activation
from .convolution import PreparedConvolution
from .elementwise import element_wise_add1, quantized_linear_add
from .matrix_multiply import PreparedMatrixMultiply

KERNELS = {
    od.DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC: quantized_linear_add,
    od.DML_ELEMENT_WISE_ADD1_OPERATOR_DESC: element_wise_add1,
    **{cls: activation for cls in od.FUSABLE_ACTIVATIONS},
}
PREPARED = {
    od.DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC: PreparedConvolution,
    od.DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC: PreparedMatrixMultiply,
}


def prepared(desc, tensors: dict, arithmetic, engine, cache: dict):
    """The node's prepared quantized product for this engine and arithmetic, made once (from the
    buffers bound at initialization, which ``tensors`` must hold)."""
    key = ("prepared", engine.name, arithmetic)
    if key not in cache:
        cache[key] = PREPARED[type(desc)](desc, tensors, arithmetic, engine, cache)
    return cache[key]


def run_kernel(desc, tensors: dict, arithmetic, engine, cache: dict):
    """Execute one desc on its input buffers."""
    if type(desc) in PREPARED:
        return prepared(desc, tensors, arithmetic, engine, cache)(tensors)
    return KERNELS[type(desc)](desc, tensors, arithmetic, cache)


def prepare_kernel(desc, constants: dict, arithmetic, engine, cache: dict) -> None:
    """Do a kernel's once-per-node work before its first run, from the buffers bound at
    initialization (``constants``)."""
    if type(desc) in PREPARED:
        prepared(desc, constants, arithmetic, engine, cache)


def integer_core(desc, tensors: dict, engine):
    """A quantized product's exact integer sums alone (compare's ideal values): convolutions
    channels last, [N, OH, OW, OC]; matrix multiplies [batch, channel, M, N]."""
    from ..arithmetic import Arithmetic  # arithmetic's probe imports the kernels

    return prepared(desc, tensors, Arithmetic("directml"), engine, {}).accumulate(tensors)
