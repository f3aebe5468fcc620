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
from ..realep.placement import ON_CPU, PLANNED_WHEN_RUN
from . import (activation, activation_softmax, cast, convolution, convolution_integer, dequantize, dynamic_quantize_linear, element_wise_add1,
               element_wise_arithmetic, element_wise_clip, element_wise_dequantize_linear, element_wise_erf, element_wise_identity, element_wise_if,
               element_wise_is_nan, element_wise_logical, element_wise_min_max, element_wise_pow, element_wise_quantize_linear,
               element_wise_quantized_linear_add, element_wise_sqrt, element_wise_unary_math, fill_value_constant, fill_value_sequence, gather,
               gemm, join, matrix_multiply_integer, matrix_multiply_integer_to_float, max_pooling, multihead_attention, quantize, quantized_linear_average_pooling,
               quantized_linear_convolution, quantized_linear_matrix_multiply, reduce, slice1, split)
from . import mean_variance_normalization as _mvn
from .base import FLOAT32, FLOATS, INT32, QUANTIZED, Operator
from .dml_graph import DmlGraph
from .graphs import cast_to_bool, dynamic_quantize_matmul, matmul_nbits, qlinear_concat, qlinear_sigmoid, quick_gelu
from .graphs import rotary_embedding as _rope
from .graphs import skip_layer_normalization as _skip_ln
from .graphs import skip_simplified_layer_normalization as _skip_sln
from .importing import Fallback, NodeContext
from .nodes import DmlNode

