"""The real DML EP's support queries, replayed: for each, nodes it accepts and nodes it declines, the
outcome read off the C++ query (onnxruntime 1.24 unless a release is named, Operators/DmlOperator*.cpp)."""

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.core.errors import RealEpError
from dml_ep.operators.nodes import FallbackNode
from dml_ep.planning.planner import plan_model
from dml_ep.realep.support_queries import QUERIES, QueryContext, declined


def context(op, inputs, outputs, types=None, domain="", release="1.24", **attributes):
    node = helper.make_node(op, inputs, outputs, domain=domain, **attributes)
    types = types or ["float" if name else None for name in inputs]
    return QueryContext(node, tuple(types), tuple(None for _ in inputs), tuple("float" if name else None for name in outputs),
                        tuple(None for _ in outputs), release)


MS = "com.microsoft"
BN = ["x", "s", "b", "m", "v"]
ATTENTION = ["x", "w", "b", "mask"]
QATTENTION = ["x", "w", "b", "sx", "sw", "mask"]
NBITS = ["a", "b", "scales"]

ACCEPTED = [  # query, a context it accepts
    ("QueryAttention", context("Attention", ATTENTION + ["", "", ""], ["y", ""], domain=MS, num_heads=2)),
    ("QueryAttention", context("Attention", ATTENTION, ["y"], domain=MS, num_heads=2, unidirectional=2**32)),  # narrowed to int32: 0
    ("QueryBatchNormalization", context("BatchNormalization", BN, ["y"])),
    ("QueryBatchNormalization", context("BatchNormalization", BN, ["y"], types=["float16", None, "float16", "float16", "float16"])),
    ("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")),
    ("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="bhwc,hkc->bhwk")),  # any 2-input equation from 1.19
    ("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="ij,kj", release="1.18")),  # MatMulTransposeB's pattern
    ("QueryEinSum", context("Einsum", ["a"], ["y"], equation="ijk->kji", release="1.17")),  # transpose: as many labels out as in
    ("QueryLayerNormalization", context("LayerNormalization", ["x", "g"], ["y"])),
    ("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, block_size=32)),  # bits defaults to 4
    ("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, bits=8, block_size=32, release="1.18")),
    ("QueryMaxPool", context("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])),
    ("QueryPad", context("Pad", ["x"], ["y"], pads=[0, 1, 0, 1])),
    ("QueryPad", context("Pad", ["x", "p"], ["y"])),  # Pad-11+: pads an input, the attribute absent
    ("QueryQAttention", context("QAttention", QATTENTION, ["y"], domain=MS, num_heads=2)),
    ("QueryQAttention", context("QAttention", QATTENTION[:5], ["y"], domain=MS, num_heads=2, unidirectional=1)),
    ("QueryQLinearSigmoid", context("QLinearSigmoid", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS)),
    ("QueryQLinearSigmoid", context("QLinearSigmoid", ["x", "sx", "", "sy", ""], ["y"], domain=MS)),  # GetInputCount counts omitted ones
    ("QueryRecurrentNeuralNetwork", context("LSTM", ["x", "w", "r"], ["y"], hidden_size=4, layout=0)),
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"], mode="linear", extrapolation_value=-0.0)),
    ("QueryScatter", context("ScatterND", ["x", "i", "u"], ["y"], reduction="none")),
    ("QuerySkipLayerNormalization", context("SkipLayerNormalization", ["x", "s", "g"], ["y", "", "", "sum"], domain=MS)),
    ("QuerySlice", context("Slice", ["x", "s", "e", "a", "t"], ["y"])),
]

DECLINED = [  # query, a context it declines, the reason: a comment names the C++ condition
    ("QueryAttention", context("Attention", ATTENTION + ["past"], ["y"], domain=MS, num_heads=2),
     "QueryAttention declines a past input"),  # IsInputValid(4)
    ("QueryAttention", context("Attention", ATTENTION + ["", "", "len"], ["y"], domain=MS, num_heads=2),
     "QueryAttention declines a past_sequence_length input"),  # IsInputValid(6)
    ("QueryAttention", context("Attention", ATTENTION, ["y", "present"], domain=MS, num_heads=2),
     "QueryAttention declines a present output"),  # IsOutputValid(1)
    ("QueryAttention", context("Attention", ATTENTION, ["y"], domain=MS, num_heads=2, do_rotary=1),
     "QueryAttention declines do_rotary=1"),  # GetOptionalAttribute<int32_t>(DoRotary, 0) != 0
    ("QueryBatchNormalization", context("BatchNormalization", BN, ["y"], training_mode=1),
     "QueryBatchNormalization declines training_mode=1"),  # trainingMode != 0
    ("QueryBatchNormalization", context("BatchNormalization", BN[:4], ["y"]),
     "QueryBatchNormalization declines 4 inputs"),  # GetInputCount() < 5
    ("QueryBatchNormalization", context("BatchNormalization", BN, ["y"], types=["float16", "float", "float", "float", "float"]),
     "QueryBatchNormalization declines input 1 of type float"),  # tensorDataType != inputTensorDataType
    ("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="...ij,...jk->...ik"),
     "QueryEinSum declines equation '...ij,...jk->...ik': an ellipsis"),  # case '.': m_components.clear(), type None
    ("QueryEinSum", context("Einsum", ["a", "b", "c"], ["y"], equation="i,j,k->ijk"),
     "QueryEinSum declines equation 'i,j,k->ijk': 3 inputs"),  # m_components.size() > maximumSupportedComponentCount
    ("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="bhwc,hkc->bhwk", release="1.18"),
     "QueryEinSum declines equation 'bhwc,hkc->bhwk': none of its patterns"),  # no recognizedOperators row matches (1.17-1.18)
    ("QueryLayerNormalization", context("LayerNormalization", ["x", "g"], ["y", "mean"]),
     "QueryLayerNormalization declines 2 outputs"),  # GetOutputCount() == 1
    ("QueryLayerNormalization", context("LayerNormalization", ["x", "g"], ["y", "", ""]),
     "QueryLayerNormalization declines 3 outputs"),  # GetOutputCount() counts omitted outputs too
    ("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=48, N=8, bits=4, block_size=32),
     "QueryMatMulNBits declines K=48, not a multiple of block_size=32"),  # bColCount % blockSize != 0
    ("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, bits=2, block_size=32),
     "QueryMatMulNBits declines bits=2"),  # bitCount != 4 && bitCount != 8
    ("QueryMaxPool", context("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1),
     "QueryMaxPool declines storage_order != 0"),  # storageOrder != 0
    ("QueryPad", context("Pad", ["x"], ["y"], pads=[0, -1, 0, 1]),
     "QueryPad declines negative pads"),  # !none_of(padCount < 0)
    ("QueryQAttention", context("QAttention", QATTENTION, ["y"], domain=MS, num_heads=2, unidirectional=1),
     "QueryQAttention declines unidirectional=1 with a mask input"),  # Unidirectional != 0 && IsInputValid(5)
    ("QueryQAttention", context("QAttention", QATTENTION, ["y"], domain=MS, num_heads=2, past_present_share_buffer=1),
     "QueryQAttention declines past_present_share_buffer=1"),  # PastPresentShareBuffer != 0
    ("QueryQLinearSigmoid", context("QLinearSigmoid", ["x", "sx", "zx", "sy"], ["y"], domain=MS),
     "QueryQLinearSigmoid declines 4 inputs (both zero points needed)"),  # GetInputCount() < 5
    ("QueryRecurrentNeuralNetwork", context("GRU", ["x", "w", "r"], ["y"], hidden_size=4, layout=1),
     "QueryRecurrentNeuralNetwork declines layout=1"),  # layout == 0 required
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"], mode="cubic"),
     "QueryResize declines mode 'cubic'"),  # mode == "cubic"
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"], exclude_outside=1),
     "QueryResize declines exclude_outside != 0"),  # excludeOutside != 0
    ("QueryResize", context("Resize", ["x", "", "s"], ["y"], mode="linear", extrapolation_value=1.0),
     "QueryResize declines extrapolation_value != 0"),  # extrapolationValue != 0.0
    ("QueryScatter", context("ScatterElements", ["x", "i", "u"], ["y"], reduction="add"),
     "QueryScatter declines reduction 'add'"),  # reduction != "none"
    ("QuerySkipLayerNormalization", context("SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"], domain=MS),
     "QuerySkipLayerNormalization declines a used output 1 (mean, inv_std_var)"),  # IsOutputValid(1)
    ("QuerySkipLayerNormalization", context("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y", "", "inv"], domain=MS),
     "QuerySkipLayerNormalization declines a used output 2 (mean, inv_std_var)"),  # IsOutputValid(2)
    ("QuerySlice", context("Slice", ["x", "s", "e", "a", "t", "extra"], ["y"]),
     "QuerySlice declines 6 inputs"),  # GetInputCount() <= 5
]


@pytest.mark.parametrize("query, accepted", ACCEPTED, ids=[f"{c[0]}-{i}" for i, c in enumerate(ACCEPTED)])
def test_each_query_accepts_what_its_source_accepts(query, accepted):
    assert declined(query, accepted) is None


@pytest.mark.parametrize("query, rejected, reason", DECLINED, ids=[f"{c[0]}-{i}" for i, c in enumerate(DECLINED)])
def test_each_query_declines_what_its_source_declines(query, rejected, reason):
    assert declined(query, rejected).startswith(reason)


def test_every_query_has_a_case_each_way():
    assert {q for q, _ in ACCEPTED} == {q for q, _, _ in DECLINED} == set(QUERIES)


@pytest.mark.parametrize("release, reason", [("1.18", "QueryEinSum declines"), ("1.19", None), ("1.24", None)])
def test_einsum_recognizes_any_two_input_equation_from_1_19(release, reason):
    """ac216267254 (1.19) replaced EinSumHelper's pattern table with a generic mapping."""
    outcome = declined("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation="bqc,bchw->bqhw", release=release))
    assert outcome == reason if reason is None else outcome.startswith(reason)


@pytest.mark.parametrize("equation", ["ij->k", "i2,j", "i-j", "i->i->i"])
def test_an_einsum_equation_its_parser_throws_on_raises(equation):
    # ML_CHECK_VALID_ARGUMENT / ML_INVALID_ARGUMENT in ParseEquationComponents: the session fails
    with pytest.raises(RealEpError, match="QueryEinSum throws"):
        declined("QueryEinSum", context("Einsum", ["a", "b"], ["y"], equation=equation))


def test_matmul_nbits_bits_is_required_before_1_23_and_block_size_must_be_positive():
    """bits has a schema default (4) from 2bdb57bb0a0 (1.23); ML_CHECK_VALID_ARGUMENT(blockSize > 0)."""
    assert declined("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, block_size=32, release="1.23")) is None
    with pytest.raises(RealEpError, match="'bits'"):
        declined("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, block_size=32, release="1.22"))
    with pytest.raises(RealEpError, match="block_size=0"):
        declined("QueryMatMulNBits", context("MatMulNBits", NBITS, ["y"], domain=MS, K=64, N=8, bits=4, block_size=0))


def test_no_query_reads_a_shape():
    """The C++ context has no shape accessor: shapes, even contradictory ones, change nothing."""
    for query, accepted in ACCEPTED:
        shaped = dataclasses.replace(accepted, input_shapes=tuple((0, None) for _ in accepted.input_shapes))
        assert declined(query, shaped) is None


def test_an_unknown_query_accepts():
    assert declined("QueryUnknown", ACCEPTED[0][1]) is None


def test_every_query_of_the_kernel_table_is_replayed():
    from dml_ep.realep.kernel_registry import kernels
    named = {k.query for release in ("1.17", "1.24") for rows in kernels(release).values() for k in rows if k.query}
    assert named == set(QUERIES)


def test_a_matmul_nbits_the_query_declines_runs_on_the_cpu():
    """K=48 with block_size 32: the DML EP takes only whole blocks, so the node runs on the CPU EP."""
    k, n, block = 48, 8, 32
    b = numpy_helper.from_array(np.zeros((n, 2, block // 2), np.uint8), "b")
    scales = numpy_helper.from_array(np.ones((n * 2,), np.float32), "scales")
    node = helper.make_node("MatMulNBits", ["a", "b", "scales"], ["y"], domain=MS, K=k, N=n, bits=4, block_size=block)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], [b, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    entry, = plan_model(model).entries
    assert isinstance(entry, FallbackNode) and entry.kind == "support-query"
    assert entry.reason == ("com.microsoft::MatMulNBits: QueryMatMulNBits declines K=48, not a multiple of block_size=32; "
                            "on the CPU in the real EP too")
