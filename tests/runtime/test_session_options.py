"""onnxruntime's SessionOptions shape the graph the DML EP receives, and dml_ep honours them: with
its optimizations off or basic, or with session.disable_quant_qdq=1, onnxruntime leaves QDQ groups
unfused (small_cnn.qdq: 7 Conv and 32 DequantizeLinear, not 7 QLinearConv)."""

from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import dml_ep
from dml_ep.runtime.inputs import random_inputs

MODEL = Path(__file__).resolve().parents[2] / "models" / "small_cnn.qdq.onnx"


def options(level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, **entries):
    made = ort.SessionOptions()
    made.graph_optimization_level = level
    for key, value in entries.items():
        made.add_session_config_entry(key, value)
    return made


def planned_ops(session) -> Counter:
    return Counter(entry.node.op_type for entry in session.plan.entries)


@pytest.mark.parametrize("made", [
    pytest.param(lambda: options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL), id="disable-all"),
    pytest.param(lambda: options(ort.GraphOptimizationLevel.ORT_ENABLE_BASIC), id="basic"),
    pytest.param(lambda: options(**{"session.disable_quant_qdq": "1"}), id="disable-quant-qdq"),
])
def test_qdq_groups_stay_unfused_as_onnxruntime_leaves_them(made):
    ops = planned_ops(dml_ep.InferenceSession(str(MODEL), made()))
    assert ops["QLinearConv"] == 0 and ops["Conv"] == 7
    assert ops["DequantizeLinear"] > 7


def test_default_options_fuse_the_qdq_groups():
    ops = planned_ops(dml_ep.InferenceSession(str(MODEL), options()))
    assert ops["QLinearConv"] == 7 and ops["Conv"] == 0


def test_int8_allowed_entry_reaches_the_qdq_rules():
    """int8 activations: a Conv group becomes QLinearConv only with session.qdqisint8allowed=1."""
    from onnx_builders import S8, conv_model

    model = conv_model(x_type=S8)
    assert planned_ops(dml_ep.InferenceSession(model))["QLinearConv"] == 0
    allowed = dml_ep.InferenceSession(model, options(**{"session.qdqisint8allowed": "1"}))
    assert planned_ops(allowed)["QLinearConv"] == 1


@pytest.mark.host_sensitive
def test_the_cpu_ep_alone_runs_with_the_users_options():
    made = options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    made.intra_op_num_threads = 1
    session = dml_ep.InferenceSession(str(MODEL), made, providers=["CPUExecutionProvider"])
    assert session._cpu_session.get_session_options().graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    feeds = random_inputs(session.model, seed=1)
    theirs = ort.InferenceSession(str(MODEL), made, providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b in zip(session.run(None, feeds), theirs):
        np.testing.assert_array_equal(a, b)
