"""The operator table: which ONNX nodes dml_ep maps to which DirectML operator, and what dml_ep
knows of each DirectML operator.

- :data:`REGISTRATIONS`: one row per ONNX op, as onnxruntime's ``OperatorRegistration.cpp`` keeps
  them (domain, op type, since-versions, type constraints, required constant CPU inputs, support
  query), naming the importer and the DirectML operator module. A node is matched by its schema's
  since-version, exactly, as the real EP matches its kernels (``kernel_registry.cc``
  ``VerifyVersion``): a row for Add 7, 13, 14 takes an Add of opset 12 (since-version 7) and not
  one of opset 6.
- :data:`GRAPHS`: one row per ONNX op the DML EP builds as a small DirectML graph
  (:class:`~dml_ep.operators.dml_graph.DmlGraph`): the planner splits such a node into its parts,
  each a node of a row above; compare runs them as one.
- :data:`OPERATORS`: by ``DML_OPERATOR_TYPE``, the :class:`~dml_ep.operators.base.Operator` entry
  of each DirectML operator its rows' modules declare (desc class, kernel, exact value, layout,
  whether exact for any input). The importer, the kernel dispatch (``dispatch.py``), DxDispatch's
  desc table, compare's causes and the executor's layout read it.

Adding a DirectML operator is one module in this package (desc, support tables, importer, kernel,
exact value, its ``OPERATORS``) and a row here per ONNX op it imports; a DirectML graph is one
module (its ``parts``) and a row in :data:`GRAPHS`.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Callable, Optional

import numpy as np
import onnx

from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.graph import op_domain
from ..passes.editable import Origin
from ..realep.kernel_registry import since_version
from ..realep.placement import ON_CPU
from . import (activation, convolution, convolution_integer, dequantize, dynamic_quantize_linear, element_wise_add1, element_wise_arithmetic,
               element_wise_dequantize_linear, element_wise_identity, element_wise_quantize_linear, element_wise_quantized_linear_add,
               element_wise_sqrt, gather, gemm, join, matrix_multiply_integer, matrix_multiply_integer_to_float, max_pooling, quantize, quantized_linear_average_pooling,
               quantized_linear_convolution, quantized_linear_matrix_multiply, slice1)
from .base import FLOAT32, FLOATS, INT32, QUANTIZED, Operator
from .dml_graph import DmlGraph
from .graphs import dynamic_quantize_matmul, matmul_nbits, qlinear_concat, qlinear_sigmoid
from .importing import Fallback, NodeContext
from .nodes import DmlNode

# The DML EP's type masks (OperatorRegistration.cpp's SupportedTensorDataTypes names).
INTS_8_TO_64 = frozenset({DT.INT8, DT.UINT8, DT.INT16, DT.UINT16, DT.INT32, DT.UINT32, DT.INT64, DT.UINT64})
FLOAT16_TO_32 = FLOATS
ALL_SCALARS = element_wise_identity.ALL_TYPES  # the real EP's also has bool, which DirectML reads as UINT8
INT32_64 = frozenset({DT.INT32, DT.INT64})
EIGHT_BIT = element_wise_identity.EIGHT_BIT
INT8_ONLY = frozenset({np.dtype(np.int8)})  # of Relu


@dataclasses.dataclass(frozen=True)
class Registration:
    """One ONNX op as dml_ep registers it.

    - ``versions``: the since-versions dml_ep maps (the real EP's, except where a row says).
    - ``types``: the real EP's type constraints, constraint name -> DirectML data types; an
      importer may take fewer, and its fallback says why.
    - ``constant_cpu_inputs``: input indices that must be constant initializers (the real EP's
      requiredConstantCpuInputs).
    - ``input_types``: the element types of input 0 dml_ep models (None: what the importer takes);
      a node of another type falls back whatever its shapes, so it joins a CPU partition.
    - ``by_version``: since-versions the real EP builds as another DirectML operator, each with its
      importer and operator module (Q/DQ-21's QUANTIZE and DEQUANTIZE).
    - ``support_query``: ``query(ctx)`` raising :class:`~dml_ep.operators.importing.Fallback` for a
      node the row does not take, or None.
    - ``importer``: ``importer(ctx) -> DmlNode``; ``operator``: the DirectML operator module.
    - ``float_product``: the float product the op is, as compare names it ("conv", "matmul"), where
      onnxruntime's CPU QDQ fusion makes an integer operator of DQs -> it -> Q (QLinearConv,
      QLinearMatMul, QGemm) that DirectML runs in float; ``weight_to_matmul_nbits``: where
      onnxruntime's DQMatMulToMatMulNBits (1.25+) makes a MatMulNBits of it with a DQ of a constant
      weight (input 1). Compare names the graph the reference ran instead by them.
    """

    domain: str
    op_type: str
    versions: tuple[int, ...]
    types: dict
    importer: Callable
    operator: ModuleType
    constant_cpu_inputs: tuple[int, ...] = ()
    support_query: Optional[Callable] = None
    by_version: dict = dataclasses.field(default_factory=dict)  # since-version -> (importer, operator module)
    input_types: Optional[frozenset] = None  # the numpy element types of input 0 dml_ep models, where it models fewer than the real EP
    float_product: Optional[str] = None
    weight_to_matmul_nbits: bool = False

    def import_node(self, ctx: NodeContext) -> DmlNode:
        """The node as its operator's desc: the since-version matched, required constant inputs
        and the support query checked, then the importer. Raises Fallback otherwise."""
        since = since_version(self.domain, self.op_type, ctx.opset)
        if since not in self.versions:
            raise Fallback(self._unmatched(since, ctx.opset), ON_CPU)
        for index in self.constant_cpu_inputs:
            if ctx.input_name(index) and ctx.input_name(index) not in ctx.constants:
                raise Fallback(f"input {index} {ctx.input_name(index)!r} is computed at run time (a required CPU input, which the "
                               "real EP reads from CPU memory)", "on DirectML in the real EP; dml_ep plans it from the value a run computes")
        if self.support_query is not None:
            self.support_query(ctx)
        importer, _ = self.by_version.get(since, (self.importer, self.operator))
        return importer(ctx)

    def _registered(self) -> str:
        return f"the DML EP registers {self.op_type} {', '.join(str(v) for v in sorted(self.versions))}"

    def _unmatched(self, since: int, opset: int) -> str:
        registered = self._registered()
        at = "" if since == opset else f" (its since-version at opset {opset})"
        return f"{self.op_type}-{since}{at} is not mapped; {registered}"


_conv = quantized_linear_convolution
_matmul = quantized_linear_matrix_multiply
_qladd = element_wise_quantized_linear_add
_add1 = element_wise_add1
_q, _dq, _dql = element_wise_quantize_linear, element_wise_dequantize_linear, dynamic_quantize_linear
_convint = convolution_integer
_identity = element_wise_identity
_act = activation
_pool = quantized_linear_average_pooling

_ROWS = (
    Registration("", "QLinearConv", (10,), {"T1": QUANTIZED, "T2": QUANTIZED, "T3": QUANTIZED, "T4": INT32}, _conv.qlinear_conv, _conv),
    Registration("", "QLinearMatMul", (10, 21), {"T1": QUANTIZED, "T2": QUANTIZED, "T3": QUANTIZED}, _matmul.qlinear_matmul, _matmul),
    Registration("", "MatMulInteger", (10,), {"T1": QUANTIZED, "T2": QUANTIZED, "T3": INT32}, matrix_multiply_integer.matmul_integer, matrix_multiply_integer),
    Registration("com.microsoft", "MatMulIntegerToFloat", (1,), {"T1": QUANTIZED, "T2": QUANTIZED, "T3": FLOAT16_TO_32},
                 matrix_multiply_integer_to_float.matmul_integer_to_float, matrix_multiply_integer_to_float),
    Registration("", "ConvInteger", (10,), {"T1": QUANTIZED, "T2": QUANTIZED, "T3": INT32}, _convint.conv_integer, _convint),
    Registration("com.microsoft", "QLinearAdd", (1,), {"T": QUANTIZED}, _qladd.qlinear_add, _qladd),
    Registration("com.microsoft", "QLinearAveragePool", (1,), {"T": QUANTIZED}, _pool.qlinear_average_pool, _pool),
    Registration("com.microsoft", "QLinearGlobalAveragePool", (1,), {"T": QUANTIZED}, _pool.qlinear_global_average_pool, _pool),
    Registration("", "Add", (7, 13, 14), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, _add1.add, _add1),
    Registration("", "Sub", (7, 13, 14), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, element_wise_arithmetic.sub, element_wise_arithmetic),
    Registration("", "Mul", (7, 13, 14), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, element_wise_arithmetic.mul, element_wise_arithmetic),
    Registration("", "Div", (7, 13, 14), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, element_wise_arithmetic.div, element_wise_arithmetic),
    Registration("", "Sqrt", (6, 13), {"T": FLOAT16_TO_32}, element_wise_sqrt.sqrt, element_wise_sqrt),
    # The real EP also registers Sum-6 (its "7") and runs 1 or 3+ inputs as a loop of adds; dml_ep
    # maps the two-input Sum, the one its fusion takes.
    Registration("", "Sum", (8, 13), {"T": FLOAT16_TO_32}, _add1.add, _add1, support_query=_add1.two_inputs),
    # QuantizeLinear / DequantizeLinear 21: the real EP's QUANTIZE / DEQUANTIZE (DmlOperatorQuantization21); 23 and later: no DML EP row.
    Registration("", "QuantizeLinear", (10, 13, 19, 21), {"T1": FLOAT16_TO_32 | INT32, "T2": QUANTIZED}, _q.quantize_linear, _q,
                 by_version={21: (quantize.quantize_linear_21, quantize)}),
    Registration("com.microsoft", "QuantizeLinear", (1,), {"T1": FLOAT16_TO_32 | INT32, "T2": QUANTIZED}, _q.quantize_linear, _q),
    Registration("", "DequantizeLinear", (10, 13, 19, 21), {"T1": QUANTIZED | INT32, "T2": FLOAT16_TO_32}, _dq.dequantize_linear, _dq,
                 by_version={21: (dequantize.dequantize_linear_21, dequantize)}),
    Registration("com.microsoft", "DequantizeLinear", (1,), {"T1": QUANTIZED | INT32, "T2": FLOAT16_TO_32}, _dq.dequantize_linear, _dq),
    # The real EP's MaxPool "7" row (float only) is MaxPool-1, the version in force at opset 7; it has
    # no MaxPool-22 row (a MaxPool-22 runs on the CPU there). dml_ep models int8/uint8.
    Registration("", "MaxPool", (1, 8, 10, 11, 12), {"T": FLOAT16_TO_32 | QUANTIZED, "I": frozenset({DT.INT64})},
                 max_pooling.max_pool, max_pooling, support_query=max_pooling.storage_order, input_types=EIGHT_BIT),
    # Relu "7" (Relu-6, in force at opset 7) and 13 are float only; 14 adds int8, int16, int32 (no
    # uint8). dml_ep models int8.
    Registration("", "Relu", (6, 13, 14), {"T": FLOAT16_TO_32 | frozenset({DT.INT8, DT.INT16, DT.INT32})}, _act.relu, _act, input_types=INT8_ONLY),
    # The DML EP's graph DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID -> QUANTIZE_LINEAR (GRAPHS below splits the node into
    # those); this row answers for a node it does not split (the support query's, or why not).
    Registration("com.microsoft", "QLinearSigmoid", (1,), {"T": QUANTIZED}, qlinear_sigmoid.unsplit, qlinear_sigmoid,
                 support_query=qlinear_sigmoid.both_zero_points),
    Registration("", "DynamicQuantizeLinear", (11,), {"T1": FLOAT32, "T2": QUANTIZED}, _dql.dynamic_quantize_linear, _dql),
    # Data movement (the real EP's rows "7" are the since-versions in force at opset 7: Transpose-1, Concat-4, Reshape-5, ...);
    # dml_ep models int8 and uint8 tensors (each importer says so for the others).
    Registration("", "Transpose", (1, 13, 21), {"T": ALL_SCALARS}, _identity.transpose, _identity, input_types=EIGHT_BIT),
    Registration("", "Identity", (1, 13, 14, 16, 19, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, input_types=EIGHT_BIT),
    Registration("", "Flatten", (1, 9, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, input_types=EIGHT_BIT),
    Registration("", "Squeeze", (1, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,), input_types=EIGHT_BIT),
    Registration("", "Unsqueeze", (1, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,), input_types=EIGHT_BIT),
    Registration("", "Reshape", (5, 13, 14, 19, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,), input_types=EIGHT_BIT),
    Registration("", "Concat", (4, 11, 13), {"T": ALL_SCALARS}, join.concat, join, input_types=EIGHT_BIT),
    Registration("", "Slice", (1, 10, 11, 13), {"T": ALL_SCALARS, "Tind": INT32_64}, slice1.slice_, slice1, constant_cpu_inputs=(1, 2, 3, 4),
                 input_types=EIGHT_BIT),
    Registration("", "Gather", (1, 11, 13), {"T": ALL_SCALARS, "Tind": INT32_64}, gather.gather, gather, input_types=EIGHT_BIT),
    # Internal: made by the DML EP's activation fusion (passes/dml_fusion.py).
    Registration("com.microsoft.dml", "DmlFusedAdd", (1,), {"T": FLOAT16_TO_32}, _add1.fused_add, _add1),
    Registration("com.microsoft.dml", "DmlFusedSum", (1,), {"T": FLOAT16_TO_32}, _add1.fused_add, _add1, support_query=_add1.two_inputs),
    # Internal: the JOIN of QLinearConcat's DirectML graph (GRAPHS).
    Registration("com.microsoft.dml", "DmlJoin", (1,), {"T": FLOAT32}, join.float_join, join),
    # Internal: the first of the two DirectML operators the DML EP builds for DynamicQuantizeMatMul (GRAPHS).
    Registration("com.microsoft.dml", "DmlDynamicQuantizeLinear", (1,), {"T1": FLOAT32, "T2": QUANTIZED}, _dql.dynamic_quantize_linear, _dql),
    # Float convolutions: CONVOLUTION (DmlOperatorConvolution), forward and backward, and the DML EP's activation fusion of each.
    Registration("", "Conv", (1, 11), {"T": FLOAT16_TO_32}, convolution.conv, convolution, float_product="conv"),
    Registration("", "ConvTranspose", (1, 11), {"T": FLOAT16_TO_32}, convolution.conv_transpose, convolution, float_product="conv transpose"),
    Registration("com.microsoft.dml", "DmlFusedConv", (1,), {"T": FLOAT16_TO_32}, convolution.conv, convolution, float_product="conv"),
    Registration("com.microsoft.dml", "DmlFusedConvTranspose", (1,), {"T": FLOAT16_TO_32}, convolution.conv_transpose, convolution,
                 float_product="conv transpose"),
    # Float products: GEMM (DmlOperatorMatMul, DmlOperatorFusedMatMul, DmlOperatorGemm).
    Registration("", "MatMul", (1, 9, 13), {"T": FLOAT16_TO_32}, gemm.matmul, gemm, float_product="matmul", weight_to_matmul_nbits=True),
    Registration("com.microsoft", "FusedMatMul", (1,), {"T": FLOAT16_TO_32}, gemm.matmul, gemm),
    Registration("", "Gemm", (7, 9, 11, 13), {"T": FLOAT16_TO_32}, gemm.gemm, gemm, float_product="gemm", weight_to_matmul_nbits=True),
    # The DML EP's graph DEQUANTIZE -> GEMM (GRAPHS below splits the node into those); this row answers for a node it does not split.
    Registration("com.microsoft", "MatMulNBits", (1,), {"T1": FLOAT16_TO_32, "T2": frozenset({DT.UINT8})}, matmul_nbits.unsplit, matmul_nbits),
    # Internal: the two DirectML operators the DML EP builds for MatMulNBits (GRAPHS).
    Registration("com.microsoft.dml", "DmlDequantize", (1,), {"T1": frozenset({DT.UINT8}), "T2": FLOAT16_TO_32},
                 dequantize.matmul_nbits_weight, dequantize),
    Registration("com.microsoft.dml", "DmlGemm", (1,), {"T": FLOAT16_TO_32}, gemm.matmul_nbits_product, gemm),
    # Internal: the middle of the three DirectML operators the DML EP builds for QLinearSigmoid (GRAPHS).
    # ai.onnx Sigmoid is not registered: a float Sigmoid a model brings runs on DirectML in the real EP, not modelled.
    Registration("com.microsoft.dml", "DmlSigmoid", (1,), {"T": FLOAT32}, _act.sigmoid, _act),
)

REGISTRATIONS: dict = {(row.domain, row.op_type): row for row in _ROWS}

MODULES = dict.fromkeys([*(row.operator for row in _ROWS), *(module for row in _ROWS for _, module in row.by_version.values())])
OPERATORS: dict = {entry.desc.OPERATOR_TYPE: entry for module in MODULES for entry in module.OPERATORS}


def operator_of(desc) -> Operator:
    """The table entry of a desc's DirectML operator."""
    return OPERATORS[desc.OPERATOR_TYPE]


def row_of(node: onnx.NodeProto) -> Registration | None:
    """The row of an ONNX node's op (its domain ``ai.onnx`` or ""), or None."""
    return REGISTRATIONS.get((op_domain(node.domain), node.op_type))


GRAPHS = (
    DmlGraph("com.microsoft", "DynamicQuantizeMatMul", dynamic_quantize_matmul.RULE, dynamic_quantize_matmul.DIRECTML_OPERATORS,
             dynamic_quantize_matmul.parts),
    DmlGraph("com.microsoft", "QLinearSigmoid", qlinear_sigmoid.RULE, qlinear_sigmoid.DIRECTML_OPERATORS, qlinear_sigmoid.parts),
    DmlGraph("com.microsoft", "QLinearConcat", qlinear_concat.RULE, qlinear_concat.DIRECTML_OPERATORS, qlinear_concat.parts),
    DmlGraph("com.microsoft", "MatMulNBits", matmul_nbits.RULE, matmul_nbits.DIRECTML_OPERATORS, matmul_nbits.parts,
             exact_products=matmul_nbits.exact_products),
)
GRAPH_BY_RULE = {row.rule: row for row in GRAPHS}  # the rule of the parts a split makes: compare runs each group as one


def graph_of(origin: Origin) -> DmlGraph | None:
    """The DirectML graph whose split made the plan entries of ``origin``, or None."""
    return GRAPH_BY_RULE.get(origin.rules[-1]) if origin.rules else None
