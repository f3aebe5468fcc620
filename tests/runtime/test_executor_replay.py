"""A run on feeds of the last run's shapes replays its steps without planning (dml_ep.planning.steps):
the same outputs, errors and plan as a run planned afresh, and values freed as early."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.errors import ShapeError
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from onnx_builders import make, symbolic_conv


def run_both(model, session, feeds):
    """dml_ep's outputs, checked against onnxruntime's for the same feeds."""
    ours = session.run(None, feeds)
    for a, b in zip(ours, cpu_session(model).run(None, feeds)):
        np.testing.assert_array_equal(a, b)
        assert a.shape == b.shape
    return ours


@pytest.mark.host_sensitive
def test_a_replayed_run_gives_the_planned_runs_outputs_plan_and_errors():
    model = symbolic_conv()
    session = dml_ep.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    small, large = ((1, 2, 5, 5), (2, 2, 7, 6))
    for shape in (small, small, large, large, small):  # each shape planned once, then replayed
        run_both(model, session, {"in0": rng.integers(0, 256, shape, dtype=np.uint8)})
        (entry,) = session.plan.entries
        assert isinstance(entry, DmlNode) and entry.desc.InputTensor.Sizes == shape
    assert session.executor._trace is session.executor._last_run  # the last run was replayed
    with pytest.raises(ShapeError, match="kernel spans 3 but the padded input is only 2"):
        session.run(None, {"in0": np.zeros((1, 2, 2, 5), np.uint8)})
    run_both(model, session, {"in0": rng.integers(0, 256, small, dtype=np.uint8)})
    assert session.plan.entries[0].desc.InputTensor.Sizes == small


@pytest.mark.host_sensitive
def test_a_run_on_the_last_runs_shapes_plans_nothing(monkeypatch):
    """Also with a graph output that is an initializer (not a feed, though in the run's values)."""
    info = helper.make_tensor_value_info
    model = make([helper.make_node("Relu", ["x"], ["y"])], [info("x", TensorProto.FLOAT, [2])],
                 [info("y", TensorProto.FLOAT, [2]), info("c", TensorProto.FLOAT, [3])], [numpy_helper.from_array(np.ones(3, np.float32), "c")])
    session = dml_ep.InferenceSession(model.SerializeToString())
    feeds = {"x": np.array([-1, 2], np.float32)}
    run_both(model, session, feeds)
    planned = []
    monkeypatch.setattr(session.planner, "entry", lambda *args: planned.append(args))
    run_both(model, session, feeds)
    assert planned == []


@pytest.mark.host_sensitive
def test_the_first_run_on_the_declared_shapes_replays_the_plan_made_at_load(monkeypatch):
    """The plan made at load is the first run's steps where every shape is static: no node is planned
    again. With a symbolic dimension (taken as 1 at load) the first run plans."""
    info = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Softplus", ["a"], ["s"]),
             helper.make_node("Softsign", ["s"], ["n"]), helper.make_node("Add", ["n", "c"], ["y"])]
    constant = [numpy_helper.from_array(np.float32([0.5, -1, 2]), "c")]
    feeds = {"x": np.float32([[1, -2, 3], [0.25, 4, -8]])}
    for dims, replays in (([2, 3], True), (["batch", 3], False)):
        model = make(nodes, [info("x", TensorProto.FLOAT, dims)], [info("y", TensorProto.FLOAT, None)], constant)
        session = dml_ep.InferenceSession(model.SerializeToString())
        loaded = session.plan.entries
        planned = []
        entry = session.planner.entry
        monkeypatch.setattr(session.planner, "entry", lambda *args: planned.append(args) or entry(*args))
        run_both(model, session, feeds)
        assert (planned == []) == replays
        assert [type(e) for e in session.plan.entries] == [DmlNode, *([type(loaded[1])] * 2), DmlNode]
        if replays:
            assert all(a is b for a, b in zip(session.plan.entries, loaded))


def test_a_replayed_run_frees_what_a_planned_run_frees():
    """Only the graph outputs are left after either run: each intermediate goes after its last reader."""
    model = make([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    executor = dml_ep.InferenceSession(model.SerializeToString()).executor
    feeds = {"x": np.arange(-3, 3, dtype=np.float32).reshape(2, 3)}
    planned, replayed = executor.run(feeds), executor.run(feeds)
    assert planned.keys() == replayed.keys() == {"y"}
    np.testing.assert_array_equal(planned["y"], replayed["y"])


def compressed_then_reshaped():
    """A fallback node whose output's shape depends on data (Compress), read by a DirectML one (Reshape of uint8)."""
    info = helper.make_tensor_value_info
    nodes = [helper.make_node("Compress", ["d", "keep"], ["c"], axis=0), helper.make_node("Reshape", ["c", "row"], ["y"])]
    return make(nodes, [info("d", TensorProto.UINT8, [6]), info("keep", TensorProto.BOOL, [6])], [info("y", TensorProto.UINT8, None)],
                [numpy_helper.from_array(np.array([1, -1], np.int64), "row")])


def reshaped_by_a_fed_shape():
    """A DirectML node planned from a run's data: a Reshape to a shape the caller feeds."""
    info = helper.make_tensor_value_info
    return make([helper.make_node("Reshape", ["d", "shape"], ["y"])],
                [info("d", TensorProto.UINT8, [6]), info("shape", TensorProto.INT64, [2])], [info("y", TensorProto.UINT8, None)])


@pytest.mark.host_sensitive
@pytest.mark.parametrize(("model", "first", "second"), [
    (compressed_then_reshaped(), {"keep": np.array([1, 1, 1, 0, 0, 0], bool)}, {"keep": np.array([1, 0, 1, 1, 1, 0], bool)}),
    (reshaped_by_a_fed_shape(), {"shape": np.array([1, 6], np.int64)}, {"shape": np.array([3, 2], np.int64)}),
], ids=["fallback-output", "cpu-input"])
def test_shapes_that_follow_data_are_planned_at_every_run(model, first, second):
    session = dml_ep.InferenceSession(model.SerializeToString())
    d = {"d": np.arange(10, 16, dtype=np.uint8)}
    outputs = [run_both(model, session, {**d, **feeds})[0].shape for feeds in (first, first, second, first)]
    assert outputs[1] == outputs[0] == outputs[3] != outputs[2]
    reshape = session.plan.entries[-1]
    assert isinstance(reshape, DmlNode) and reshape.output_shape == outputs[3]
    assert session.executor._shapes_from_data


def test_a_node_of_constants_runs_once_and_its_output_stays_whole(monkeypatch):
    """A weight's DequantizeLinear (onnxruntime does not fold it) reads only constants: its kernel
    runs at the first run only; the graph output handed out is a writeable copy, so that a caller
    writing into it cannot change the next run's."""
    from dml_ep.runtime import executor

    weight = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["y"])], "constant_dq", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.int8(1), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    calls = []
    original = executor.run_kernel
    monkeypatch.setattr(executor, "run_kernel", lambda *args: calls.append(1) or original(*args))
    session = dml_ep.InferenceSession(model)
    first = session.run(None, {})[0]
    first[...] = 7  # the caller's array
    second = session.run(None, {})[0]
    np.testing.assert_array_equal(second, (weight.astype(np.float32) - 1) * 0.5)
    assert len(calls) == 1 and second.flags.writeable
