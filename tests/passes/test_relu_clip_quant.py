"""ReluQuantFusion and ClipQuantFusion (``dml_ep.passes.relu_clip_quant``, onnxruntime's
relu_quantizelinear.cc and clip_quantizelinear.cc): a Relu or Clip before a Q that clamps no more
than the Q goes, for CPU nodes since 1.19 and for every EP before (the rule sets of ``qdq_rules``),
and the Conv group then fuses; where it stays, the Conv's note says why.
"""

from __future__ import annotations

import pytest

from dml_ep.passes import CPU, DML
from onnx_builders import conv_model, names, node, ops, rewrite, unfused


def test_redundant_relu_removed_on_cpu():
    """ReluQuantFusion (L2, CPU nodes only since 1.19): a Relu before a Q whose zero point is the
    type's minimum (uint8 0) clamps nothing the Q does not, so it goes and the Conv group fuses."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0), provider=CPU)
    assert ops(graph) == [("QLinearConv", "")]
    assert graph.origin(graph.nodes[0]).rules == ("ReluQuantFusion", "Conv")
    assert "relu" in names(graph.origin(graph.nodes[0]).nodes)


def test_redundant_relu_kept_on_dml_1_24():
    """Since 1.19 ReluQuantFusion is CPU-only; for a DML node the newest source's GetQDQSelection takes the
    Relu as a redundant clip but IsReplacementConvex fails for DQ -> Conv -> Relu -> Q, so the
    Conv stays unfused."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0))
    assert unfused(graph, "Conv") and ("Relu", "") in ops(graph)


@pytest.mark.parametrize("activation", ["Relu", ("Clip", 0, 6)], ids=["relu", "clip"])
def test_redundant_activation_kept_on_dml_1_24_is_explained(activation):
    """The Conv's note should say what keeps it unfused on DML: the redundant Relu/Clip before its Q,
    which onnxruntime removes (ReluQuantFusion/ClipQuantFusion) for CPU nodes only."""
    graph = rewrite(conv_model(activation=activation, q_scale=0.02, q_zp=0))
    assert unfused(graph, "Conv")
    note = graph.origin(node(graph, "Conv")).note
    assert note and ("Relu" if activation == "Relu" else "Clip") in note, note


def test_redundant_relu_removed_on_dml_1_17():
    """Up to 1.18 (dml_ep's "1.17-1.19") ReluQuantFusion was an L1 rule for every EP."""
    graph = rewrite(conv_model(activation="Relu", q_zp=0), "1.17-1.19")
    assert ops(graph) == [("QLinearConv", "")]


@pytest.mark.parametrize("provider, rule_set", [(CPU, "1.24+"), (DML, "1.24+"), (DML, "1.20-1.23"), (DML, "1.17-1.19")])
def test_relu_with_nonzero_zero_point_kept(provider, rule_set):
    """ReluQuantFusion: zero point 10 means the Q can represent negatives the Relu clamps, so the
    Relu is not redundant on any provider, and the Conv (whose consumer is the Relu) stays unfused."""
    graph = rewrite(conv_model(activation="Relu", q_zp=10), rule_set, provider)
    assert ("Relu", "") in ops(graph) and unfused(graph, "Conv")


@pytest.mark.parametrize("provider, rule_set", [(CPU, "1.24+"), (DML, "1.17-1.19")])
@pytest.mark.parametrize("q_scale, redundant", [(0.02, True), (0.05, False)], ids=["q-range-0..5.1", "q-range-0..12.75"])
def test_clip_removed_when_q_range_is_narrower(provider, rule_set, q_scale, redundant):
    """ClipQuantFusion: Clip(0, 6) goes when the Q's range [s*(0-zp), s*(255-zp)] lies inside
    [0, 6] (scale 0.02: [0, 5.1]); with scale 0.05 ([0, 12.75]) the Clip clamps values the Q keeps."""
    graph = rewrite(conv_model(activation=("Clip", 0, 6), q_scale=q_scale, q_zp=0), rule_set, provider)
    if redundant:
        assert ops(graph) == [("QLinearConv", "")]
        assert graph.origin(graph.nodes[0]).rules == ("ClipQuantFusion", "Conv")
    else:
        assert ("Clip", "") in ops(graph) and unfused(graph, "Conv")


def test_redundant_clip_kept_on_dml_1_24():
    """ClipQuantFusion is CPU-only since 1.19: on DML the redundant Clip stays, and the Conv with it."""
    graph = rewrite(conv_model(activation=("Clip", 0, 6), q_scale=0.02, q_zp=0))
    assert ("Clip", "") in ops(graph) and unfused(graph, "Conv")
