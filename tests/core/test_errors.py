"""Bad input gets a clear error (issue 5): a typed DmlEpError whose message says where and which rule.

Invalid nodes are met in two places. onnxruntime's inference (ort_inference.static_values) meets most of
them first, when the model is loaded, and its refusal becomes a ModelError naming the node and its
inputs; dml_ep's importer checks them again when it plans the node (``importer_meets`` below runs
it alone) and raises its own NodeError subclass. Both paths are tested.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.core import graph
from dml_ep.core.errors import (DmlEpError, FallbackError, FeatureLevelError, FeedError, InvalidAttributeError, ModelError,
    QuantizationParameterError, ShapeError)
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from dml_ep.passes import Origin
from dml_ep.planning.importer import DEFAULT_FEATURE_LEVEL, NodeImporter, opset_versions
from onnx_builders import Feed, qlinear_conv, single_node_model

MODELS = Path(__file__).resolve().parents[2] / "models"
MLP = MODELS / "mlp.onnx"


@contextlib.contextmanager
def raises(error_type, *fragments):
    """Like pytest.raises, and the message must contain every fragment."""
    with pytest.raises(error_type) as info:
        yield info
    assert isinstance(info.value, DmlEpError)
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


def named(model_feeds, name="n"):
    """Name the model's first node."""
    model, feeds = model_feeds
    model.graph.node[0].name = name
    return model, feeds


def importer_meets(model: onnx.ModelProto):
    """Plan the model's one node with dml_ep's importer alone, past onnxruntime's load-time checks
    (which meet most invalid nodes first): inputs as declared, the output of its declared type."""
    (node,) = model.graph.node
    constants = graph.constants(model.graph)
    values = {v.name: graph.ValueInfo(v.name, graph.element_dtype(v), graph.declared_shape(v)) for v in model.graph.input}
    values.update((name, graph.ValueInfo(name, array.dtype, array.shape)) for name, array in constants.items())
    output = model.graph.output[0]
    values[output.name] = graph.ValueInfo(output.name, graph.element_dtype(output), None)
    importer = NodeImporter(constants, DEFAULT_FEATURE_LEVEL, opset_versions(model))
    return importer.plan_node(node, Origin((), (node,)), values)


