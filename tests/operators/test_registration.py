"""The operator table is complete (``dml_ep.operators.registration``).

Every registration row names its since-versions, type constraints, an importer and a DirectML
operator module; every operator module declares, for each of its operators, a desc class, a kernel,
a DxDispatch export (its class in DxDispatch's desc table, and a desc that round-trips) and an
exact value or an explicit None, and is reached by a row. Rows match nodes by their schema's
since-version, exactly. The user guide's operator table (docs/guide.md) names what the rows register.
Compare, its causes, the reports and DxDispatch ask the rows and entries what an operator is: they
name no ONNX op type, so that a new operator is its module, its rows and its tests.
"""

import ast
import dataclasses
import enum
import importlib
import pkgutil
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import dml_ep
from dml_ep import operators
from dml_ep.core import enums, graph
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.interop.dxdispatch import descs as dxdispatch
from dml_ep.operators import activation, registration
from dml_ep.operators.base import Operator, OperatorDesc, field_kind
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.passes import Origin
from dml_ep.planning.importer import DEFAULT_FEATURE_LEVEL, NodeImporter, opset_versions

ROWS = list(registration.REGISTRATIONS.values())
PACKAGE_MODULES = [importlib.import_module(f"dml_ep.operators.{info.name}") for info in pkgutil.iter_modules(operators.__path__)]
MODULES = [module for module in PACKAGE_MODULES if isinstance(getattr(module, "OPERATORS", None), tuple) and module.OPERATORS]  # declaring DirectML operators
ENTRIES = [entry for module in MODULES for entry in module.OPERATORS]
# Rows of a DirectML graph: the planner splits the node into one plan node per DirectML operator
# (registration.GRAPHS); the row answers for a node it does not split.
GRAPH_ROWS = {(row.domain, row.op_type) for row in registration.GRAPHS} & set(registration.REGISTRATIONS)


def row_id(row) -> str:
    return f"{row.domain or 'ai.onnx'}::{row.op_type}"


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_registration_row_is_complete(row):
    assert registration.REGISTRATIONS[(row.domain, row.op_type)] is row
    assert row.versions and all(isinstance(v, int) and v >= 1 for v in row.versions), "since-versions"
    assert row.types and all(row.types.values()), "type constraints"
    assert all(isinstance(index, int) for index in row.constant_cpu_inputs)
    assert row.support_query is None or callable(row.support_query)
    assert callable(row.importer), "importer"
    assert row.operator in MODULES or (row.domain, row.op_type) in GRAPH_ROWS, "DirectML operator module"
    assert row.importer.__module__ == row.operator.__name__, "the importer lives in its operator's module"
    for domain in {row.domain, "ai.onnx" if row.domain == "" else row.domain}:
        assert registration.row_of(helper.make_node(row.op_type, [], [], domain=domain)) is row
    # a float product compare names: its operator sums products in float
    assert row.float_product is None or (isinstance(row.float_product, str) and row.float_product)
    assert row.float_product is None or all(entry.exact_float is not None for entry in row.operator.OPERATORS)
    assert not row.weight_to_matmul_nbits or row.float_product, "only a float product's weight makes a MatMulNBits"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_operator_module_is_complete(module):
    entries = getattr(module, "OPERATORS", ())
    assert entries, f"{module.__name__} declares no OPERATORS"
    for entry in entries:
        assert isinstance(entry, Operator)
        desc = entry.desc
        assert isinstance(desc, type) and issubclass(desc, OperatorDesc) and dataclasses.is_dataclass(desc), "desc class"
        assert desc.__module__ == module.__name__, "the desc lives in its operator's module"
        assert registration.OPERATORS[desc.OPERATOR_TYPE] is entry
        assert (entry.kernel is None) != (entry.prepared is None), "one kernel: a function or a prepared class"
        if entry.prepared is not None:
            assert callable(getattr(entry.prepared, "accumulate", None)), "a prepared kernel's integer core"
        else:
            assert callable(entry.kernel)
        assert dxdispatch.DESC_CLASSES.get(desc.OPERATOR_TYPE) is desc, "DxDispatch export"
        # an operator with an output scale quantizes: it has an exact value; the others say None
        # (or maps floats to codes through a scale: QUANTIZE_LINEAR, QUANTIZE)
        output_rule = next((rule for rule in desc.TENSOR_RULES if rule.field == "OutputTensor"), None)
        fields = {f.name for f in dataclasses.fields(desc)}
        codes = {DML_TENSOR_DATA_TYPE.INT8, DML_TENSOR_DATA_TYPE.UINT8, DML_TENSOR_DATA_TYPE.INT4, DML_TENSOR_DATA_TYPE.UINT4}
        quantizes = "OutputScaleTensor" in fields or (
            bool(fields & {"ScaleTensor", "QuantizationTensors"}) and output_rule is not None and output_rule.types <= codes)
        assert (entry.exact_value is not None) == quantizes, "exact value (or an explicit None)"
        assert entry.exact_value is None or callable(entry.exact_value)
    # every module is reached: by a row (or a since-version of one), or as activations fused into another operator
    assert module is activation or any(row.operator is module or module in {m for _, m in row.by_version.values()} for row in ROWS)


