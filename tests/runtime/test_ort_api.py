"""The rest of onnxruntime's Python API that scripts use (IOBinding, run_async, profiling, the
fallback switches, the module's enums and logger settings): one script, written for onnxruntime,
runs with ``onnxruntime`` and with ``dml_ep`` and gets the same answers and the same error types.

The model is float with small integer weights and inputs, so that every sum is exact in float32
whatever its order: dml_ep's DirectML convolution and onnxruntime's give equal bits on any host.
Its Mod and Softsign nodes fall back to the CPU EP (dml_ep models no DirectML operator for them).
"""

from __future__ import annotations

import gc
import json
import re
import threading
import time

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.runtime import profiling

SHAPE = [1, 2, 4, 4]
PROFILE_NAME = re.compile(r"api_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{3}\.json")
EVENT_KEYS = {"cat", "pid", "tid", "dur", "ts", "ph", "name", "args"}


@pytest.fixture
def model_path(tmp_path, monkeypatch):
    """Conv (+ Relu) on DirectML, Mod and Softsign on the CPU EP; the working directory is tmp_path, where profiles go."""
    monkeypatch.chdir(tmp_path)
    weight = numpy_helper.from_array(np.arange(-8, 8, dtype=np.float32).reshape(2, 2, 2, 2), "w")
    three = numpy_helper.from_array(np.array(3, np.float32), "three")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Mod", ["r", "three"], ["y"], name="mod", fmod=1), helper.make_node("Softsign", ["r"], ["z"], name="softsign")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2, 3, 3]) for name in ("y", "z")],
                              [weight, three])
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return str(path)


