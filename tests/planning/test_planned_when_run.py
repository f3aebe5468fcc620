"""Nodes whose required CPU inputs a run computes: "planned-when-run" before a run, modelled in it.

The real EP runs them on DirectML (it makes the kernel when it sees the value); so does dml_ep once
the run gives the value: a Reshape by a computed shape, and a MatMulNBits reading that Reshape.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import dml_ep
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from dml_ep.planning.planner import plan_model
from dml_ep.reports.node_table import plan_rows
from onnx_builders import matmul_nbits

K, N, BLOCK = 32, 8, 16


def reshaped_matmul_nbits():
    """x [2, 4, 16] -> Reshape by the graph input shape -> MatMulNBits (K 32): A's dimensions known only in a run."""
    model = matmul_nbits(K, N, BLOCK)
    graph = model.graph
    graph.node.insert(0, helper.make_node("Reshape", ["x", "shape"], ["a"], name="reshape"))
    del graph.input[:]
    graph.input.extend([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 16]), helper.make_tensor_value_info("shape", TensorProto.INT64, [3])])
    return model


def feeds():
    x = np.random.default_rng(2).standard_normal((2, 4, 16)).astype(np.float32)
    return {"x": x, "shape": np.array([2, 2, K], np.int64)}


def test_before_a_run_the_reshape_is_planned_when_run_not_not_modelled():
    rows = {row["op_type"]: row for row in plan_rows(plan_model(reshaped_matmul_nbits()))}
    assert (rows["Reshape"]["placement"], rows["Reshape"]["reason_class"]) == ("modelled", "planned-when-run")
    assert "computed at run time" in rows["Reshape"]["reason"]


def test_the_matmul_nbits_after_it_is_split_before_a_run():
    """A's last dimension is K whatever the Reshape computes: DEQUANTIZE and GEMM as the real EP builds them."""
    plan = plan_model(reshaped_matmul_nbits())
    assert [(row["op_type"], row["reason_class"]) for row in plan_rows(plan)] == [("Reshape", "planned-when-run"), ("DmlDequantize", "modelled")]
    assert [node.op_type for node in plan.pending] == ["DmlGemm"]  # its A's shape comes with the run


@pytest.mark.host_sensitive
@pytest.mark.parametrize("arithmetic", ["onnxruntime", "directml"])
def test_in_a_run_all_three_are_directml_operators(arithmetic):
    model = reshaped_matmul_nbits()
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic)
    ours = session.run(None, feeds())[0]
    entries = session.executor.plan.entries
    assert [entry.operator for entry in entries] == ["DML_OPERATOR_ELEMENT_WISE_IDENTITY", "DML_OPERATOR_DEQUANTIZE", "DML_OPERATOR_GEMM"]
    assert all(isinstance(entry, DmlNode) for entry in entries)
    expected = cpu_session(model, threads=1).run(None, feeds())[0]
    assert ours.shape == expected.shape == (2, 2, N)
    if arithmetic == "onnxruntime":  # bit for bit, as the MatMulNBits the planner splits before a run
        np.testing.assert_array_equal(ours.view(np.int32), expected.view(np.int32))
    else:  # float32 GEMM roundings of an exact product of dequantized weights
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