def test_operator_types_are_unique():
    assert len(ENTRIES) == len(registration.OPERATORS)


# --- one node per row, through the importer, and its desc through DxDispatch -----------------

U8 = np.uint8


def _parameters(zero_point_type=U8):
    return np.array(0.05, np.float32), np.array(3, zero_point_type)


NODES = {  # row -> (inputs as (name, array, constant)), attributes, output type
    ("", "QLinearConv"): ([("x", np.zeros((1, 2, 5, 5), U8), False), *zip(("xs", "xz"), _parameters(), (True, True)),
                           ("w", np.ones((3, 2, 3, 3), U8), True), *zip(("ws", "wz"), _parameters(), (True, True)),
                           *zip(("ys", "yz"), _parameters(), (True, True)), ("b", np.zeros(3, np.int32), True)], {}, U8),
    ("", "QLinearMatMul"): ([("a", np.zeros((2, 4), U8), False), *zip(("as", "az"), _parameters(), (True, True)),
                             ("b", np.ones((4, 3), U8), True), *zip(("bs", "bz"), _parameters(), (True, True)),
                             *zip(("ys", "yz"), _parameters(), (True, True))], {}, U8),
    ("", "MatMulInteger"): ([("a", np.zeros((2, 4), U8), False), ("b", np.ones((4, 3), np.int8), True),
                             ("az", np.array(3, U8), False), ("bz", np.array([1, 2, 3], np.int8), True)], {}, np.int32),
    ("com.microsoft", "MatMulIntegerToFloat"): ([("a", np.zeros((2, 4), U8), False), ("b", np.ones((4, 3), np.int8), True),
                                                 ("as", np.array(0.05, np.float32), False), ("bs", np.full(3, 0.5, np.float32), True),
                                                 ("az", np.array(3, U8), False), ("bz", np.array(1, np.int8), True),
                                                 ("bias", np.arange(3, dtype=np.float32), True)], {}, np.float32),
    ("", "ConvInteger"): ([("x", np.zeros((1, 2, 5, 5), U8), False), ("w", np.ones((3, 2, 3, 3), np.int8), True),
                          ("xz", np.array(3, U8), False), ("wz", np.array([1, 2, 3], np.int8), True)], {"pads": [1, 1, 1, 1]}, np.int32),
    ("com.microsoft", "QLinearAdd"): ([("a", np.zeros((2, 3), U8), False), *zip(("as", "az"), _parameters(), (True, True)),
                                       ("b", np.zeros(3, U8), False), *zip(("bs", "bz"), _parameters(), (True, True)),
                                       *zip(("ys", "yz"), _parameters(), (True, True))], {}, U8),
    ("com.microsoft", "QLinearAveragePool"): ([("x", np.zeros((1, 2, 5, 5), U8), False), *zip(("xs", "xz"), _parameters(), (True, True)),
                                               *zip(("ys", "yz"), _parameters(), (True, True))],
                                              {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, U8),
    ("com.microsoft", "QLinearGlobalAveragePool"): ([("x", np.zeros((1, 5, 5, 2), np.int8), False),
                                                     *zip(("xs", "xz"), _parameters(np.int8), (True, True)),
                                                     *zip(("ys", "yz"), _parameters(np.int8), (True, True))], {"channels_last": 1}, np.int8),
    ("", "Add"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros(3, np.float32), False)], {}, np.float32),
    ("", "Sum"): ([("a", np.zeros((2, 3), np.float16), False), ("b", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Sub"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros(3, np.float32), True)], {}, np.float32),
    ("", "Mul"): ([("a", np.zeros((2, 3), np.float16), False), ("b", np.zeros((2, 1), np.float16), False)], {}, np.float16),
    ("", "Div"): ([("a", np.zeros(3, np.float32), True), ("b", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Sqrt"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Conv"): ([("x", np.zeros((1, 4, 5, 5), np.float32), False), ("w", np.ones((6, 2, 3, 3), np.float32), True),
                   ("b", np.zeros(6, np.float32), True)], {"pads": [1, 0, 1, 2], "group": 2, "strides": [2, 1]}, np.float32),
    ("", "ConvTranspose"): ([("x", np.zeros((1, 2, 4), np.float16), False), ("w", np.ones((2, 3, 3), np.float16), True)],
                            {"strides": [2], "output_padding": [1]}, np.float16),
    ("com.microsoft.dml", "DmlFusedConv"): ([("x", np.zeros((1, 2, 3, 4, 5), np.float32), False),
                                             ("w", np.ones((3, 2, 1, 2, 2), np.float32), True)],
                                            {"fused_activation": "LeakyRelu", "fused_alpha": 0.125}, np.float32),
    ("com.microsoft.dml", "DmlFusedConvTranspose"): ([("x", np.zeros((1, 2, 3, 3), np.float32), False),
                                                      ("w", np.ones((2, 2, 2, 2), np.float32), True)],
                                                     {"fused_activation": "Relu", "pads": [1, 1, 0, 0]}, np.float32),
    ("", "QuantizeLinear"): ([("x", np.zeros((2, 3), np.float32), False), *zip(("s", "z"), _parameters(), (True, True))], {}, U8),
    ("com.microsoft", "QuantizeLinear"): ([("x", np.zeros((2, 3), np.float32), False), ("s", np.full(3, 0.5, np.float32), False),
                                          ("z", np.arange(3, dtype=np.int8), True)], {"axis": 1}, np.int8),
    ("", "DequantizeLinear"): ([("x", np.zeros((2, 3), U8), False), *zip(("s", "z"), _parameters(), (True, True))], {}, np.float32),
    ("com.microsoft", "DequantizeLinear"): ([("x", np.zeros((2, 3), np.int32), False), ("s", np.full(2, 0.5, np.float32), True)],
                                            {"axis": 0}, np.float32),
    ("", "DynamicQuantizeLinear"): ([("x", np.zeros((2, 3), np.float32), False)], {}, U8),
    ("", "MaxPool"): ([("x", np.zeros((1, 2, 5, 5), U8), False)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, U8),
    ("", "Relu"): ([("x", np.zeros((2, 3), np.int8), False)], {}, np.int8),
    ("", "Sigmoid"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Tanh"): ([("x", np.zeros((2, 3, 4, 5, 6), np.float32), False)], {}, np.float32),
    ("", "LeakyRelu"): ([("x", np.zeros(3, np.float32), False)], {"alpha": 0.125}, np.float32),
    ("com.microsoft", "Gelu"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Erf"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("com.microsoft", "BiasGelu"): ([("x", np.zeros((2, 3, 4), np.float16), False), ("b", np.zeros(4, np.float16), True)], {}, np.float16),
    ("com.microsoft", "QuickGelu"): ([("x", np.zeros((2, 3), np.float32), False)], {"alpha": 1.5}, np.float32),
    ("com.microsoft.dml", "DmlScale"): ([("x", np.zeros((2, 3), np.float16), False)], {"alpha": 1.5}, np.float16),
    ("com.microsoft.dml", "DmlClipToBool"): ([("x", np.zeros((2, 3), np.uint8), False)], {}, np.bool_),
    ("com.microsoft", "FastGelu"): ([("x", np.zeros((2, 4), np.float32), False), ("b", np.zeros(4, np.float32), False)], {}, np.float32),
    ("", "Exp"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Log"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Abs"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Neg"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Reciprocal"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Floor"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "Ceil"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "Pow"): ([("x", np.ones((2, 3), np.float32), False), ("e", np.array(2.0, np.float32), True)], {}, np.float32),
    ("", "Min"): ([("a", np.zeros((2, 3), np.float16), False), ("b", np.zeros(3, np.float16), False)], {}, np.float16),
    ("", "Max"): ([("a", np.zeros((2, 3), np.int64), False), ("b", np.zeros((2, 1), np.int64), True)], {}, np.int64),
    ("", "Clip"): ([("x", np.zeros((2, 3), np.float32), False), ("lo", np.array(-1.0, np.float32), True), ("hi", np.array(1.0, np.float32), True)],
                   {}, np.float32),
    ("", "IsNaN"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.bool_),
    ("com.microsoft.dml", "DmlFusedAdd"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros(3, np.float32), False)],
                                           {"fused_activation": "Relu"}, np.float32),
    ("com.microsoft.dml", "DmlFusedSum"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros(3, np.float32), False)],
                                           {"fused_activation": "LeakyRelu", "fused_alpha": 0.125}, np.float32),
    ("", "Transpose"): ([("x", np.zeros((2, 3, 4), U8), False)], {"perm": [2, 0, 1]}, U8),
    ("", "Identity"): ([("x", np.zeros((2, 3), np.int8), False)], {}, np.int8),
    ("", "Flatten"): ([("x", np.zeros((2, 3, 4), U8), False)], {"axis": 2}, U8),
    ("", "Squeeze"): ([("x", np.zeros((2, 1, 4), U8), False)], {}, U8),
    ("", "Unsqueeze"): ([("x", np.zeros((2, 4), U8), False), ("axes", np.array([0, 3]), True)], {}, U8),
    ("", "Reshape"): ([("x", np.zeros((2, 3, 4), U8), False), ("shape", np.array([0, -1]), True)], {}, U8),
    ("", "Expand"): ([("x", np.zeros((3, 1), np.float16), False), ("shape", np.array([2, 1, 4]), True)], {}, np.float16),
    ("", "Where"): ([("c", np.zeros((2, 1), bool), False), ("x", np.zeros(3, np.float16), False), ("y", np.zeros((2, 3), np.float16), True)],
                  {}, np.float16),
    ("", "Cast"): ([("x", np.zeros((2, 3), np.float16), False)], {"to": 9}, np.bool_),  # to bool: the DML EP's graph CAST -> CLIP1
    ("", "CastLike"): ([("x", np.zeros((2, 3), np.float32), False), ("t", np.zeros(1, np.float16), True)], {}, np.float16),
    ("", "Equal"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros(3, np.float32), False)], {}, bool),
    ("", "Greater"): ([("a", np.zeros((2, 3), np.float16), False), ("b", np.zeros(1, np.float16), True)], {}, bool),
    ("", "Less"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros((2, 1), np.float32), False)], {}, bool),
    ("", "GreaterOrEqual"): ([("a", np.zeros((2, 3), np.int64), False), ("b", np.zeros(3, np.int64), False)], {}, bool),
    ("", "LessOrEqual"): ([("a", np.zeros((2, 3), np.int32), False), ("b", np.zeros(3, np.int32), False)], {}, bool),
    ("", "Not"): ([("x", np.zeros((2, 3), bool), False)], {}, bool),
    ("", "And"): ([("a", np.zeros((2, 3), bool), False), ("b", np.zeros(3, bool), False)], {}, bool),
    ("", "Or"): ([("a", np.zeros((2, 3), bool), False), ("b", np.zeros(3, bool), False)], {}, bool),
    ("", "Xor"): ([("a", np.zeros((2, 3), bool), False), ("b", np.zeros(3, bool), False)], {}, bool),
    ("", "Concat"): ([("a", np.zeros((2, 3), U8), False), ("b", np.zeros((2, 5), U8), False)], {"axis": -1}, U8),
    ("", "Slice"): ([("x", np.zeros((4, 6), U8), False), ("starts", np.array([1, -1]), True), ("ends", np.array([3, -7]), True),
                    ("axes", np.array([0, 1]), True), ("steps", np.array([1, -2]), True)], {"starts": [1], "ends": [3]}, U8),
    ("", "Gather"): ([("x", np.zeros((5, 3), np.int8), False), ("i", np.array([[0, 4], [-1, 2]]), False)], {"axis": 0}, np.int8),
    ("com.microsoft.dml", "DmlJoin"): ([("a", np.zeros((2, 3), np.float32), False), ("b", np.zeros((2, 1), np.float32), False)],
                                       {"axis": 1}, np.float32),
    ("com.microsoft.dml", "DmlDynamicQuantizeLinear"): ([("x", np.zeros((2, 3), np.float32), False)], {"to": 3}, np.int8),
    ("com.microsoft", "QLinearSigmoid"): ([("x", np.zeros((2, 3), U8), False), *zip(("xs", "xz"), _parameters(), (True, True)),
                                           *zip(("ys", "yz"), _parameters(), (True, True))], {}, U8),
    ("com.microsoft.dml", "DmlSigmoid"): ([("x", np.zeros((2, 3), np.float32), False)], {}, np.float32),
    ("", "MatMul"): ([("a", np.zeros((2, 4, 5), np.float32), False), ("b", np.zeros((5, 3), np.float32), True)], {}, np.float32),
    ("com.microsoft", "FusedMatMul"): ([("a", np.zeros((2, 5, 4), np.float16), False), ("b", np.zeros((2, 3, 5), np.float16), False)],
                                       {"transA": 1, "transB": 1, "alpha": 0.125}, np.float16),
    ("", "Gemm"): ([("a", np.zeros((4, 5), np.float32), False), ("b", np.zeros((3, 5), np.float32), True),
                   ("c", np.zeros(3, np.float32), True)], {"transB": 1, "alpha": 0.5, "beta": 2.0}, np.float32),
    ("com.microsoft", "MatMulNBits"): ([("a", np.zeros((2, 32), np.float32), False), ("b", np.full((3, 1, 16), 0x98, U8), True),
                                        ("s", np.full((3, 1), 0.5, np.float32), True), ("z", np.full((3, 1), 8, U8), True)],
                                       {"K": 32, "N": 3, "bits": 4, "block_size": 32}, np.float32),
    ("com.microsoft.dml", "DmlDequantize"): ([("b", np.full((3, 2, 16), 0x98, U8), True), ("s", np.full(6, 0.5, np.float16), True),
                                              ("z", np.full(3, 8, U8), True)], {"K": 64, "N": 3, "bits": 4}, np.float16),
    ("com.microsoft.dml", "DmlGemm"): ([("a", np.zeros((2, 4, 32), np.float32), False), ("w", np.zeros((3, 32), np.float32), False)],
                                       {}, np.float32),
    ("", "Softmax"): ([("x", np.zeros((2, 3, 4), np.float32), False)], {"axis": 1}, np.float32),
    ("", "ReduceSum"): ([("x", np.zeros((2, 3, 4), np.float32), False)], {"keepdims": 0}, np.float32),
    ("", "ReduceMean"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("", "ReduceMax"): ([("x", np.zeros((2, 3), np.float32), False)], {"keepdims": 0}, np.float32),
    ("", "ReduceMin"): ([("x", np.zeros((2, 3), np.float16), False)], {}, np.float16),
    ("com.microsoft", "GroupQueryAttention"): ([("q", np.zeros((1, 1, 8), np.float16), False), ("k", np.zeros((1, 1, 4), np.float16), False),
                                                ("v", np.zeros((1, 1, 4), np.float16), False), ("pk", np.zeros((1, 1, 3, 4), np.float16), False),
                                                ("pv", np.zeros((1, 1, 3, 4), np.float16), False), ("sl", np.array([2], np.int32), False),
                                                ("tot", np.array(3, np.int32), True)], {"num_heads": 2, "kv_num_heads": 1}, np.float16),
    ("com.microsoft", "MultiHeadAttention"): ([("q", np.zeros((2, 3, 8), np.float32), False), ("k", np.zeros((2, 4, 8), np.float32), False),
                                               ("v", np.zeros((2, 4, 6), np.float32), False), ("b", np.zeros(22, np.float32), True),
                                               ("m", np.ones((2, 4), np.int32), False)], {"num_heads": 2}, np.float32),
    ("", "LayerNormalization"): ([("x", np.zeros((2, 3, 8), np.float32), False), ("g", np.ones(8, np.float32), True),
                                 ("b", np.zeros(8, np.float32), True)], {"epsilon": 1e-5}, np.float32),
    ("", "SimplifiedLayerNormalization"): ([("x", np.zeros((2, 8), np.float16), False), ("g", np.ones(8, np.float16), True)],
                                           {"epsilon": 1e-6}, np.float16),
    ("com.microsoft.dml", "DmlMeanVarianceNormalization"): ([("x", np.zeros((1, 3, 8), np.float16), False), ("g", np.ones(8, np.float16), True),
                                                            ("b", np.zeros(8, np.float16), True)], {"epsilon": 1e-6, "simplified": 1},
                                                           np.float16),
    ("com.microsoft", "SkipLayerNormalization"): ([("x", np.zeros((1, 3, 8), np.float32), False), ("s", np.zeros((1, 3, 8), np.float32), False),
                                                   ("g", np.ones(8, np.float32), True), ("be", np.zeros(8, np.float32), True),
                                                   ("bi", np.zeros(8, np.float32), True)], {"epsilon": 1e-5}, np.float32),
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): ([("x", np.zeros((1, 3, 8), np.float16), False),
                                                             ("s", np.zeros((1, 3, 8), np.float16), False), ("g", np.ones(8, np.float16), True)],
                                                            {"epsilon": 1e-6}, np.float16),
    ("com.microsoft", "RotaryEmbedding"): ([("x", np.zeros((1, 3, 16), np.float16), False), ("p", np.zeros((1, 3), np.int64), False),
                                            ("c", np.ones((8, 4), np.float16), True), ("s", np.zeros((8, 4), np.float16), True)],
                                           {"num_heads": 2}, np.float16),
    ("com.microsoft.dml", "DmlSplit"): ([("x", np.zeros((2, 3, 4), np.float16), False)], {"axis": -1, "split": [4]}, np.float16),
    ("com.microsoft.dml", "DmlRotaryCopy"): ([("x", np.zeros((1, 2, 3, 4), np.float32), False)], {"num_heads": 2, "transposed": 1}, np.float32),
    ("com.microsoft.dml", "DmlRotaryRange"): ([("x", np.zeros((1, 3, 8), np.float16), False)], {}, np.int64),
    ("com.microsoft.dml", "DmlRotaryPositions"): ([("r", np.zeros((1, 3), np.int64), False), ("p", np.zeros(1, np.int64), False),
                                                   ("x", np.zeros((2, 3, 8), np.float16), False)], {}, np.int64),
    ("com.microsoft.dml", "DmlRotaryCache"): ([("c", np.zeros((8, 4), np.float16), True), ("p", np.zeros((2, 3), np.int64), False)],
                                              {"interleaved": 1}, np.float16),
    ("com.microsoft.dml", "DmlRotarySigns"): ([], {"to": 10}, np.float16),
    ("com.microsoft.dml", "DmlRotaryAdd"): ([("a", np.zeros((1, 3, 2, 2, 4), np.float32), False), ("b", np.zeros((1, 3, 2, 2, 4), np.float32), False)],
                                            {"num_heads": 2, "transposed": 1, "whole": 1}, np.float32),
    ("", "Range"): ([("a", np.array(1.5, np.float32), True), ("b", np.array(7.0, np.float32), True), ("d", np.array(0.5, np.float32), True)],
                    {}, np.float32),
    ("", "ConstantOfShape"): ([("s", np.array([2, 3], np.int64), True)], {"value": numpy_helper.from_array(np.array([1], np.int64))}, np.int64),
    ("com.microsoft.dml", "DmlRotaryJoin"): ([("a", np.zeros((1, 3, 2, 4), np.float16), False), ("b", np.zeros((1, 3, 2, 4), np.float16), False)],
                                             {"axis": -1, "merge_heads": 1}, np.float16),
}