# Operand tensor names the builders give: in0, in1, ... in operand order.
CONV_OPERANDS = ("x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "bias")


def conv(**changes):
    """A valid QLinearConv 'conv' (x [1, 2, 5, 5], 4 filters 3x3); ``changes`` replace operands or set attributes."""
    operands = dict(
        x=Feed(np.arange(50, dtype=np.uint8).reshape(1, 2, 5, 5)),
        x_scale=np.float32(0.1),
        x_zp=np.uint8(128),
        w=(np.arange(72).reshape(4, 2, 3, 3) % 7 - 3).astype(np.int8),
        w_scale=np.float32(0.05),
        w_zp=np.int8(0),
        y_scale=np.float32(0.2),
        y_zp=np.uint8(128),
        bias=np.arange(4, dtype=np.int32),
    )
    attributes = {key: value for key, value in changes.items() if key not in operands}
    operands.update((key, value) for key, value in changes.items() if key in operands)
    return named(qlinear_conv(**operands, **attributes), "conv")


def matmul(a_shape=(2, 3), b_shape=(3, 4), **changes):
    """A valid QLinearMatMul 'mm' of a fed uint8 A and a constant int8 B (any shapes: no output shape is computed)."""
    operands = dict(
        a=Feed(np.ones(a_shape, np.uint8)),
        a_scale=np.float32(0.1),
        a_zp=np.uint8(1),
        b=np.ones(b_shape, np.int8),
        b_scale=np.float32(0.1),
        b_zp=np.int8(0),
        y_scale=np.float32(0.1),
        y_zp=np.uint8(0),
    )
    operands.update(changes)
    model_feeds = single_node_model("QLinearMatMul", list(operands.values()), operands["y_zp"].dtype, len(a_shape))
    return named(model_feeds, "mm")


def quantized_add(a_shape=(2, 3), b_shape=(3,), **changes):
    """A valid com.microsoft QLinearAdd 'qadd' of two fed uint8 tensors (any shapes)."""
    operands = dict(
        a=Feed(np.ones(a_shape, np.uint8)), a_scale=np.float32(0.1), a_zp=np.uint8(0),
        b=Feed(np.ones(b_shape, np.uint8)), b_scale=np.float32(0.1), b_zp=np.uint8(0),
        c_scale=np.float32(0.1), c_zp=np.uint8(0),
    )  # fmt: skip
    operands.update(changes)
    rank = max(len(a_shape), len(b_shape))
    return named(single_node_model("QLinearAdd", list(operands.values()), np.uint8, rank, domain="com.microsoft"), "qadd")


def float_add(a_shape, b_shape):
    """An Add 'add' of two fed float32 tensors."""
    operands = [Feed(np.ones(a_shape, np.float32)), Feed(np.ones(b_shape, np.float32))]
    return named(single_node_model("Add", operands, np.float32, max(len(a_shape), len(b_shape))), "add")


def plan_and_run(model_feeds, **session_options):
    model, feeds = model_feeds
    session = dml_ep.InferenceSession(model, **session_options)
    return session, session.run(None, feeds)[0]


def relu_graph(nodes, opset=17, ir_version=None):
    """A float model x -> y of the given nodes (which need not be valid)."""
    value = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [value("x", onnx.TensorProto.FLOAT, [2])], [value("y", onnx.TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


# --- the model file ---------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with raises(ModelError, "nowhere.onnx", "no such file"):
        dml_ep.InferenceSession(tmp_path / "nowhere.onnx")


def test_directory(tmp_path):
    with raises(ModelError, "is a directory"):
        dml_ep.InferenceSession(tmp_path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with raises(ModelError, "empty.onnx", "empty file"):
        dml_ep.InferenceSession(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.99])
def test_truncated_file(tmp_path, keep):
    data = MLP.read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: int(len(data) * keep)])
    with raises(ModelError, "truncated.onnx", "not an ONNX model"):
        dml_ep.InferenceSession(path)


@pytest.mark.parametrize("data", [b"this is not an ONNX model\n", bytes(range(256)) * 4], ids=["text", "binary"])
def test_not_protobuf(data):
    with raises(ModelError, "not an ONNX model"):
        dml_ep.InferenceSession(data)


@pytest.mark.parametrize("model", [3, None, [b"\x08\x07"]], ids=["int", "None", "list"])
def test_not_a_model_object(model):
    with raises(ModelError, "a path, bytes or an onnx.ModelProto", type(model).__name__):
        dml_ep.InferenceSession(model)


def test_onnxruntime_refuses_an_unknown_op():
    """Validity beyond dml_ep's own limits is onnxruntime's to judge, as it loads the model."""
    model = relu_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="frob")])
    with raises(ModelError, "onnxruntime rejects it", "node 'frob' (Frobnicate)", "No Op registered"):
        dml_ep.InferenceSession(model.SerializeToString())


@pytest.mark.parametrize(
    ("opset", "ir_version", "fragment"),
    [
        (onnx.defs.onnx_opset_version() + 1, None, f"unsupported opset ai.onnx {onnx.defs.onnx_opset_version() + 1}"),
        (17, 2, "unsupported IR version 2"),
        (17, 99, "IR version: 99"),
    ],
)
def test_unsupported_versions(opset, ir_version, fragment):
    model = relu_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], opset, ir_version)
    with raises(ModelError, fragment):
        dml_ep.InferenceSession(model)


def test_missing_external_data(tmp_path):
    weight = numpy_helper.from_array(np.ones(2, np.float32), "w")
    model = relu_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")])
    model.graph.initializer.append(weight)
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert dml_ep.InferenceSession(path).run(None, {"x": np.ones(2, np.float32)})[0].tolist() == [2, 2]
    os.remove(tmp_path / "weights.bin")
    with raises(ModelError, "model.onnx", "external data", "tensor name: w", "weights.bin"):
        dml_ep.InferenceSession(path)
    with raises(ModelError, "tensor 'w'", "weights.bin", "needs the model's path"):
        dml_ep.InferenceSession(path.read_bytes())


def test_cycle():
    model = relu_graph([
        helper.make_node("Add", ["x", "b"], ["a"], name="A"),
        helper.make_node("Relu", ["a"], ["b"], name="B"),
        helper.make_node("Relu", ["a"], ["y"], name="C"),
    ])  # fmt: skip
    with raises(ModelError, "cycle through 'A', 'B'"):
        dml_ep.InferenceSession(model)
    with raises(ModelError, "cycle through 'A', 'B'"):
        graph.topological_order(model.graph)


