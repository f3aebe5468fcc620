"""Numpy kernels, one per DirectML operator: ``kernel(desc, tensors, arithmetic, engine, cache) -> array``.

``tensors`` maps the desc's tensor field names to raw buffers, read through the desc's sizes and
strides; ``engine`` computes the quantized products' exact integer sums (``dml_ep.engines``);
``cache`` is the node's own dict, for work on weights bound at initialization (keyed by engine
where the work is the engine's).
"""

from __future__ import annotations

from .. import operator_descs as od
from .activation import activation
from . import convolution, matrix_multiply
from .convolution import quantized_linear_convolution
from .elementwise import element_wise_add1, quantized_linear_add
from .matrix_multiply import quantized_linear_matrix_multiply

KERNELS = {
    od.DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC: quantized_linear_convolution,
    od.DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC: quantized_linear_matrix_multiply,
    od.DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC: quantized_linear_add,
    od.DML_ELEMENT_WISE_ADD1_OPERATOR_DESC: element_wise_add1,
    **{cls: activation for cls in od.FUSABLE_ACTIVATIONS},
}


# Kernels with work to do once per node (engine sessions for their weights, multipliers).
PREPARE = {
    od.DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC: convolution.prepared,
    od.DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC: matrix_multiply.prepared,
}


def run_kernel(desc, tensors: dict, arithmetic, engine, cache: dict):
    """Execute one desc on its input buffers."""
    return KERNELS[type(desc)](desc, tensors, arithmetic, engine, cache)


def prepare_kernel(desc, constants: dict, arithmetic, engine, cache: dict) -> None:
    """Do a kernel's once-per-node work before its first run, from the buffers bound at
    initialization (``constants``)."""
    if type(desc) in PREPARE:
        PREPARE[type(desc)](desc, constants, arithmetic, engine, cache)