def plan_one(domain: str, op_type: str, opset: int = 19, inputs=None):
    """The importer's entry for one node of ``op_type`` (the row's example inputs by default)."""
    specs, attributes, out_type = NODES[(domain, op_type)]
    specs = specs if inputs is None else specs[:inputs] if inputs <= len(specs) else specs + specs[-1:] * (inputs - len(specs))
    node = helper.make_node(op_type, [name for name, _, _ in specs], ["y"], domain=domain, **attributes)
    constants = {name: array for name, array, constant in specs if constant}
    values = {name: graph.ValueInfo(name, array.dtype, array.shape) for name, array, _ in specs}
    values["y"] = graph.ValueInfo("y", np.dtype(out_type), None)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(helper.make_graph([node], "one", [], [],
                                                [numpy_helper.from_array(a, n) for n, a in constants.items()]), opset_imports=opsets)
    importer = NodeImporter(constants, DEFAULT_FEATURE_LEVEL, opset_versions(model))
    return importer.plan_node(node, Origin((), (node,)), values)


def test_every_row_has_an_example():
    assert set(NODES) == set(registration.REGISTRATIONS)


@pytest.mark.parametrize("row", [row for row in ROWS if (row.domain, row.op_type) not in GRAPH_ROWS], ids=row_id)
def test_row_imports_a_node_whose_desc_round_trips_through_dxdispatch(row):
    entry = plan_one(row.domain, row.op_type)
    assert isinstance(entry, DmlNode), entry.summary()
    assert type(entry.desc) is registration.OPERATORS[entry.desc.OPERATOR_TYPE].desc
    assert registration.OPERATORS[entry.desc.OPERATOR_TYPE] in row.operator.OPERATORS
    assert dxdispatch.from_dict(dxdispatch.to_dict(entry.desc)) == entry.desc
    outputs = dxdispatch.output_fields(entry.desc)
    assert outputs[0] in ("OutputTensor", "OutputTensors[0]") and set(outputs) <= set(entry.desc.tensors()), "the tensors a dispatch writes"