def test_nodes_listed_out_of_order_are_sorted():
    """ONNX asks for topological order, onnxruntime sorts a graph that is not in it (a node read before it is made)."""
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="B"), helper.make_node("Relu", ["x"], ["a"], name="A")]
    assert [n.name for n in graph.topological_order(relu_graph(nodes).graph)[0]] == ["A", "B"]
    assert [n.name for n in graph.topological_order(relu_graph(nodes[::-1]).graph)[0]] == ["A", "B"]


def test_dangling_input():
    model = relu_graph([helper.make_node("Add", ["x", "ghost"], ["y"], name="A")])
    with raises(ModelError, "node 'A' (Add)", "'ghost'"):
        dml_ep.InferenceSession(model)
    with raises(ModelError, "node 'A' (Add)", "input 'ghost' is produced by no node"):
        graph.topological_order(model.graph)



NOT_UTF8 = "@@notutf8"  # not_utf8() makes it b"\xff\xfenotutf8"; long enough not to be met in weights


def not_utf8(model: onnx.ModelProto) -> bytes:
    """``model`` serialized with the first two bytes of every NOT_UTF8 made 0xff 0xfe, which are
    not UTF-8: protobuf parses them into a string field all the same."""
    data = model.SerializeToString()
    assert NOT_UTF8.encode() in data
    return data.replace(NOT_UTF8.encode(), b"\xff\xfe" + NOT_UTF8.encode()[2:])


def test_a_node_name_that_is_not_utf8_runs_as_onnxruntime_runs_it():
    """onnxruntime runs the model; dml_ep too, the name backslash-escaped (it was an internal error
    in the QDQ rewrites)."""
    model = onnx.load(MODELS / "small_cnn.qdq.onnx")
    model.graph.node[0].name = NOT_UTF8
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)
    session = dml_ep.InferenceSession(not_utf8(model))
    np.testing.assert_array_equal(session.run(None, {"input": x})[0], dml_ep.InferenceSession(model).run(None, {"input": x})[0])
    assert "\\xff\\xfenotutf8" in {node.name for entry in session.plan.entries for node in entry.origin.nodes}


@pytest.mark.parametrize("kind", ["input", "output"])
def test_a_graph_input_or_output_name_that_is_not_utf8_is_refused(kind):
    """onnxruntime's Python API can neither feed nor fetch it (a UnicodeDecodeError)."""
    model = onnx.load(MLP)
    value = getattr(model.graph, kind)[0]
    for node in model.graph.node:
        node.input[:] = [NOT_UTF8 if name == value.name else name for name in node.input]
        node.output[:] = [NOT_UTF8 if name == value.name else name for name in node.output]
    value.name = NOT_UTF8
    with raises(ModelError, f"graph {kind} 0: name b'\\xff\\xfenotutf8' is not UTF-8 (ONNX strings are UTF-8)"):
        dml_ep.InferenceSession(not_utf8(model))


@pytest.mark.parametrize("where", ["node doc_string", "attribute", "graph input doc_string", "metadata", "subgraph node"])
def test_strings_that_are_not_utf8_are_found_everywhere(where):
    """The fast check of a model's strings (a loop over the nodes) finds what the full walk finds."""
    model = onnx.load(MLP)
    node = model.graph.node[0]
    if where == "node doc_string":
        node.doc_string = NOT_UTF8
    elif where == "attribute":
        node.attribute.append(helper.make_attribute(NOT_UTF8, 1))  # its name (a string attribute holds bytes)
    elif where == "graph input doc_string":
        model.graph.input[0].doc_string = NOT_UTF8
    elif where == "metadata":
        node.metadata_props.add(key="k", value=NOT_UTF8)
    else:
        branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], doc_string=NOT_UTF8)], "b", [], [])
        node.attribute.append(helper.make_attribute("branch", branch))
    parsed = onnx.ModelProto.FromString(not_utf8(model))
    assert graph._has_bytes(parsed) and any(isinstance(text, bytes) for *_, text in graph._strings(parsed))


