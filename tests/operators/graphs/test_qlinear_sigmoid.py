"""com.microsoft QLinearSigmoid as the DML EP runs it (DmlOperatorQLinearSigmoid.cpp): the graph
ELEMENT_WISE_DEQUANTIZE_LINEAR -> ACTIVATION_SIGMOID -> ELEMENT_WISE_QUANTIZE_LINEAR, planned as
three nodes standing for the user's one; in "onnxruntime" arithmetic bit-exact with onnxruntime's
CPU QLinearSigmoid (its 256-entry table of MlasComputeLogistic), whose logistic kernel is checked
against onnxruntime's float Sigmoid.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.interop import dxdispatch
from dml_ep.numerics.arithmetic import Arithmetic
from dml_ep.numerics.engines import get_engine
from dml_ep.operators.activation import host_logistic_fused, mlas_logistic
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
from onnx_builders import qlinear_sigmoid

OPERATORS = ["DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "DML_OPERATOR_ACTIVATION_SIGMOID",
             "DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR"]


def every_code(dtype, shape=(4, 64)) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype).reshape(shape)


def random_parameters(rng, dtype):
    info = np.iinfo(dtype)
    x_scale = np.float32(10.0 ** rng.uniform(-4, 0.5))  # codes spanning 0.03 to ~800 units: the clamp at 18 included
    y_scale = np.float32(10.0 ** rng.uniform(-3.5, -1.5))  # 1/256 is typical; smaller ones saturate part of the range
    return x_scale, dtype(rng.integers(info.min, info.max + 1)), y_scale, dtype(rng.integers(info.min, info.max + 1))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_every_code_is_bit_exact_with_onnxruntime_cpu_for_many_parameters(dtype):
    rng = np.random.default_rng(0 if dtype == np.uint8 else 1)
    x = every_code(dtype)
    cases = [(np.float32(0.05), dtype(3), np.float32(1 / 256), dtype(0 if dtype == np.uint8 else -128))]
    cases += [random_parameters(rng, dtype) for _ in range(40)]
    for parameters in cases:
        model, _ = qlinear_sigmoid(dtype, *parameters)
        expected = cpu_session(model).run(None, {"x": x})[0]
        actual = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, {"x": x})[0]
        np.testing.assert_array_equal(actual, expected, strict=True, err_msg=str(parameters))


@pytest.mark.host_sensitive
def test_parameters_bound_at_run_time_are_bit_exact_too():
    model, feeds = qlinear_sigmoid(np.uint8, 0.07, 120, 1 / 200, 10, feed_scales=True)
    feeds["x"] = every_code(np.uint8)
    expected = cpu_session(model).run(None, feeds)[0]
    np.testing.assert_array_equal(dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0], expected, strict=True)


@pytest.mark.host_sensitive
def test_directml_arithmetic_is_within_one_step():
    """``1 / (1 + exp(-x))`` correctly rounded where MLAS has a rational polynomial: a code apart at
    most, where a value sits near a rounding boundary."""
    rng = np.random.default_rng(2)
    x = every_code(np.uint8)
    for _ in range(10):
        model, _ = qlinear_sigmoid(np.uint8, *random_parameters(rng, np.uint8))
        expected = cpu_session(model).run(None, {"x": x})[0].astype(int)
        actual = dml_ep.InferenceSession(model).run(None, {"x": x})[0].astype(int)
        assert np.abs(actual - expected).max() <= 1


def test_plan_is_the_three_directml_operators_of_the_users_node():
    model, _ = qlinear_sigmoid(np.int8, 0.1, -3, 1 / 256, -128, shape=(2, 3, 5))
    plan = plan_model(model)
    assert not plan.pending and not plan.fallback_nodes
    assert [e.operator for e in plan.entries] == OPERATORS
    for entry in plan.entries:
        assert isinstance(entry, DmlNode)
        assert entry.origin.rules[-1] == "DmlOperatorQLinearSigmoid" and [n.name for n in entry.origin.nodes] == ["qsig"]
    dequantize, sigmoid, quantize = plan.entries
    assert dequantize.node.domain == quantize.node.domain == "com.microsoft" and sigmoid.node.op_type == "DmlSigmoid"
    assert sigmoid.value_inputs == [dequantize.output] and quantize.value_inputs[0] == sigmoid.output and quantize.output == "y"
    assert dequantize.desc.OutputTensor.DataType.name == "FLOAT32" and sigmoid.desc.InputTensor.Sizes == (1, 2, 3, 5)


def test_four_inputs_fall_back_by_the_support_query():
    model, _ = qlinear_sigmoid(np.uint8, 0.1, 3, 1 / 256, 0, inputs=4)
    (entry,) = plan_model(model).entries
    assert isinstance(entry, FallbackNode) and entry.node.op_type == "QLinearSigmoid"
    assert entry.reason.startswith("com.microsoft::QLinearSigmoid: QueryQLinearSigmoid declines 4 inputs (both zero points needed)")
    assert entry.reason.endswith("on the CPU in the real EP too")
    # Not run: onnxruntime 1.32's CPU kernel reads input 4 when building its table and aborts the
    # process on a 4-input node (libstdc++ assertion "__n < this->size()" in a NodeArg vector).


def test_a_1d_length_1_scale_on_a_first_dimension_other_than_1_is_the_real_eps_failure():
    """DmlOperatorQLinearSigmoid puts a 1-D parameter on axis 0 and checks its length is x's first
    dimension, with no exception for length 1 (DmlOperatorElementwiseQLinear has one)."""
    element = TensorProto.UINT8
    initializers = [numpy_helper.from_array(np.array([0.1], np.float32), "xs"), numpy_helper.from_array(np.array(3, np.uint8), "xz"),
                    numpy_helper.from_array(np.array(1 / 256, np.float32), "ys"), numpy_helper.from_array(np.array(0, np.uint8), "yz")]
    node = helper.make_node("QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft")
    for first, on_dml in ((1, True), (2, False)):
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", element, (first, 8))],
                                  [helper.make_tensor_value_info("y", element, (first, 8))], initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
        entries = plan_model(model).entries
        if on_dml:
            assert [e.operator for e in entries] == OPERATORS
        else:
            (entry,) = entries
            assert isinstance(entry, FallbackNode) and "requires its length to be x's first dimension 2" in entry.reason
            assert "fails creating the operator" in entry.reason


@pytest.mark.host_sensitive
def test_mlas_logistic_is_onnxruntimes_float_sigmoid_bit_for_bit():
    """The same MLAS routine (MlasComputeLogistic) under onnxruntime's Sigmoid: every dequantized
    value of many scales, a dense sweep of float32 in [-20, 20], the clamp ends and specials."""
    rng = np.random.default_rng(3)
    codes = np.arange(-255, 256, dtype=np.int32)
    dequantized = [np.float32(10.0 ** e) * codes.astype(np.float32) for e in rng.uniform(-4, 1, 200)]
    bits = np.arange(0, 0x41A00000, 1013, dtype=np.uint32).view(np.float32)  # every 1013th float32 in [0, 20)
    special = np.array([0.0, -0.0, 18, -18, np.nextafter(18, 0), 18.5, -1e3, 1e3, np.inf, -np.inf, np.nan, 1e-40, -1e-40], np.float32)
    x = np.concatenate([*dequantized, bits, -bits, rng.uniform(-20, 20, 200_000).astype(np.float32), special])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "sigmoid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    expected = cpu_session(model).run(None, {"x": x})[0]
    actual = mlas_logistic(x, host_logistic_fused())  # the FMA3 kernel, or on CPUs without it the generic one
    np.testing.assert_array_equal(actual.view(np.uint32)[~np.isnan(x)], expected.view(np.uint32)[~np.isnan(x)])
    assert np.isnan(actual[np.isnan(x)]).all()


@pytest.mark.host_sensitive
def test_the_logistic_probe_tells_the_two_mlas_kernels_apart():
    """The probe's inputs round apart in MLAS's FMA3 and generic kernels, and the host's onnxruntime
    gives one of the two (Nehalem under QEMU: the generic one; AVX2 hosts: FMA3)."""
    from dml_ep.numerics.kernels.mlas_transcendental import _FUSION_PROBE

    fused, generic = mlas_logistic(_FUSION_PROBE, True), mlas_logistic(_FUSION_PROBE, False)
    assert not np.array_equal(fused, generic)
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "sigmoid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    y = cpu_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)).run(None, {"x": _FUSION_PROBE})[0]
    np.testing.assert_array_equal(y, fused if host_logistic_fused() else generic)


def test_directml_sigmoid_is_the_documented_formula():
    from dml_ep.operators.dispatch import run_kernel
    from dml_ep.operators.kernel_state import KernelState
    from dml_ep.operators.activation import DML_ACTIVATION_SIGMOID_OPERATOR_DESC
    from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
    from dml_ep.core.enums import DML_TENSOR_DATA_TYPE

    x = np.linspace(-30, 30, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    tensor = DML_BUFFER_TENSOR_DESC.create(DML_TENSOR_DATA_TYPE.FLOAT32, x.shape)
    desc = DML_ACTIVATION_SIGMOID_OPERATOR_DESC(InputTensor=tensor, OutputTensor=tensor)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run_kernel(desc, {"InputTensor": x}, Arithmetic("directml"), get_engine(), KernelState()), 1 / (1 + np.exp(-x)))
    np.testing.assert_array_equal(run_kernel(desc, {"InputTensor": x}, Arithmetic("onnxruntime"), get_engine(), KernelState()), mlas_logistic(x))


@pytest.mark.host_sensitive
def test_dxdispatch_export_has_the_three_dispatches_in_one_sequence(tmp_path):
    model, _ = qlinear_sigmoid(np.uint8, 0.05, 128, 1 / 256, 0, shape=(2, 3, 4, 5))
    feeds = {"x": np.random.default_rng(4).integers(0, 256, (2, 3, 4, 5), dtype=np.uint8)}
    made = dxdispatch.export(model, str(tmp_path / "out"), feeds, arithmetic="onnxruntime")
    assert len(made.sequences) == 1
    dispatched = [made.model["dispatchables"][c["dispatchable"]]["type"] for c in made.model["commands"] if c["type"] == "dispatch"]
    assert dispatched == OPERATORS
    assert json.loads((Path(tmp_path) / "out" / "model.json").read_text()) == made.model
    replayed = dxdispatch.load(str(tmp_path / "out")).run(arithmetic="onnxruntime")
    np.testing.assert_array_equal(replayed["y"], cpu_session(model).run(None, feeds)[0], strict=True)


@pytest.mark.host_sensitive
def test_compare_per_node_runs_the_three_together():
    from dml_ep.conformance.compare import compare_model

    model, _ = qlinear_sigmoid(np.uint8, 0.05, 128, 1 / 256, 0)
    report = compare_model(model, {"x": every_code(np.uint8)}, arithmetic="onnxruntime", per_node=True)
    dequantize, sigmoid, quantize = report.nodes
    assert dequantize.isolated is None and sigmoid.isolated is None
    assert quantize.isolated is not None and quantize.isolated.differing == 0


@pytest.mark.host_sensitive
def test_split_where_x_rank_is_unknown_before_a_run():
    """x reshaped to a shape fed at run time (of unknown length): with scalar parameters the node is
    still split, its parts planned from the shapes of the run."""
    u8 = TensorProto.UINT8
    scalars = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8), "ys": np.array(1 / 256, np.float32), "yz": np.array(0, np.uint8)}
    nodes = [helper.make_node("Reshape", ["a", "shape"], ["t"], name="reshape"),
             helper.make_node("QLinearSigmoid", ["t", "s", "z", "ys", "yz"], ["y"], domain="com.microsoft", name="qsig")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", u8, (4, 64)), helper.make_tensor_value_info("shape", TensorProto.INT64, [None])],
                              [helper.make_tensor_value_info("y", u8, None)], [numpy_helper.from_array(v, n) for n, v in scalars.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    plan = plan_model(model)
    assert [n.op_type for n in plan.pending] == ["DequantizeLinear", "DmlSigmoid", "QuantizeLinear"]
    feeds = {"a": every_code(np.uint8), "shape": np.array([2, 8, 16], np.int64)}
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0], strict=True)
    reshape, *parts = session.executor.plan.dml_nodes  # the uint8 Reshape too, planned from the run's shape
    assert reshape.operator == "DML_OPERATOR_ELEMENT_WISE_IDENTITY" and [e.operator for e in parts] == OPERATORS