def example_model(domain: str, op_type: str) -> onnx.ModelProto:
    """A one-node model of the row's example node, its non-constant inputs graph inputs."""
    specs, attributes, out_type = NODES[(domain, op_type)]
    node = helper.make_node(op_type, [name for name, _, _ in specs], ["y"], domain=domain, **attributes)
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)
              for name, array, constant in specs if not constant]
    output = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(out_type)), None)
    initializers = [numpy_helper.from_array(array, name) for name, array, constant in specs if constant]
    opsets = [helper.make_opsetid("", 19)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(helper.make_graph([node], "one", inputs, [output], initializers), opset_imports=opsets, ir_version=9)


@pytest.mark.parametrize("row", [row for row in ROWS if (row.domain, row.op_type) in GRAPH_ROWS], ids=row_id)
def test_graph_row_is_planned_as_directml_operators_whose_descs_round_trip(row):
    from dml_ep.planning.planner import plan_model

    plan = plan_model(example_model(row.domain, row.op_type))
    assert len(plan.entries) > 1 and all(isinstance(e, DmlNode) for e in plan.entries), [e.summary() for e in plan.entries]
    for entry in plan.entries:
        assert entry.origin.nodes[0].op_type == row.op_type
        assert dxdispatch.from_dict(dxdispatch.to_dict(entry.desc)) == entry.desc
    alone = plan_one(row.domain, row.op_type)  # not split: the row says why
    assert isinstance(alone, FallbackNode) and "graph of" in alone.reason


@pytest.mark.parametrize("graph_row", registration.GRAPHS, ids=lambda row: row.op_type)
def test_graph_row_is_complete(graph_row):
    module = importlib.import_module(graph_row.parts.__module__)
    assert module.__name__.startswith("dml_ep.operators.graphs."), "a DirectML graph is a module of operators.graphs"
    assert module.RULE == graph_row.rule and module.DIRECTML_OPERATORS == graph_row.operators
    assert graph_row.exact_products is None or graph_row.exact_products.__module__ == module.__name__, "its hooks live in its module"
    assert registration.graph_of(Origin(("an earlier rule", graph_row.rule), ())) is graph_row
    assert registration.graph_of(Origin((graph_row.rule, "a later rule"), ())) is None


@pytest.mark.parametrize("cls", activation.FUSABLE_ACTIVATIONS, ids=lambda cls: cls.__name__)
def test_activation_desc_round_trips_through_dxdispatch(cls):
    tensor = DML_BUFFER_TENSOR_DESC.create(DML_TENSOR_DATA_TYPE.FLOAT32, (1, 1, 2, 3))
    desc = cls(InputTensor=tensor, OutputTensor=tensor)
    assert dxdispatch.from_dict(dxdispatch.to_dict(desc)) == desc


# --- since-versions, matched exactly ---------------------------------------------------------


@pytest.mark.parametrize("row", [row for row in ROWS if row.domain == ""], ids=row_id)
def test_ai_onnx_rows_match_the_schema_since_version_exactly(row):
    for opset in range(1, onnx.defs.onnx_opset_version() + 1):
        since = registration.since_version("", row.op_type, opset)
        entry = plan_one(row.domain, row.op_type, opset)
        if since in row.versions:  # a graph row's example unsplit, as plan_one plans it, says it is a graph
            assert isinstance(entry, DmlNode) or (row.domain, row.op_type) in GRAPH_ROWS and "graph of" in entry.reason, (opset, entry.summary())
        else:
            assert isinstance(entry, FallbackNode), opset
            registered = f"the DML EP registers {row.op_type} {', '.join(map(str, sorted(row.versions)))}"
            assert registered in entry.reason
            assert (f"{row.op_type}-{since}" if since else "has no schema") in entry.reason
            assert entry.reason.endswith("on the CPU in the real EP too")


def test_add_of_opset_6_names_its_since_version_and_the_rows():
    entry = plan_one("", "Add", opset=6)
    assert entry.reason == "Add-6 is not mapped; the DML EP registers Add 7, 13, 14; on the CPU in the real EP too"
    entry = plan_one("", "Sum", opset=7)
    assert entry.reason.startswith("Sum-6 (its since-version at opset 7) is not mapped; the DML EP registers Sum 8, 13")


@pytest.mark.parametrize("op_type", ["Sum", "DmlFusedSum"])
def test_sum_rows_query_two_inputs(op_type):
    domain = "" if op_type == "Sum" else "com.microsoft.dml"
    entry = plan_one(domain, op_type, inputs=3)
    assert isinstance(entry, FallbackNode)
    assert entry.reason.startswith("Sum with 3 inputs (only a two-input Sum is one DirectML operator)")


# --- README's operator table ------------------------------------------------------------------


def readme_operator_table() -> list[tuple[str, str]]:
    """The "ONNX node | DirectML operator" table of README's user guide (docs/guide.md), as (node column, operator column) pairs."""
    lines = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text().splitlines()
    start = lines.index("| ONNX node | DirectML operator | from feature level |") + 2
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(tuple(cell.strip() for cell in line.split("|")[1:3]))
    return table


def readme_lines(op_type: str) -> list[tuple[str, str]]:
    """The table's lines whose node column names ``op_type``."""
    return [line for line in readme_operator_table() if re.search(rf"\b{op_type}\b", line[0])]


@pytest.mark.parametrize("row", [row for row in ROWS if row.domain != "com.microsoft.dml" and (row.domain, row.op_type) not in GRAPH_ROWS],
                         ids=row_id)
def test_readme_names_each_row_with_a_directml_operator_of_its_module(row):
    lines = readme_lines(row.op_type)
    names = {str(entry.desc.OPERATOR_TYPE).removeprefix("DML_OPERATOR_") for entry in row.operator.OPERATORS}
    assert any(re.search(rf"\b(DML_OPERATOR_)?{name}\b", line[1]) for line in lines for name in names), (row.op_type, lines, names)


@pytest.mark.parametrize("graph_row", registration.GRAPHS, ids=lambda row: row.op_type)
def test_readme_names_each_directml_graph_with_its_operators(graph_row):
    lines = readme_lines(graph_row.op_type)
    assert lines, f"README's operator table has no line for {graph_row.op_type}"
    names = [rf"\b{operator.split()[0].removeprefix('ELEMENT_WISE_')}\b" for operator in graph_row.operators]
    assert any(all(re.search(name, line[1]) for name in names) for line in lines), (graph_row.operators, lines)


def test_readme_names_only_operators_dml_ep_has():
    named = {token.removeprefix("DML_OPERATOR_") for _, column in readme_operator_table() for token in re.findall(r"\b[A-Z][A-Z0-9_]{3,}\b", column)}
    assert named, "README's operator table names DirectML operators"
    modelled = {str(op).removeprefix("DML_OPERATOR_") for op in registration.OPERATORS}
    assert named <= modelled | {name.removeprefix("ELEMENT_WISE_") for name in modelled}, named - modelled


# --- compare, its causes, the reports and DxDispatch ask the table ------------------------------


ASKING = sorted([*(Path(dml_ep.__file__).parent / "conformance" / name for name in ("compare.py", "causes.py")),
                 *(Path(dml_ep.__file__).parent / "reports").glob("*.py"), *(Path(dml_ep.__file__).parent / "interop" / "dxdispatch").glob("*.py")])


def literal_strings(node: ast.AST) -> list[str]:
    """The strings a literal holds: a str, or the items (a dict's keys) of a tuple, list, set or dict of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
    return [text for item in items if item is not None for text in literal_strings(item)]


def op_type_names(tree: ast.Module) -> list[tuple[int, str]]:
    """Where a module compares an ``op_type`` with strings it names: a literal, or a module-level
    table of them (``x.op_type in {"Relu", "Clip"}``, ``x.op_type in KINDS``), and the table rows of
    registered op types it holds."""
    registered = {row.op_type for row in ROWS} | {row.op_type for row in registration.GRAPHS}
    tables = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            named = [node.value for node in ast.walk(statement.value) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            tables.update((target.id, named) for target in targets if isinstance(target, ast.Name))
    found = [(0, f"{name}: {text}") for name, named in tables.items() for text in named if text in registered]
    for node in ast.walk(tree):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        if any(isinstance(side, ast.Attribute) and side.attr == "op_type" for side in sides):
            for side in sides:
                found += [(node.lineno, text) for text in literal_strings(side)]
                found += [(node.lineno, f"{side.id}: {text}") for text in tables.get(getattr(side, "id", None), [])]
    return found


@pytest.mark.parametrize("path", ASKING, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_asks_the_operator_table_rather_than_naming_op_types(path):
    assert op_type_names(ast.parse(path.read_text())) == []


def test_the_op_type_check_finds_what_it_looks_for():
    found = op_type_names(ast.parse('KINDS = {"Conv": "conv"}\nRANDOM = frozenset({"RandomNormal"})\n'
                                    'def f(node):\n    return node.op_type == "Relu" or node.op_type in ("Clip",) or node.op_type in RANDOM'))
    assert found == [(0, "KINDS: Conv"), (4, "Relu"), (4, "Clip"), (4, "RANDOM: RandomNormal")]


def test_dxdispatch_reads_and_writes_every_enum_a_desc_field_holds():
    kinds = {field_kind(f) for entry in registration.OPERATORS.values() for f in dataclasses.fields(entry.desc)}
    named = {kind for kind in kinds if isinstance(getattr(enums, kind, None), type) and issubclass(getattr(enums, kind), enum.Enum)}
    assert named and named == set(dxdispatch.ENUM_FIELDS)