def test_a_name_whose_escaped_form_is_another_name_is_refused():
    """Read backslash-escaped, b'\\xff\\xfenotutf8' would be the value '\\\\xff\\\\xfenotutf8' too."""
    escaped = "\\xff\\xfenotutf8"
    model = relu_graph([helper.make_node("Relu", ["x"], [NOT_UTF8]), helper.make_node("Relu", [escaped], ["y"]),
                        helper.make_node("Relu", [NOT_UTF8], [escaped])])
    with raises(ModelError, "b'\\xff\\xfenotutf8' is not UTF-8", f"escaped it reads {escaped!r}, another string of the model"):
        dml_ep.InferenceSession(not_utf8(model))


# --- quantization parameters ------------------------------------------------------------------

BAD_SCALES = [(0.0, "scale 0 is not positive"), (-1.0, "scale -1 is not positive"), (np.nan, "NaN or infinite"), (np.inf, "NaN or infinite")]


@pytest.mark.parametrize(("value", "rule"), BAD_SCALES)
@pytest.mark.parametrize(("operand", "tensor"), [("x_scale", "in1"), ("w_scale", "in4"), ("y_scale", "in6")])
def test_conv_bad_scale(operand, tensor, value, rule):
    with raises(QuantizationParameterError, "node 'conv' (QLinearConv)", f"tensor '{tensor}'", rule):
        dml_ep.InferenceSession(conv(**{operand: np.float32(value)})[0])


@pytest.mark.parametrize(("value", "rule"), BAD_SCALES[:2])
def test_matmul_and_add_bad_scale(value, rule):
    with raises(QuantizationParameterError, "node 'mm' (QLinearMatMul)", "tensor 'in4'", rule):
        dml_ep.InferenceSession(matmul(b_scale=np.float32(value))[0])
    with raises(QuantizationParameterError, "node 'qadd' (QLinearAdd)", "tensor 'in6'", rule):
        dml_ep.InferenceSession(quantized_add(c_scale=np.float32(value))[0])


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"x_zp": np.int32(300)}, "int32"),
        ({"x_zp": np.int8(3)}, "int8"),
    ],
    ids=["int32", "int8-for-uint8"],
)
def test_conv_zero_point_type(changes, rule):
    with raises(ModelError, "(QLinearConv)", "(conv)", f"in2 {rule}[]"):
        dml_ep.InferenceSession(conv(**changes)[0])
    with raises(QuantizationParameterError, "node 'conv' (QLinearConv)", "tensor 'in2'", f"zero point type {rule}", "uint8"):
        importer_meets(conv(**changes)[0])


def test_output_zero_point_type_must_match_output():
    model, _ = matmul(y_zp=np.int8(0))
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.UINT8
    with raises(ModelError, "(mm)", "tensor(uint8)", "tensor(int8)"):
        dml_ep.InferenceSession(model)
    with raises(QuantizationParameterError, "node 'mm' (QLinearMatMul)", "tensor 'in7'", "zero point type int8", "uint8"):
        importer_meets(model)


@pytest.mark.parametrize(
    ("model_feeds", "where", "rule"),
    [
        (lambda: conv(w_scale=np.full(3, 0.05, np.float32)), "node 'conv' (QLinearConv), tensor 'in4'", "shape [3]; expected 1 or 4"),
        (lambda: conv(w_scale=np.full((2, 2), 0.05, np.float32)), "node 'conv' (QLinearConv), tensor 'in4'", "shape [2, 2]"),
        (lambda: conv(w_zp=np.zeros(2, np.int8)), "node 'conv' (QLinearConv), tensor 'in5'", "zero point has shape [2]; expected 1 or 4"),
        (lambda: matmul(a_scale=np.full(3, 0.1, np.float32)), "node 'mm' (QLinearMatMul), tensor 'in1'", "shape [3]; expected 1 or 2"),
        (lambda: matmul(b_zp=np.zeros(3, np.int8)), "node 'mm' (QLinearMatMul), tensor 'in5'", "expected 1 or 4"),
    ],
    ids=["conv-scale-3", "conv-scale-2x2", "conv-zp-2", "matmul-row-scale-3", "matmul-column-zp-3"],
)
def test_parameter_shape(model_feeds, where, rule):
    with raises(QuantizationParameterError, where, rule):
        dml_ep.InferenceSession(model_feeds()[0])


