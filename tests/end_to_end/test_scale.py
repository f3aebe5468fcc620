"""Planning and session preparation grow linearly with the number of nodes (issue 17 point 10).

Each test times the same work at N and 4N nodes, on scripts/scale_bench.py's graphs: linear code
takes about 4 times as long, quadratic code about 16. The bound of 8 tells them apart on any
machine, where an absolute time would not.
"""

import time

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.planning.planner import Planner
from onnx_builders import scale_bench

LINEAR = 8  # largest time ratio accepted for 4x the nodes


def _wall_time(work):
    """``work`` as a function that returns how long it took."""

    def timed(model) -> float:
        start = time.perf_counter()
        work(model)
        return time.perf_counter() - start

    return timed


def _growth(build, timed, n: int) -> float:
    """How many times longer ``timed`` (which returns the seconds it measured) takes on
    ``build(4 * n)`` than on ``build(n)``: the best of five runs each, after a warm-up, so that a
    stray pause does not count, taken in turns, so that a slow spell of a virtual machine (its speed
    drifts by 2x) slows both sizes alike (three runs of one size after three of the other measured
    4.5x-5.4x here, and past 8x twice in a day)."""
    small, large = build(n), build(4 * n)
    timed(build(10))
    large_times, small_times = [], []
    for _ in range(5):
        large_times.append(timed(large))
        small_times.append(timed(small))
    return min(large_times) / min(small_times)


def test_planning_a_weight_dq_shared_by_many_conv_groups_is_linear():
    # EnsureUniqueDQForNodeUnit copies the weight DQ once per Conv, then every group is rewritten.
    growth = _growth(scale_bench.shared_dq, _wall_time(Planner), 400)
    assert growth < LINEAR, f"planning 4x the nodes took {growth:.1f}x as long"


def test_preparing_a_session_of_chained_fallback_nodes_is_linear():
    growth = _growth(scale_bench.fallback_chain, _wall_time(dml_ep.InferenceSession), 500)
    assert growth < LINEAR, f"preparing 4x the nodes took {growth:.1f}x as long"


def test_running_a_graph_of_many_outputs_is_linear(monkeypatch):
    # run checked each requested output name against a list of all of them. onnxruntime's own run
    # of thousands of outputs grows faster than 4x for 4x the outputs on some hosts (7.5x from 1,500
    # to 6,000 here): dml_ep's time outside it is what is measured.
    import onnxruntime

    feeds = {"x": np.ones((1, 16), np.float32)}
    sessions, inside = {}, [0.0]
    ort_run = onnxruntime.InferenceSession.run

    def timed_run(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return ort_run(self, *args, **kwargs)
        finally:
            inside[0] += time.perf_counter() - start

    monkeypatch.setattr(onnxruntime.InferenceSession, "run", timed_run)

    def outside_onnxruntime(model) -> float:
        if id(model) not in sessions:
            sessions[id(model)] = dml_ep.InferenceSession(model)
        inside[0] = 0.0
        start = time.perf_counter()
        sessions[id(model)].run(None, feeds)
        return time.perf_counter() - start - inside[0]

    growth = _growth(scale_bench.fallback_wide, outside_onnxruntime, 1500)
    assert growth < LINEAR, f"running 4x the outputs took {growth:.1f}x as long"


def test_the_collector_is_paused_only_while_a_session_is_made_or_runs(monkeypatch):
    """Sessions are made and run with Python's cyclic GC paused (dml_ep.core.memory.paused_gc): it is on again
    after, also when the model is refused, and a host program that turned it off keeps it off."""
    import gc

    import dml_ep.runtime.executor
    import dml_ep.runtime.session

    during = []
    planner = dml_ep.runtime.session.Planner
    monkeypatch.setattr(dml_ep.runtime.session, "Planner", lambda *a, **k: during.append(gc.isenabled()) or planner(*a, **k))
    model = scale_bench.fallback_chain(5).SerializeToString()
    session = dml_ep.InferenceSession(model)
    assert during == [False] and gc.isenabled()
    run = dml_ep.runtime.executor.Executor.run_partition  # and while it runs (walking a large plan again at every collection)
    monkeypatch.setattr(dml_ep.runtime.executor.Executor, "run_partition", lambda *a: during.append(gc.isenabled()) or run(*a))
    session.run(None, {"x": np.ones((1, 16), np.float32)})
    assert during == [False, False] and gc.isenabled()
    with pytest.raises(dml_ep.core.errors.ModelError):
        dml_ep.InferenceSession(b"not a model")
    assert gc.isenabled()
    gc.disable()
    try:
        dml_ep.InferenceSession(model)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_onnxruntime_loads_a_model_again_only_when_a_pass_edited_it(monkeypatch):
    """The planner's first load of the model (its validation and element types) also types the
    graph it plans when no pass changed it; a QDQ model, which the passes rewrite, is loaded again."""
    import dml_ep.ort.inference

    loads = []
    loaded_graph = dml_ep.ort.inference.loaded_graph
    monkeypatch.setattr(dml_ep.ort.inference, "loaded_graph", lambda model: loads.append(len(onnx.load_from_string(model).graph.node)) or loaded_graph(model))
    Planner(scale_bench.fallback_chain(6))
    assert loads == [6]
    loads.clear()
    model = scale_bench.shared_dq(15)
    planner = Planner(model)
    assert len(loads) == 2 and loads[0] == len(model.graph.node) and len(planner.nodes) < loads[0] == 15


@pytest.mark.host_sensitive  # onnxruntime's u8s8 products saturate on AVX2 hosts: the arithmetic follows the host
def test_nodes_reading_one_weight_share_one_prepared_kernel(monkeypatch):
    """Entries of one signature (the same desc on the same constants: every QLinearConv of
    shared_dq reads the one weight) share their kernel state, so the weight's product and the
    requantize step are made once, not once per node; each node still reads its own input."""
    import onnxruntime

    import dml_ep.numerics.kernels.quantized_product as quantized_product

    made = []
    init = quantized_product.PreparedQuantizedProduct.__init__
    monkeypatch.setattr(quantized_product.PreparedQuantizedProduct, "__init__", lambda self, *a: made.append(self) or init(self, *a))
    session = dml_ep.InferenceSession(scale_bench.shared_dq(15), arithmetic="onnxruntime")
    convs = [e for e in session.plan.dml_nodes if e.operator == "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION"]
    states = [session.executor.kernel_state(e) for e in convs]
    assert len(convs) == 4 and len(made) == 1 and all(state is states[0] for state in states)

    x = np.random.default_rng(1).standard_normal((1, 4, 4, 4)).astype(np.float32)
    expected = onnxruntime.InferenceSession(scale_bench.shared_dq(15).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected.run(None, {"x": x})[0])


@pytest.mark.native_children  # its child processes run on the real CPU under qemu-user
def test_a_session_without_integer_products_loads_no_openssl(tmp_path):
    """hashlib loads OpenSSL (3.5 MB of a 10,000-node chain's peak memory, scripts/scale_bench.py):
    only the integer engines' weight digests need it, so a model without integer products never
    imports it."""
    import subprocess
    import sys

    onnx.save(scale_bench.fallback_chain(6), tmp_path / "chain.onnx")
    code = ("import sys, numpy as np, dml_ep; s = dml_ep.InferenceSession(sys.argv[1]); "
            "s.run(None, {'x': np.ones((1, 16), np.float32)}); print('_hashlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "chain.onnx")], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False"], result.stderr
