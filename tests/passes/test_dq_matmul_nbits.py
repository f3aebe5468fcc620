"""onnxruntime's DQMatMulToMatMulNBits for DML nodes (``qdq_selectors.dq_matmul_nbits``,
``qdq_actions.dq_matmul_to_matmul_nbits``): a blocked int4/uint4 DequantizeLinear-21 feeding a
MatMul's B becomes com.microsoft MatMulNBits from onnxruntime 1.20 (05acfb90ab), with the weight,
scales and zero points in MatMulNBits' layout.

The reference is onnxruntime's own optimizer: the rule runs for CPU nodes too, so a CPU session's
optimized model holds the MatMulNBits onnxruntime writes, initializer by initializer. Newer
onnxruntime also writes ``weight_prepacked=0``, which 1.24 does not (its action's ExtraAttributes).
"""

from __future__ import annotations

import os
import tempfile

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from dml_ep.passes import EditableGraph, qdq_transformer
from dml_ep.planning.planner import Planner


def dq_matmul(k, n, block_size, signed, zero_point, scale_type=np.float32, axis=0, seed=0, b_consumers=1, a_from_dq=False):
    """A [2, K] float A times DequantizeLinear-21(w [K, N] int4 or uint4, blocked along K)."""
    rng = np.random.default_rng(seed)
    low, high = (-8, 8) if signed else (0, 16)
    w = rng.integers(low, high, (k, n)).astype(ml_dtypes.int4 if signed else ml_dtypes.uint4)
    blocks = -(-k // block_size)
    scale_shape = (blocks, n) if axis == 0 else (k, -(-n // block_size))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array((rng.random(scale_shape) + 0.1).astype(scale_type), "s")]
    if zero_point:
        inits.append(numpy_helper.from_array(rng.integers(low, high, scale_shape).astype(w.dtype), "z"))
    float_type = helper.np_dtype_to_tensor_dtype(np.dtype(scale_type))
    nodes = [helper.make_node("DequantizeLinear", [i.name for i in inits], ["wd"], name="dq", axis=axis, block_size=block_size),
             helper.make_node("MatMul", ["a", "wd"], ["y"], name="mm")]
    outputs = [helper.make_tensor_value_info("y", float_type, [2, n])]
    if b_consumers > 1:
        nodes.append(helper.make_node("Identity", ["wd"], ["wd_copy"]))
        outputs.append(helper.make_tensor_value_info("wd_copy", float_type, [k, n]))
    if a_from_dq:
        inits += [numpy_helper.from_array(np.full((2, k), 3, np.uint8), "aq"), numpy_helper.from_array(np.float32(0.5), "as")]
        nodes.insert(0, helper.make_node("DequantizeLinear", ["aq", "as"], ["a"], name="dq_a"))
        inputs = []
    else:
        inputs = [helper.make_tensor_value_info("a", float_type, [2, k])]
    graph = helper.make_graph(nodes, "dq_matmul", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def onnxruntime_rewrite(model):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)


def uncast(name: str) -> str:
    """A value's name before the CPU EP put a float16 <-> float32 Cast on it (its kernel is float32)."""
    return name.removeprefix("InsertedPrecisionFreeCast_")


def rewritten(model, release="1.24+"):
    graph = EditableGraph(model)
    qdq_transformer(graph, release)
    return graph


CASES = [  # K, N, block_size, signed, zero point, scale type
    (64, 8, 32, True, False, np.float32), (64, 8, 32, False, False, np.float32), (64, 8, 32, False, True, np.float32),
    (70, 5, 16, True, True, np.float32), (70, 5, 16, False, True, np.float16), (100, 3, 32, True, False, np.float16),
    (48, 6, 16, False, True, np.float32), (300, 4, 128, True, True, np.float32),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("k, n, block_size, signed, zero_point, scale_type", CASES)
def test_the_matmul_nbits_onnxruntime_writes(k, n, block_size, signed, zero_point, scale_type):
    """Same node (name, inputs' order, attributes) and the same initializers, bit for bit: B's rows
    past K, the shift of int4 by 8, an odd row of zero points, the zero zero points of a uint4
    weight without any."""
    model = dq_matmul(k, n, block_size, signed, zero_point, scale_type)
    theirs = onnxruntime_rewrite(model)
    [expected] = [x for x in theirs.graph.node if x.op_type == "MatMulNBits"]
    initializers = {t.name: numpy_helper.to_array(t) for t in theirs.graph.initializer}
    expected_inputs, expected_outputs = (
        [uncast(name) for name in names] for names in (expected.input, expected.output))
    graph = rewritten(model)
    [ours] = [x for x in graph.nodes if x.op_type == "MatMulNBits"]
    assert [x.op_type for x in graph.nodes] == ["MatMulNBits"]
    assert (ours.name, ours.domain, list(ours.output)) == (expected.name, expected.domain, expected_outputs)
    assert {(a.name, a.i) for a in ours.attribute} == {(a.name, a.i) for a in expected.attribute if a.name != "weight_prepacked"}
    assert len(ours.input) == len(expected_inputs) and ours.input[0] == expected_inputs[0]
    for mine, name in zip(ours.input[1:], expected_inputs[1:]):
        want = initializers[name]
        got = graph.constants[mine]
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), (mine, name)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("change, reason", [
    (dict(axis=1), "axis"), (dict(block_size=8), "block_size 8"), (dict(block_size=24), "block_size 24"),
    (dict(a_from_dq=True), "B alone"),
])
def test_what_keeps_the_dq_and_matmul(change, reason):
    """The selector's conditions (qdq_selectors.cc DQMatMulNodeGroupSelector::Check): onnxruntime
    keeps the group too, and dml_ep's note on the MatMul says which condition failed."""
    model = dq_matmul(**{"k": 64, "n": 8, "block_size": 32, "signed": True, "zero_point": False, **change})
    assert not [x for x in onnxruntime_rewrite(model).graph.node if x.op_type == "MatMulNBits"]
    graph = rewritten(model)
    assert "MatMulNBits" not in [x.op_type for x in graph.nodes]
    [matmul] = [x for x in graph.nodes if x.op_type == "MatMul"]
    assert reason in graph.origin(matmul).note


def test_a_shared_dq_is_copied_and_fused():
    """A DQ read by two nodes: EnsureUniqueDQForNodeUnit gives the MatMul its own copy, which 1.24
    fuses. (onnxruntime 1.25 added the check that the weight and scale are no other node's, so
    the installed onnxruntime, newer, keeps this group: qdq_selectors.cc, 37b863c617.)"""
    graph = rewritten(dq_matmul(64, 8, 32, True, False, b_consumers=2))
    assert [x.op_type for x in graph.nodes] == ["DequantizeLinear", "MatMulNBits", "Identity"]


@pytest.mark.parametrize("release, fused", [("1.19", False), ("1.20", True), ("1.21-1.23", True), ("1.24+", True)])
def test_from_onnxruntime_1_20_on_dml_nodes(release, fused):
    """The rule's provider list gained the DML EP in 1.20 (05acfb90ab); 1.19's was the CPU EP's alone."""
    planner = Planner(dq_matmul(64, 8, 32, True, False), qdq_rules=release)
    assert any("DQMatMulToMatMulNBits" in origin.rules for origin in planner.origins) == fused


def test_int4_weights_that_stay_reach_onnxruntime_as_tensors():
    """A blocked int4 DQ that stays (block_size 8) is handed to onnxruntime's optimizer in the model
    (no OrtValue takes ml_dtypes' int4), and a replaced DQ's weights, read by no node, are not handed at all."""
    kept = Planner(dq_matmul(64, 8, 8, True, True))
    assert [x.op_type for x in kept.nodes] == ["DequantizeLinear", "MatMul"]
    fused = Planner(dq_matmul(64, 8, 32, False, True, b_consumers=1))
    assert [x.op_type for x in fused.nodes] == ["DmlDequantize", "DmlGemm"]  # MatMulNBits, as the DML EP builds it


@pytest.mark.host_sensitive
@pytest.mark.parametrize("level", [0, 2, 4])
def test_the_session_sets_the_accuracy_level(level):
    """session.qdq_matmulnbits_accuracy_level (default 4) is the level of the MatMulNBits the rewrite
    makes, as in onnxruntime's optimized model; the DML EP never reads it, dml_ep's plan keeps it."""
    import dml_ep

    model = dq_matmul(64, 8, 32, True, False)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", str(level))
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        [theirs] = [x for x in onnx.load(options.optimized_model_filepath).graph.node if x.op_type == "MatMulNBits"]
    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", str(level))
    session = dml_ep.InferenceSession(model.SerializeToString(), options)
    whole = session.planner.origins[-1].whole
    assert [a.i for a in whole.attribute if a.name == "accuracy_level"] == [a.i for a in theirs.attribute if a.name == "accuracy_level"] == [level]


def test_an_accuracy_level_onnxruntime_refuses():
    import dml_ep
    from dml_ep.core.errors import DmlEpError

    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "5")
    with pytest.raises(DmlEpError, match="0 to 4"):
        dml_ep.InferenceSession(dq_matmul(64, 8, 32, True, False).SerializeToString(), options)