@pytest.mark.host_sensitive
def test_a_scale_bound_at_run_time_runs_on_directml_and_is_checked_when_it_arrives():
    """The real EP binds a scale computed at run time as a tensor: the node runs on DirectML, as
    onnxruntime computes it, and a zero scale is refused when it comes, naming node and value."""
    model, feeds = matmul(a_scale=Feed(np.float32(0.5)))
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    (entry,) = session.plan.entries
    assert isinstance(entry, DmlNode) and entry.names["AScaleTensor"] == "in1"
    np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0])
    feeds["in1"] = np.array(0.0, np.float32)
    with pytest.raises(QuantizationParameterError, match=r"QLinearMatMul.*tensor 'in1': scale 0 is not positive"):
        session.run(None, feeds)


# --- attributes and shapes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "probe_rule", "importer_error", "importer_rule"),
    [
        ({"strides": [0, 1]}, "strides must only contain positive values", InvalidAttributeError, "strides [0, 1] must be positive"),
        ({"strides": [1, -2]}, "strides must only contain positive values", InvalidAttributeError, "strides [1, -2] must be positive"),
        ({"dilations": [0, 1]}, "dilations must only contain positive values", InvalidAttributeError, "dilations [0, 1] must be positive"),
        ({"pads": [1, 1, 1]}, "pads has incorrect size", InvalidAttributeError, "pads has 3 values, expected 4"),
    ],
    ids=["stride-0", "stride-negative", "dilation-0", "pads-length"],
)
def test_conv_attribute(attributes, probe_rule, importer_error, importer_rule):
    with raises(ModelError, "node 'conv' (QLinearConv)", probe_rule, "in0 uint8[1, 2, 5, 5]"):
        dml_ep.InferenceSession(conv(**attributes)[0])
    with raises(importer_error, "node 'conv' (QLinearConv)", importer_rule):
        importer_meets(conv(**attributes)[0])


@pytest.mark.parametrize(
    ("changes", "error", "rule"),
    [
        ({"x": Feed(np.zeros((1, 2, 2, 5), np.uint8))}, ShapeError, "kernel spans 3 but the padded input is only 2"),
        ({"x": Feed(np.zeros((1, 2, 5, 5), np.uint8)), "dilations": [3, 1]}, ShapeError, "kernel spans 7 but the padded input is only 5"),
        ({"group": 3}, InvalidAttributeError, "group 3 must divide the input channels (2) and output channels (4)"),
        ({"group": 2}, ShapeError, "filter has 2 channels per group, input needs 1"),
        ({"kernel_shape": [2, 2]}, InvalidAttributeError, "kernel_shape [2, 2] does not match the filter's [3, 3]"),
    ],
    ids=["kernel-too-big", "dilated-kernel-too-big", "group-not-dividing", "group-filter-channels", "kernel-shape"],
)
def test_conv_shapes(changes, error, rule):
    with raises(error, "node 'conv' (QLinearConv)", rule):
        dml_ep.InferenceSession(conv(**changes)[0])


def test_conv_padding_makes_kernel_fit():
    """The same too-small input is fine once padded: the check is against the padded size."""
    session, result = plan_and_run(conv(x=Feed(np.zeros((1, 2, 2, 2), np.uint8)), pads=[1, 1, 1, 1]))
    assert result.shape == (1, 4, 2, 2)


def test_matmul_inner_dimensions():
    with raises(ModelError, "node 'mm' (QLinearMatMul)", "Incompatible dimensions", "in0 uint8[2, 3]", "in3 int8[5, 4]"):
        dml_ep.InferenceSession(matmul(b_shape=(5, 4))[0])
    with raises(ShapeError, "node 'mm' (QLinearMatMul)", "inner dimensions differ: A [2, 3] has K=3, B [5, 4] has K=5"):
        importer_meets(matmul(b_shape=(5, 4))[0])


def test_add_shapes_do_not_broadcast():
    with raises(ModelError, "node 'add' (Add)", "Incompatible dimensions", "in0 float32[2, 3]", "in1 float32[4]"):
        dml_ep.InferenceSession(float_add((2, 3), (4,))[0])
    with raises(ShapeError, "node 'add' (Add)", "input shapes [2, 3] and [4] do not broadcast"):
        importer_meets(float_add((2, 3), (4,))[0])
    with raises(ModelError, "node 'qadd' (QLinearAdd)", "Incompatible dimensions"):
        dml_ep.InferenceSession(quantized_add(b_shape=(4,))[0])


