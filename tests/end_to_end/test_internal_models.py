"""Every model dml_ep hands to onnxruntime loads in the oldest onnxruntime dml_ep supports (issue 17).

onnx stamps a model it makes with its own newest IR version, and onnxruntime refuses one newer than
the onnx it was built on ("Unsupported model IR version"): so a model dml_ep builds itself (the
u8s8 probe, the engines' integer products, the backend's one-node models) must carry an IR version
and opsets that onnxruntime 1.17, pyproject's lower bound, loads. Measured with onnxruntime 1.17.3
(built on onnx 1.15): "max supported IR version: 9", and for opset 21 "Current official support
for domain ai.onnx is till opset 20".

The recorder (conftest's ``handed_to_onnxruntime``) sees every model onnxruntime loads; the models dml_ep derives
from the user's keep the user's IR version and opsets, and the shipped models (IR version 8,
opset 17) are within the limits, so anything recorded beyond them is a model of dml_ep's own,
including one added later.
"""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import dml_ep
import dml_ep.interop.backend
from dml_ep.conformance.compare import compare_model
from dml_ep.core import graph
from dml_ep.numerics import arithmetic, engines
from dml_ep.runtime.inputs import random_inputs

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "models").glob("*.onnx"))
# onnxruntime 1.17's limits (see the module docstring); com.microsoft has only version 1.
OLDEST_MAX_IR_VERSION = 9
OLDEST_MAX_OPSET = {"": 20, "ai.onnx": 20, "com.microsoft": 1}


def too_new(model: onnx.ModelProto) -> list[str]:
    """What in ``model`` onnxruntime 1.17 refuses."""
    problems = []
    if model.ir_version > OLDEST_MAX_IR_VERSION:
        problems.append(f"IR version {model.ir_version}")
    for opset in model.opset_import:
        limit = OLDEST_MAX_OPSET.get(opset.domain)
        if limit is not None and opset.version > limit:
            problems.append(f"opset {opset.domain or 'ai.onnx'} {opset.version}")
    return problems


def assert_loadable(recorded: list[onnx.ModelProto]) -> None:
    refused = {m.graph.name: too_new(m) for m in recorded if too_new(m)}
    assert not refused, f"models onnxruntime 1.17 refuses: {refused}"


def test_the_internal_ir_version_is_within_the_oldest_onnxruntime():
    assert graph.INTERNAL_IR_VERSION <= OLDEST_MAX_IR_VERSION
    assert graph.INTERNAL_MAX_OPSET <= OLDEST_MAX_OPSET[""]


@pytest.mark.host_insensitive("checks which models reach onnxruntime, not the probe's answer")
def test_u8s8_probe(handed_to_onnxruntime):
    arithmetic.host_saturates_u8s8()
    assert [m.graph.name for m in handed_to_onnxruntime] == ["u8s8_probe"]
    assert_loadable(handed_to_onnxruntime)


@pytest.mark.parametrize("name", ["small_cnn.onnx", "mlp.onnx"])  # QLinearConv, QLinearMatMul
def test_engine_sessions(handed_to_onnxruntime, name):
    path = SHIPPED[[p.name for p in SHIPPED].index(name)]
    dml_ep.InferenceSession(path, engine="onnxruntime").run(None, random_inputs(onnx.load(path)))
    assert "integer_product" in {m.graph.name for m in handed_to_onnxruntime}
    assert_loadable(handed_to_onnxruntime)


def test_backend_run_node(handed_to_onnxruntime):
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a = np.ones((2, 3), np.float32)
    dml_ep.interop.backend.run_node(node, [a, a])
    assert "run_node_Add" in {m.graph.name for m in handed_to_onnxruntime}
    assert_loadable(handed_to_onnxruntime)


@pytest.mark.host_insensitive("checks that every model dml_ep makes loads, not the comparisons' values")
def test_every_model_handed_to_onnxruntime(handed_to_onnxruntime):
    """The shipped models through both engines, both arithmetics and compare's paths (dml_ep
    against each reference, per node; onnxruntime as the candidate): whatever dml_ep makes on the
    way, a model onnxruntime 1.17 loads leads to nothing it refuses."""
    for path in SHIPPED:
        model = onnx.load(path)
        assert not too_new(model), f"{path.name} itself is beyond onnxruntime 1.17"
        feeds = random_inputs(model)
        for engine in engines.ENGINES:
            for mode in arithmetic.ARITHMETICS:
                dml_ep.InferenceSession(path, engine=engine, arithmetic=mode).run(None, feeds)
        for reference in ("ort", "ort-exact", "ort-unfused"):
            compare_model(path, feeds, reference=reference, per_node=True)
        compare_model(path, feeds, candidate="ort-exact", reference="ort")
        dml_ep.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    made = {m.graph.name for m in handed_to_onnxruntime}
    assert {"u8s8_probe", "integer_product"} <= made  # the recorder saw dml_ep's own models
    products = {node.op_type for m in handed_to_onnxruntime if m.graph.name == "integer_product" for node in m.graph.node}
    assert products == {"MatMulInteger"}
    assert_loadable(handed_to_onnxruntime)
