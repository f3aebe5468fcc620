"""Nodes of one signature are imported once (``dml_ep.planning.importer.signature``): the entries share the
desc, and each is bound to its own node's inputs. The references are onnxruntime's outputs and
the errors a node's own constants call for."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.errors import QuantizationParameterError
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session


def _float_adds():
    """s1 = x + x, s2 = x + y, s3 = y + c, s4 = c + x: one signature for s1 and s2, and for s3 and s4 only
    if a constant were keyed by its type and shape, not its name."""
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])  # noqa: E731
    nodes = [helper.make_node("Add", inputs, [out], name=out)
             for inputs, out in ((["x", "x"], "s1"), (["x", "y"], "s2"), (["y", "c"], "s3"), (["d", "x"], "s4"))]
    constants = [numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "c"),
                 numpy_helper.from_array(np.full((2, 3), -4.0, np.float32), "d")]
    graph = helper.make_graph(nodes, "adds", [value("x"), value("y")], [value(n) for n in ("s1", "s2", "s3", "s4")], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.host_sensitive
def test_nodes_of_one_signature_share_a_desc_and_read_their_own_inputs():
    model = _float_adds()
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": np.full((2, 3), 10.0, np.float32)}
    session = dml_ep.InferenceSession(model)
    actual = session.run(None, feeds)
    for ours, theirs in zip(actual, cpu_session(model).run(None, feeds)):
        np.testing.assert_array_equal(ours, theirs, strict=True)
    s1, s2, s3, s4 = session.executor.plan.entries
    assert all(isinstance(e, DmlNode) for e in (s1, s2, s3, s4))
    assert s1.desc is s2.desc  # imported once
    assert s2.names == {"ATensor": "x", "BTensor": "y"} and s4.names == {"ATensor": "d", "BTensor": "x"}


def _qlinear_adds(second_scale: float):
    """Two QLinearAdds alike but for the second one's output scale constant."""
    u8 = lambda name: helper.make_tensor_value_info(name, TensorProto.UINT8, [4])  # noqa: E731
    constants = [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.uint8(128), "z"),
                 numpy_helper.from_array(np.float32(second_scale), "s2")]
    nodes = [helper.make_node("QLinearAdd", ["a", "s", "z", "b", "s", "z", "s", "z"], ["y1"], domain="com.microsoft"),
             helper.make_node("QLinearAdd", ["a", "s", "z", "b", "s", "z", "s2", "z"], ["y2"], domain="com.microsoft")]
    graph = helper.make_graph(nodes, "qadds", [u8("a"), u8("b")], [u8("y1"), u8("y2")], constants)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@pytest.mark.host_sensitive
def test_a_nodes_own_constants_are_checked():
    """The second node differs only in a constant's name and value: a zero scale must still be
    refused for it, not passed over as the first node's signature."""
    with pytest.raises(QuantizationParameterError, match="not positive"):
        dml_ep.InferenceSession(_qlinear_adds(0.0))
    session = dml_ep.InferenceSession(_qlinear_adds(0.2))
    feeds = {"a": np.arange(4, dtype=np.uint8) * 60, "b": np.full(4, 130, np.uint8)}
    for ours, theirs in zip(session.run(None, feeds), cpu_session(_qlinear_adds(0.2)).run(None, feeds)):
        np.testing.assert_array_equal(ours, theirs, strict=True)