def test_invalid_fallback_node_is_refused_when_loaded():
    """A 3-D convolution falls back: onnxruntime, loading the model, refuses its attributes."""
    model, _ = conv(x=Feed(np.zeros((1, 2, 5, 5, 5), np.uint8)), w=np.ones((4, 2, 3, 3, 3), np.int8), strides=[0, 1, 1])
    with raises(ModelError, "node 'conv' (QLinearConv)", "strides must only contain positive values"):
        dml_ep.InferenceSession(model)


def test_fallback_failure_at_run_time_names_the_node():
    """Data onnxruntime refuses in a fallback node (an index out of range) is a FallbackError, not ORT's exception.
    (GatherElements: dml_ep models no DirectML operator for it, so it falls back.)"""
    model, _ = named(single_node_model("GatherElements", [np.arange(4, dtype=np.float32), Feed(np.zeros(1, np.int64))], np.float32, 1),
                     "gather")
    session = dml_ep.InferenceSession(model)
    assert session.run(None, {"in1": np.array([3])})[0].tolist() == [3.0]
    with raises(FallbackError, "node 'gather' (GatherElements)", "Out of range"):
        session.run(None, {"in1": np.array([7])})


# --- feeds ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp():
    return dml_ep.InferenceSession(MLP)


GOOD = np.linspace(-2, 2, 3 * 64, dtype=np.float32).reshape(3, 64)


@pytest.mark.parametrize(
    ("feeds", "rule"),
    [
        ({"input": GOOD, "extra": GOOD}, "unknown input name 'extra'"),
        ({}, "missing input 'input'"),
        ({"input": GOOD.astype(np.float64)}, "input 'input': element type float64, expected float32"),
        ({"input": GOOD[0]}, "input 'input': rank 1 (shape [64]), expected rank 2"),
        ({"input": GOOD[:, :63]}, "input 'input': dimension 1 is 63, expected 64"),
        ({"input": [[1.0, 2.0], [3.0]]}, "input 'input': not an array"),
        ({"input": np.broadcast_to(np.float32(0), (2**26 - 1, 64))}, "16.0 GiB is larger than dml_ep's limit of 8 GiB"),
        ({"input": np.broadcast_to(np.float32(0), (2**26, 64))}, "4294967296 elements, more than a DirectML tensor holds"),
        ([GOOD], "input_feed must be a dict"),
    ],
    ids=["unknown", "missing", "dtype", "rank", "size", "ragged", "huge-bytes", "huge-elements", "not-a-dict"],
)
def test_bad_feeds(mlp, feeds, rule):
    with raises(FeedError, rule):
        mlp.run(None, feeds)



@pytest.mark.parametrize(("elem_type", "feed", "rule"), [
    (onnx.TensorProto.UINT8, [300, -1], "input 'x': 300 is outside the range of uint8, [0, 255]"),
    (onnx.TensorProto.INT8, [[1], [-129]], "input 'x': -129 is outside the range of int8, [-128, 127]"),
    (onnx.TensorProto.INT64, [2**63], "input 'x': 9223372036854775808 is outside the range of int64, [-9223372036854775808, 9223372036854775807]"),
    (onnx.TensorProto.FLOAT, [1.0, -(10**400)], "input 'x': -10000000000000000...0000000000000000000 is outside the range of float32, [-3.40282e+38, 3.40282e+38]"),
], ids=["uint8", "int8-nested", "int64", "float32"])
def test_list_feeds_out_of_range(elem_type, feed, rule):
    """A list feed becomes an array of the input's type, as in onnxruntime, which refuses these too
    ("Could not create tensor from given input list"); numpy's OverflowError named neither."""
    value = helper.make_tensor_value_info
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [value("x", elem_type, None)],
                                                [value("y", elem_type, None)]))
    with raises(FeedError, rule):
        dml_ep.InferenceSession(model).run(None, {"x": feed})
    with raises(FeedError, rule):
        compare_model(model, {"x": feed})

def test_unknown_output_name(mlp):
    with raises(FeedError, "unknown output name 'logits'"):
        mlp.run(["logits"], {"input": GOOD})


