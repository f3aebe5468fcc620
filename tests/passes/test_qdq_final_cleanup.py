"""QDQFinalCleanupTransformer (``dml_ep.passes.qdq_final_cleanup``, onnxruntime's
qdq_final_cleanup.cc): a DQ -> Q pair with the same constant parameters goes, for every EP, unless
the Q makes a graph output that other nodes also read.
"""

from __future__ import annotations

from onnx_builders import QDQ, cleanup_model, ops, rewrite


def test_final_cleanup_removes_dq_q_pair():
    """QDQFinalCleanupTransformer (always, for every EP): DQ -> Q with the same constant scalar
    parameters is an identity; readers of the Q's output read the DQ's input instead."""
    graph = rewrite(cleanup_model())
    assert ops(graph) == [("DequantizeLinear", ""), ("Relu", "")]
    assert graph.nodes[0].name == "t_dq" and graph.nodes[0].input[0] == "x"


def test_final_cleanup_keeps_pair_with_different_parameters():
    """IsQDQPairSupported fails for different scales: the DQ -> Q pair requantizes, and stays."""
    graph = rewrite(cleanup_model(q_scale=0.06))
    assert ops(graph) == [*QDQ, ("DequantizeLinear", ""), ("Relu", "")]


def test_final_cleanup_graph_output_of_a_graph_input_becomes_identity():
    """When the Q makes a graph output and the DQ reads a graph input, an Identity writes it."""
    graph = rewrite(cleanup_model(q_is_output=True))
    assert ops(graph) == [("Identity", "")]
    assert list(graph.nodes[0].input) == ["x"] and list(graph.nodes[0].output) == ["t"]


def test_final_cleanup_keeps_graph_output_q_with_readers():
    """A Q that makes a graph output and also has readers is left alone."""
    graph = rewrite(cleanup_model(q_is_output=True, q_other_reader=True))
    assert ops(graph) == [*QDQ, ("DequantizeLinear", ""), ("Relu", "")]