def raised(call):
    """The exception ``call`` raises (None if none)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001  the test compares the types
        return error
    return None


def onnxruntime_script(ort, path: str) -> dict:
    """What a user's onnxruntime script does with these APIs; ``ort`` is onnxruntime or dml_ep."""
    ort.set_default_logger_severity(3)
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = True
    options.profile_file_prefix = "api"
    before = time.time_ns()
    session = ort.InferenceSession(path, options, providers=ort.get_available_providers())
    after = time.time_ns()
    session.disable_fallback()
    x = (np.arange(32, dtype=np.float32) - 16).reshape(SHAPE)

    binding = session.io_binding()
    binding.bind_cpu_input("x", x)
    y = np.full((1, 2, 3, 3), -1, np.float32)  # preallocated: the run writes here
    binding.bind_output("y", "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
    binding.bind_output("z")
    binding.synchronize_inputs()
    session.run_with_iobinding(binding)
    binding.synchronize_outputs()
    bound = binding.copy_outputs_to_cpu()
    in_place = binding.get_outputs()[0].data_ptr() == y.ctypes.data

    raw = x * 2  # bound by its address, read at the run: a change after binding is seen
    binding.clear_binding_inputs()
    binding.bind_input("x", "cpu", 0, np.float32, SHAPE, raw.ctypes.data)
    raw += 1
    binding.clear_binding_outputs()
    binding.bind_output("z")
    session.run_with_iobinding(binding)
    from_pointer = [value.numpy() for value in binding.get_outputs()]

    done, called = threading.Event(), {}

    def callback(results, user_data, err):
        called.update(results=results, user_data=user_data, err=err, thread=threading.current_thread())
        done.set()

    session.run_async(["z", "y"], {"x": x}, callback, {"user": "data"})
    assert done.wait(60)
    async_call = dict(called)
    done.clear()
    session.run_async(["nope"], {"x": x}, callback, None)
    assert done.wait(60)
    async_failure = dict(called)

    unknown_output = session.io_binding()
    unknown_output.bind_cpu_input("x", x)
    unknown_output.bind_output("nope")
    errors = {
        "wrong device": raised(lambda: session.io_binding().bind_input("x", "cuda", 0, np.float32, SHAPE, x.ctypes.data)),
        "unknown input": raised(lambda: session.io_binding().bind_cpu_input("nope", x)),
        "unknown output": raised(lambda: session.run_with_iobinding(unknown_output)),
        "nothing bound": raised(lambda: session.run_with_iobinding(session.io_binding())),
        "str output names": raised(lambda: session.run("y", {"x": x})),
        "async str output names": raised(lambda: session.run_async("y", {"x": x}, callback, None)),
        "async missing input": raised(lambda: session.run_async(None, {}, callback, None)),
    }
    start_ns = session.get_profiling_start_time_ns()
    profile = session.end_profiling()
    with open(profile) as f:
        events = json.load(f)
    return {
        "y": y, "bound": bound, "in_place": in_place, "from_pointer": from_pointer,
        "async": async_call, "async failure": async_failure, "errors": errors,
        "start in session creation": before <= start_ns <= after, "profile": profile, "events": events,
        "profile again": session.end_profiling(), "fallback switch": session.enable_fallback(),
    }


@pytest.mark.host_sensitive
def test_an_onnxruntime_script_of_the_wider_api_runs_unchanged(model_path):
    ours, theirs = onnxruntime_script(dml_ep, model_path), onnxruntime_script(onnxruntime, model_path)
    np.testing.assert_array_equal(ours["y"], theirs["y"])
    assert ours["in_place"] and theirs["in_place"]
    for key in ("bound", "from_pointer"):
        assert len(ours[key]) == len(theirs[key])
        for mine, reference in zip(ours[key], theirs[key]):
            np.testing.assert_array_equal(mine, reference)

    for key in ("async", "async failure"):
        mine, reference = ours[key], theirs[key]
        assert (mine["user_data"], bool(mine["err"])) == (reference["user_data"], bool(reference["err"])), key
        assert mine["thread"] is not threading.main_thread() and reference["thread"] is not threading.main_thread()
        assert [type(r) for r in mine["results"]] == [type(r) for r in reference["results"]], key
        for result, expected in zip(mine["results"], reference["results"]):
            np.testing.assert_array_equal(result, expected)
    assert ours["async"]["err"] == "" and ours["async failure"]["results"] == []

    for what, error in theirs["errors"].items():
        assert error is not None, what
        assert isinstance(ours["errors"][what], type(error)), (what, ours["errors"][what], error)
    assert isinstance(ours["errors"]["wrong device"], dml_ep.DmlEpError)

    assert ours["start in session creation"] and theirs["start in session creation"]
    assert PROFILE_NAME.fullmatch(ours["profile"]) and PROFILE_NAME.fullmatch(theirs["profile"])
    assert ours["profile"] != theirs["profile"]  # two files, one each
    for events in (ours["events"], theirs["events"]):
        assert isinstance(events, list) and all(set(event) == EVENT_KEYS and event["ph"] == "X" for event in events)
        assert {event["cat"] for event in events} == {"Session", "Node"}
        assert all({"op_name", "provider"} <= event["args"].keys() for event in events if event["cat"] == "Node")
    session_events = [[event["name"] for event in events if event["cat"] == "Session"] for events in (ours["events"], theirs["events"])]
    assert session_events[0][:2] == session_events[1][:2] == ["model_loading_uri", "session_initialization"]
    assert session_events[0].count("model_run") == session_events[1].count("model_run") > 0
    assert ours["profile again"] == theirs["profile again"] == ""
    assert ours["fallback switch"] is theirs["fallback switch"] is None


def test_the_profile_says_where_each_node_ran(model_path):
    options = dml_ep.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = "api"
    session = dml_ep.InferenceSession(model_path, options)
    session.run(None, {"x": np.ones(SHAPE, np.float32)})
    with open(session.end_profiling()) as f:
        nodes = [event for event in json.load(f) if event["cat"] == "Node"]
    conv, fallback = nodes
    assert conv["name"] == "conv_kernel_time" and conv["args"]["provider"] == "DmlExecutionProvider"
    assert conv["args"]["dml_operator"] == "DML_OPERATOR_CONVOLUTION"
    assert conv["args"]["dml_fused_activation"] == "DML_OPERATOR_ACTIVATION_RELU"  # the DML EP fuses the Relu into the Conv
    assert conv["args"]["model_nodes"] == ["conv", "relu"] and conv["args"]["feature_level"].startswith("DML_FEATURE_LEVEL_")
    assert conv["args"]["input_type_shape"] == [{"float": SHAPE}, {"float": [2, 2, 2, 2]}]
    assert conv["args"]["output_type_shape"] == [{"float": [1, 2, 3, 3]}]
    # Mod and Softsign run as one onnxruntime session: one event naming both
    assert fallback["args"]["provider"] == "CPUExecutionProvider" and fallback["args"]["partition"] == ["mod", "softsign"]
    assert "Mod" in fallback["args"]["fallback_reason"]
    assert all(event["dur"] >= 0 and event["ts"] >= 0 for event in nodes)


def test_an_existing_file_is_never_replaced(model_path, tmp_path):
    options = dml_ep.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = "api"
    session = dml_ep.InferenceSession(model_path, options)
    taken = tmp_path / profiling.profile_path("api", session.get_profiling_start_time_ns())
    taken.write_text("someone else's")
    written = session.end_profiling()
    assert taken.read_text() == "someone else's"
    assert written != taken.name and json.loads((tmp_path / written).read_text())[0]["name"] == "model_loading_uri"


@pytest.mark.host_sensitive
@pytest.mark.parametrize("ort", [onnxruntime, dml_ep], ids=["onnxruntime", "dml_ep"])
def test_a_profile_is_written_when_the_session_goes(ort, model_path, tmp_path):
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = "api"
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"] if ort is onnxruntime else None)
    session.run(None, {"x": np.ones(SHAPE, np.float32)})
    del session
    gc.collect()
    assert [path.name for path in tmp_path.glob("api_*.json") if PROFILE_NAME.fullmatch(path.name)] != []


def test_without_profiling_nothing_is_timed_or_written(model_path, tmp_path):
    session = dml_ep.InferenceSession(model_path)
    session.run(None, {"x": np.ones(SHAPE, np.float32)})
    assert session.executor.step_hook is None
    assert session.end_profiling() == "" and session.get_profiling_start_time_ns() == 0
    assert list(tmp_path.glob("*.json")) == []


@pytest.mark.host_sensitive
@pytest.mark.parametrize("output_names", [("y",), ["z", "y"], None, [], np.array(["y"])])
def test_output_names_as_onnxruntime_takes_them(model_path, output_names):
    x = np.ones(SHAPE, np.float32)
    ours = dml_ep.InferenceSession(model_path).run(output_names, {"x": x})
    theirs = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"]).run(output_names, {"x": x})
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_array_equal(mine, reference)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("output_names", ["y", b"y", ["y", 1], {"y": 1}, 3])
def test_output_names_onnxruntime_refuses(model_path, output_names):
    x = np.ones(SHAPE, np.float32)
    with pytest.raises(TypeError):
        onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"]).run(output_names, {"x": x})
    with pytest.raises(TypeError, match=r"^run\(\): incompatible function arguments"):
        dml_ep.InferenceSession(model_path).run(output_names, {"x": x})


def test_a_binding_refuses_a_buffer_of_another_shape_and_another_session(model_path):
    session = dml_ep.InferenceSession(model_path)
    binding = session.io_binding()
    binding.bind_cpu_input("x", np.ones(SHAPE, np.float32))
    y = np.zeros((9,), np.float32)
    binding.bind_output("y", "cpu", 0, np.float32, [9], y.ctypes.data)
    with pytest.raises(RuntimeError, match="bound to a buffer of float32 \\[9\\]"):  # onnxruntime: "Invalid rank for output: y"
        session.run_with_iobinding(binding)
    assert binding.get_outputs() == [] and not y.any()
    with pytest.raises(ValueError, match="the session that created it"):  # onnxruntime's ValueError
        dml_ep.InferenceSession(model_path).run_with_iobinding(binding)
    with pytest.raises(ValueError, match="`element_type` and `shape`"):
        binding.bind_output("y", "cpu", 0, None, None, y.ctypes.data)


def test_the_module_offers_what_scripts_take_from_onnxruntime():
    for name in ("IOBinding", "ExecutionMode", "ExecutionOrder", "set_default_logger_severity", "set_default_logger_verbosity",
                 "get_version_string", "get_build_info", "GraphOptimizationLevel", "SessionOptions", "RunOptions", "OrtValue"):
        assert hasattr(onnxruntime, name) and name in dml_ep.__all__ and hasattr(dml_ep, name), name
    assert dml_ep.get_version_string() == onnxruntime.get_version_string()
    for method in ("io_binding", "run_with_iobinding", "run_async", "get_profiling_start_time_ns", "end_profiling",
                   "disable_fallback", "enable_fallback", "run_with_ort_values", "set_providers"):
        assert callable(getattr(onnxruntime.InferenceSession, method)) and callable(getattr(dml_ep.InferenceSession, method)), method


def test_a_profile_that_cannot_be_written_fails_when_the_session_is_made(model_path, tmp_path):
    options = dml_ep.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "missing" / "api")  # onnxruntime profiles, then writes no file
    with pytest.raises(OSError, match="no such directory"):
        dml_ep.InferenceSession(model_path, options)