def test_non_contiguous_and_read_only_feeds(mlp):
    expected = mlp.run(None, {"input": GOOD})[0]
    read_only = GOOD.copy()
    read_only.flags.writeable = False
    strided = np.repeat(GOOD, 2, axis=1)[:, ::2]
    for feed in (np.asfortranarray(GOOD), strided, read_only):
        np.testing.assert_array_equal(mlp.run(None, {"input": feed})[0], expected)
    broadcast = np.broadcast_to(GOOD[:1], (3, 64))  # read-only with a zero stride
    np.testing.assert_array_equal(mlp.run(None, {"input": broadcast})[0], np.repeat(expected[:1], 3, axis=0))
    assert not read_only.flags.writeable and np.array_equal(read_only, GOOD)


# --- feature levels ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["9_9", "banana", 7, None])
def test_unknown_feature_level(level):
    with raises(FeatureLevelError, "unknown DirectML feature level"):
        dml_ep.InferenceSession(MLP, feature_level=level)


def test_feature_level_too_low_falls_back():
    """QLinearAdd needs DML_FEATURE_LEVEL_4_0: at 2_1 it runs on onnxruntime, with the reason, never an error."""
    session = dml_ep.InferenceSession(MLP, feature_level="2_1")
    reasons = [entry.reason for entry in session.plan.fallback_nodes if entry.node.op_type == "QLinearAdd"]
    assert len(reasons) == 2 and all("requires DML_FEATURE_LEVEL_4_0" in reason for reason in reasons)
    assert session.run(None, {"input": GOOD})[0].shape == (3, 10)


def test_out_of_memory_names_the_node(monkeypatch):
    """numpy's MemoryError (e.g. an im2col larger than RAM) becomes a typed error naming the node."""
    import dml_ep.runtime.executor

    def exhausted(*args):
        raise MemoryError("Unable to allocate 72.0 GiB")

    monkeypatch.setattr(dml_ep.runtime.executor, "run_kernel", exhausted)
    session = dml_ep.InferenceSession(MODELS / "mlp.onnx")
    feeds = {i.name: np.zeros(i.shape, np.float32) for i in session.plan.inputs}
    with pytest.raises(dml_ep.core.errors.OutOfMemoryError, match="input_QuantizeLinear.*QuantizeLinear.*not enough memory"):
        session.run(None, feeds)


# --- sparse tensors -------------------------------------------------------------------------


def sparse_matmul(kind: str) -> onnx.ModelProto:
    """X [1, 4] @ W [4, 4], W sparse (2 of 16 values): a sparse initializer with linear indices or
    coordinates, or a Constant's sparse_value."""
    values = numpy_helper.from_array(np.array([2.0, -3.0], np.float32), "W")
    indices = np.array([1, 14], np.int64) if kind != "coordinates" else np.array([[0, 1], [3, 2]], np.int64)
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(indices, "W_indices"), [4, 4])
    nodes = [helper.make_node("MatMul", ["X", "W"], ["Y"])]
    if kind == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["W"], sparse_value=sparse))
    graph = helper.make_graph(nodes, "sparse", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])],
                              sparse_initializer=[] if kind == "constant" else [sparse])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.host_sensitive
@pytest.mark.parametrize("kind", ["linear", "coordinates", "constant"])
def test_sparse_tensors_are_read_as_onnxruntime_reads_them(kind):
    """Valid models onnxruntime runs (it makes sparse initializers dense at load): they were refused
    with "input 'W' is produced by no node"."""
    model = sparse_matmul(kind)
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
    expected = cpu_session(model).run(None, {"X": x})[0]
    np.testing.assert_array_equal(dml_ep.InferenceSession(model).run(None, {"X": x})[0], expected)
    assert expected.tolist() == [[0.0, 2.0, -12.0, 0.0]]


def test_sparse_tensors_out_of_their_dims_or_in_external_data_are_refused():
    model = sparse_matmul("linear")
    model.graph.sparse_initializer[0].indices.CopyFrom(numpy_helper.from_array(np.array([1, 16], np.int64), "W_indices"))
    with raises(ModelError, "sparse tensor 'W': index 16 is out of bounds"):
        dml_ep.InferenceSession(model)
    model = sparse_matmul("linear")
    values = model.graph.sparse_initializer[0].values
    values.ClearField("raw_data")
    values.data_location = TensorProto.EXTERNAL
    values.external_data.add(key="location", value="secret.bin")
    with raises(ModelError, "sparse tensor 'W': its data is in an external file"):
        dml_ep.core.graph.densified(model, copy=True)