# The DML EP's type masks (OperatorRegistration.cpp's SupportedTensorDataTypes names).
INTS_8_TO_64 = frozenset({DT.INT8, DT.UINT8, DT.INT16, DT.UINT16, DT.INT32, DT.UINT32, DT.INT64, DT.UINT64})
FLOAT16_TO_32 = FLOATS
ALL_SCALARS = element_wise_identity.ALL_TYPES  # the real EP's also has bool, which DirectML reads as UINT8
INT32_64 = frozenset({DT.INT32, DT.INT64})
EIGHT_BIT = element_wise_identity.EIGHT_BIT
RELU_TYPES = frozenset({np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int8)})  # of Relu
_INTS_32_64 = frozenset({DT.INT32, DT.UINT32, DT.INT64, DT.UINT64})  # of ReduceSum, ReduceMean-18
_DOUBLE = frozenset({DT.FLOAT64})  # ReduceMax/Min-20 (their bool reads as UINT8)
_SIGNED = frozenset({DT.INT8, DT.INT16, DT.INT32, DT.INT64})  # of Abs, Neg
_UNSIGNED_8_TO_32 = frozenset({DT.UINT8, DT.UINT16, DT.UINT32})  # of Pow's exponent


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
    unbound_inputs: tuple[int, ...] = ()  # inputs the real EP's kernel never binds to DirectML: empty, they do not stop it

    def import_node(self, ctx: NodeContext) -> DmlNode:
        """The node as its operator's desc: the since-version matched, required constant inputs
        and the support query checked, then the importer. Raises Fallback otherwise."""
        since = since_version(self.domain, self.op_type, ctx.opset)
        if since not in self.versions:
            raise Fallback(self._unmatched(since, ctx.opset), ON_CPU)
        for index in self.constant_cpu_inputs:
            if ctx.input_name(index) and ctx.input_name(index) not in ctx.constants:
                raise Fallback(f"input {index} {ctx.input_name(index)!r} is computed at run time (a required CPU input, which the "
                               "real EP reads from CPU memory)", PLANNED_WHEN_RUN)
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
_logical = element_wise_logical
_act = activation
_pool = quantized_linear_average_pooling
_unary = element_wise_unary_math
_min_max = element_wise_min_max

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
    # uint8). dml_ep models float and int8.
    Registration("", "Relu", (6, 13, 14), {"T": FLOAT16_TO_32 | frozenset({DT.INT8, DT.INT16, DT.INT32})}, _act.relu, _act, input_types=RELU_TYPES),
    # The float activations (DmlOperatorActivation.cpp, DmlOperatorElementWise.cpp); the real EP's "7" rows are the
    # since-versions in force at opset 7 (Sigmoid-6, Tanh-6, LeakyRelu-6).
    Registration("", "Sigmoid", (6, 13), {"T": FLOAT16_TO_32}, _act.float_sigmoid, _act),
    Registration("", "Tanh", (6, 13), {"T": FLOAT16_TO_32}, _act.tanh, _act),
    Registration("", "LeakyRelu", (6, 16), {"T": FLOAT16_TO_32}, _act.leaky_relu, _act),
    Registration("com.microsoft", "Gelu", (1,), {"T": FLOAT16_TO_32}, _act.gelu, _act),
    Registration("", "Erf", (9, 13), {"T": FLOAT16_TO_32}, element_wise_erf.erf, element_wise_erf),
    # DmlOperatorBiasGelu: ELEMENT_WISE_ADD1 with a fused (exact) GELU; a FastGelu without a bias is a standalone ACTIVATION_GELU.
    Registration("com.microsoft", "BiasGelu", (1,), {"T": FLOAT16_TO_32}, _add1.bias_gelu, _add1),
    Registration("com.microsoft", "FastGelu", (1,), {"T": FLOAT16_TO_32}, _add1.bias_gelu, _add1),
    # The DML EP's graph [IDENTITY with ScaleBias alpha] -> ACTIVATION_SIGMOID -> MULTIPLY (GRAPHS splits the node into those);
    # this row answers for a node it does not split. DmlScale is its first part.
    Registration("com.microsoft", "QuickGelu", (1,), {"T": FLOAT16_TO_32}, quick_gelu.unsplit, quick_gelu),
    Registration("com.microsoft.dml", "DmlScale", (1,), {"T": FLOAT16_TO_32}, _identity.scale, _identity),
    # The remaining float element-wise math of encoders and LLMs (DmlOperatorElementWise.cpp, DmlOperatorNeg.cpp); the real
    # EP's "7" rows are the since-versions in force at opset 7 (Exp-6, Max-6, Clip-6, ...). dml_ep models float tensors.
    Registration("", "Exp", (6, 13), {"T": FLOAT16_TO_32}, _unary.exp, _unary),
    Registration("", "Log", (6, 13), {"T": FLOAT16_TO_32}, _unary.log, _unary),
    Registration("", "Abs", (6, 13), {"T": FLOAT16_TO_32 | _SIGNED}, _unary.abs_, _unary),
    Registration("", "Neg", (6, 13), {"T": FLOAT16_TO_32 | _SIGNED}, _unary.neg, _unary),
    Registration("", "Reciprocal", (6, 13), {"T": FLOAT16_TO_32}, _unary.reciprocal, _unary),
    Registration("", "Floor", (6, 13), {"T": FLOAT16_TO_32}, _unary.floor, _unary),
    Registration("", "Ceil", (6, 13), {"T": FLOAT16_TO_32}, _unary.ceil, _unary),
    # CONSTANT_POW for a one-element constant exponent, else POW (DmlOperatorElementwisePow).
    Registration("", "Pow", (7, 12, 13, 15), {"T": FLOAT16_TO_32 | INT32, "T1": FLOAT16_TO_32 | _SIGNED - {DT.INT64} | _UNSIGNED_8_TO_32},
                 element_wise_pow.pow_, element_wise_pow),
    # One input is IDENTITY, two MIN/MAX, as the real EP builds them; three or more are a loop of dispatches there (not modelled).
    Registration("", "Min", (6, 8, 12, 13), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, _min_max.min_, _min_max, support_query=_min_max.two_inputs),
    Registration("", "Max", (6, 8, 12, 13), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, _min_max.max_, _min_max, support_query=_min_max.two_inputs),
    # CLIP1 of the constant min and max inputs (11 to 13; 12 and 13 add the integers there), CLIP of Clip 6's attributes.
    Registration("", "Clip", (6, 11, 12, 13), {"T": FLOAT16_TO_32 | INTS_8_TO_64}, element_wise_clip.clip, element_wise_clip,
                 constant_cpu_inputs=(1, 2), by_version={6: (element_wise_clip.clip_6, activation)}),
    # IsNaN of BERT exports' masked attention scores, a bool output as UINT8.
    Registration("", "IsNaN", (9, 13, 20), {"T1": FLOAT16_TO_32, "T2": frozenset({DT.UINT8})}, element_wise_is_nan.is_nan, element_wise_is_nan),
    # The DML EP's graph DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID -> QUANTIZE_LINEAR (GRAPHS below splits the node into
    # those); this row answers for a node it does not split (the support query's, or why not).
    Registration("com.microsoft", "QLinearSigmoid", (1,), {"T": QUANTIZED}, qlinear_sigmoid.unsplit, qlinear_sigmoid,
                 support_query=qlinear_sigmoid.both_zero_points),
    Registration("", "DynamicQuantizeLinear", (11,), {"T1": FLOAT32, "T2": QUANTIZED}, _dql.dynamic_quantize_linear, _dql),
    # Data movement (the real EP's rows "7" are the since-versions in force at opset 7: Transpose-1, Concat-4, Reshape-5, ...);
    # every type of the real EP's rows (bool as UINT8).
    Registration("", "Transpose", (1, 13, 21), {"T": ALL_SCALARS}, _identity.transpose, _identity),
    Registration("", "Identity", (1, 13, 14, 16, 19, 21), {"T": ALL_SCALARS}, _identity.copy, _identity),
    Registration("", "Flatten", (1, 9, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity),
    Registration("", "Squeeze", (1, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,)),
    Registration("", "Unsqueeze", (1, 11, 13, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,)),
    Registration("", "Reshape", (5, 13, 14, 19, 21), {"T": ALL_SCALARS}, _identity.copy, _identity, constant_cpu_inputs=(1,)),
    Registration("", "Expand", (8, 13), {"T": ALL_SCALARS}, _identity.expand, _identity, constant_cpu_inputs=(1,)),
    Registration("", "Concat", (4, 11, 13), {"T": ALL_SCALARS}, join.concat, join),
    Registration("", "Slice", (1, 10, 11, 13), {"T": ALL_SCALARS, "Tind": INT32_64}, slice1.slice_, slice1, constant_cpu_inputs=(1, 2, 3, 4)),
    Registration("", "Gather", (1, 11, 13), {"T": ALL_SCALARS, "Tind": INT32_64}, gather.gather, gather),
    # Where, Cast and the comparisons of LLMs' masks and positions (bool as UINT8). A Cast to bool is the graph CAST -> CLIP1
    # (GRAPHS splits it; DmlClipToBool is its second part); the Cast row answers for one it does not split. A CastLike reaches
    # the planner as a Cast: onnxruntime's CPU session inlines it, having no CastLike kernel.
    Registration("", "Where", (9, 16), {"B": frozenset({DT.UINT8}), "T": ALL_SCALARS}, element_wise_if.where, element_wise_if),
    Registration("", "Cast", (6, 9, 13, 19, 21), {"T1": ALL_SCALARS, "T2": ALL_SCALARS}, cast.cast, cast),
    Registration("", "CastLike", (15, 19, 21), {"T1": ALL_SCALARS, "T2": ALL_SCALARS}, cast.cast, cast),
    Registration("com.microsoft.dml", cast_to_bool.CLIP_TO_BOOL, (1,), {"T": frozenset({DT.UINT8})}, element_wise_clip.clip_to_bool, element_wise_clip),
    Registration("", "Equal", (7, 11, 13, 19), {"T": FLOAT16_TO_32 | INTS_8_TO_64, "T1": frozenset({DT.UINT8})}, _logical.equal, _logical),
    Registration("", "Greater", (7, 9, 13), {"T": FLOAT16_TO_32 | INTS_8_TO_64, "T1": frozenset({DT.UINT8})}, _logical.greater, _logical),
    Registration("", "Less", (7, 9, 13), {"T": FLOAT16_TO_32 | INTS_8_TO_64, "T1": frozenset({DT.UINT8})}, _logical.less, _logical),
    Registration("", "GreaterOrEqual", (12, 16), {"T": FLOAT16_TO_32 | INTS_8_TO_64, "T1": frozenset({DT.UINT8})}, _logical.greater_or_equal,
                 _logical),
    Registration("", "LessOrEqual", (12, 16), {"T": FLOAT16_TO_32 | INTS_8_TO_64, "T1": frozenset({DT.UINT8})}, _logical.less_or_equal, _logical),
    Registration("", "Not", (1,), {"T": frozenset({DT.UINT8})}, _logical.not_, _logical),
    Registration("", "And", (7,), {"T": frozenset({DT.UINT8})}, _logical.and_, _logical),
    Registration("", "Or", (7,), {"T": frozenset({DT.UINT8})}, _logical.or_, _logical),
    Registration("", "Xor", (7,), {"T": frozenset({DT.UINT8})}, _logical.xor, _logical),
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
    Registration("com.microsoft.dml", "DmlSigmoid", (1,), {"T": FLOAT32}, _act.sigmoid, _act),
    # MULTIHEAD_ATTENTION1 with the real EP's float16 CASTs and FILL_VALUE_CONSTANT inside (DmlOperatorGroupQueryAttention);
    # total_sequence_length is a required CPU input (a run-time value is planned when run); the past is never bound
    # (ExecuteOperator's empty-tensor skip looks at bound tensors only), so an empty cache still runs on DirectML.
    Registration("com.microsoft", "GroupQueryAttention", (1,), {"T": FLOAT16_TO_32, "M": INT32}, multihead_attention.group_query_attention,
                 multihead_attention, constant_cpu_inputs=(6,), unbound_inputs=(3, 4)),
    # MULTIHEAD_ATTENTION (DmlOperatorMultiHeadAttention): dml_ep models the separate Q/K/V form.
    Registration("com.microsoft", "MultiHeadAttention", (1,), {"T": FLOAT16_TO_32, "M": INT32}, multihead_attention.multi_head_attention,
                 multihead_attention),
    # MEAN_VARIANCE_NORMALIZATION2 (DmlOperatorLayerNormalization): LayerNormalization 17 and onnxruntime's ai.onnx
    # LayerNormalization 1 (T, V float16/float32), SimplifiedLayerNormalization 1; QueryLayerNormalization: one output.
    Registration("", "LayerNormalization", (1, 17), {"T": FLOAT16_TO_32, "U": FLOAT16_TO_32, "V": FLOAT16_TO_32}, _mvn.layer_normalization, _mvn,
                 support_query=_mvn.one_output),
    Registration("", "SimplifiedLayerNormalization", (1,), {"T": FLOAT16_TO_32, "U": FLOAT16_TO_32, "V": FLOAT16_TO_32},
                 _mvn.layer_normalization, _mvn, support_query=_mvn.one_output),
    # Internal: the normalization of SkipLayerNormalization's DirectML graph (GRAPHS).
    Registration("com.microsoft.dml", "DmlMeanVarianceNormalization", (1,), {"T": FLOAT16_TO_32}, _mvn.graph_normalization, _mvn),
    # The DML EP's graph ELEMENT_WISE_ADD -> [ADD] -> MEAN_VARIANCE_NORMALIZATION2 (GRAPHS below splits the node into those);
    # these rows answer for a node it does not split.
    Registration("com.microsoft", "SkipLayerNormalization", (1,), {"T": FLOAT16_TO_32}, _skip_ln.unsplit, _skip_ln),
    Registration("com.microsoft", "SkipSimplifiedLayerNormalization", (1,), {"T": FLOAT16_TO_32}, _skip_ln.unsplit, _skip_ln),
    # ACTIVATION_SOFTMAX1 (DmlOperatorActivation): Softmax 1 and 11 over the flattened [axis..], 13 over one axis.
    Registration("", "Softmax", (1, 11, 13), {"T": FLOAT16_TO_32}, activation_softmax.softmax, activation_softmax),
    # REDUCE (DmlOperatorReduce): axes an attribute, then (ReduceSum-13, the others' 18) a required CPU input.
    Registration("", "ReduceSum", (1, 11, 13), {"T": FLOAT16_TO_32 | _INTS_32_64}, reduce.reduce_sum, reduce, constant_cpu_inputs=(1,)),
    Registration("", "ReduceMean", (1, 11, 13, 18), {"T": FLOAT16_TO_32 | _INTS_32_64}, reduce.reduce_mean, reduce, constant_cpu_inputs=(1,)),
    Registration("", "ReduceMax", (1, 11, 12, 13, 18, 20), {"T": FLOAT16_TO_32 | INTS_8_TO_64 | _DOUBLE}, reduce.reduce_max, reduce,
                 constant_cpu_inputs=(1,)),
    Registration("", "ReduceMin", (1, 11, 12, 13, 18, 20), {"T": FLOAT16_TO_32 | INTS_8_TO_64 | _DOUBLE}, reduce.reduce_min, reduce,
                 constant_cpu_inputs=(1,)),
    # The DML EP's graph of SPLIT, IDENTITY, JOIN, FILL_VALUE_SEQUENCE, ADD, GATHER, MULTIPLY (GRAPHS below splits the node
    # into those); this row answers for a node it does not split.
    Registration("com.microsoft", "RotaryEmbedding", (1,), {"T": FLOAT16_TO_32, "M": frozenset({DT.INT64})}, _rope.unsplit, _rope),
    # Internal: RotaryEmbedding's parts (GRAPHS) other than its JOIN of the swapped halves (Concat) and MULTIPLYs (Mul).
    Registration("com.microsoft.dml", "DmlSplit", (1,), {"T": FLOAT16_TO_32}, split.split_node, split),
    Registration("com.microsoft.dml", "DmlRotaryCopy", (1,), {"T": FLOAT16_TO_32}, _identity.rotary_copy, _identity),
    Registration("com.microsoft.dml", "DmlRotaryRange", (1,), {"T": FLOAT16_TO_32}, fill_value_sequence.positions, fill_value_sequence),
    Registration("com.microsoft.dml", "DmlRotaryPositions", (1,), {"T": frozenset({DT.INT64})}, element_wise_arithmetic.offset_positions,
                 element_wise_arithmetic),
    Registration("com.microsoft.dml", "DmlRotaryCache", (1,), {"T": FLOAT16_TO_32, "Tind": frozenset({DT.INT64})}, gather.cache_rows, gather),
    Registration("com.microsoft.dml", "DmlRotarySigns", (1,), {"T": FLOAT16_TO_32}, fill_value_sequence.signs, fill_value_sequence),
    Registration("com.microsoft.dml", "DmlRotaryAdd", (1,), {"T": FLOAT16_TO_32}, element_wise_arithmetic.rotary_add, element_wise_arithmetic),
    Registration("com.microsoft.dml", "DmlRotaryJoin", (1,), {"T": FLOAT16_TO_32}, join.rotary_join, join),
    # FILL_VALUE_SEQUENCE (DmlOperatorRange): start, limit, delta read on the CPU.
    Registration("", "Range", (11,), {"T": frozenset({DT.INT16, DT.INT32, DT.INT64, DT.FLOAT32})}, fill_value_sequence.range_, fill_value_sequence,
                 constant_cpu_inputs=(0, 1, 2)),
    # FILL_VALUE_CONSTANT (DmlOperatorConstantOfShape): the shape read on the CPU, the value attribute's bytes.
    Registration("", "ConstantOfShape", (9, 21), {"T1": frozenset({DT.INT64}), "T2": ALL_SCALARS}, fill_value_constant.constant_of_shape,
                 fill_value_constant, constant_cpu_inputs=(0,), unbound_inputs=(0,)),
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
    DmlGraph("com.microsoft", "QuickGelu", quick_gelu.RULE, quick_gelu.DIRECTML_OPERATORS, quick_gelu.parts),
    DmlGraph("com.microsoft", "QLinearConcat", qlinear_concat.RULE, qlinear_concat.DIRECTML_OPERATORS, qlinear_concat.parts),
    DmlGraph("com.microsoft", "MatMulNBits", matmul_nbits.RULE, matmul_nbits.DIRECTML_OPERATORS, matmul_nbits.parts,
             exact_products=matmul_nbits.exact_products),
    DmlGraph("com.microsoft", "SkipLayerNormalization", _skip_ln.RULE, _skip_ln.DIRECTML_OPERATORS, _skip_ln.parts),
    DmlGraph("com.microsoft", "SkipSimplifiedLayerNormalization", _skip_sln.RULE, _skip_sln.DIRECTML_OPERATORS, _skip_sln.parts),
    DmlGraph("com.microsoft", "RotaryEmbedding", _rope.RULE, _rope.DIRECTML_OPERATORS, _rope.parts),
    DmlGraph("", "Cast", cast_to_bool.RULE, cast_to_bool.DIRECTML_OPERATORS, cast_to_bool.parts, differs=cast_to_bool.DIFFERS),
)
GRAPH_BY_RULE = {row.rule: row for row in GRAPHS}  # the rule of the parts a split makes: compare runs each group as one


def graph_of(origin: Origin) -> DmlGraph | None:
    """The DirectML graph whose split made the plan entries of ``origin``, or None."""
    return GRAPH_BY_RULE.get(origin.rules[-1]) if origin.rules else None
