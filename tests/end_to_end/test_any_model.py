"""Every model onnxruntime runs, dml_ep runs, with onnxruntime's answer (issue 9).

Shapes come from the tensors a run makes, never from value_info or a guess; symbolic dimensions
are planned per run; graphs with initializer outputs, sequences, If branches reading outer-scope
values and empty tensors run. onnxruntime's CPU EP is the reference throughout.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core import graph as graph_module
from dml_ep.core.errors import ModelError, ShapeError
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from onnx_builders import make, symbolic_conv


def both(model, feeds):
    """(dml_ep's outputs, onnxruntime's outputs) for the same feeds."""
    return dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds), cpu_session(model).run(None, feeds)


def assert_same(model, feeds):
    ours, theirs = both(model, feeds)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, list):
            assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    return ours


def test_reshape_shape_from_an_input():
    """The shape is data: planned from the tensor a run makes, and again when the data changes."""
    model = make([helper.make_node("Reshape", ["x", "s"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                 [helper.make_empty_tensor_value_info("y")])
    x = np.arange(12, dtype=np.float32)
    session = dml_ep.InferenceSession(model.SerializeToString())
    assert session.run(None, {"x": x, "s": np.array([3, 4])})[0].shape == (3, 4)
    assert session.run(None, {"x": x, "s": np.array([2, 6])})[0].shape == (2, 6)


@pytest.mark.host_sensitive
def test_data_dependent_shape_feeding_a_directml_node():
    """An Add on DirectML whose input shape a Reshape computes from data: its desc follows each run."""
    model = make([helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    session = dml_ep.InferenceSession(model.SerializeToString())
    x = np.arange(12, dtype=np.float32)
    for shape in ([3, 4], [6, 2]):
        feeds = {"x": x, "s": np.array(shape)}
        np.testing.assert_array_equal(session.run(None, feeds)[0], cpu_session(model).run(None, feeds)[0])
        add = next(e for e in session.plan.entries if e.node.op_type == "Add")
        assert isinstance(add, DmlNode) and add.output_shape == tuple(shape)


@pytest.mark.host_sensitive
def test_value_info_that_disagrees_with_the_real_shape():
    model = make([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                 value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 6])])
    out = assert_same(model, {"x": np.arange(-6, 6, dtype=np.float32).reshape(3, 4)})
    assert out[0].shape == (3, 4)


@pytest.mark.host_sensitive
def test_symbolic_dims_load_and_specialise_per_run():
    model = symbolic_conv()
    session = dml_ep.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for shape in ((1, 2, 5, 5), (3, 2, 8, 6)):
        feeds = {"in0": rng.integers(0, 256, shape, dtype=np.uint8)}
        ours = session.run(None, feeds)[0]
        np.testing.assert_array_equal(ours, cpu_session(model).run(None, feeds)[0])
        (entry,) = session.plan.entries
        assert isinstance(entry, DmlNode) and entry.desc.InputTensor.Sizes == shape


def test_plan_for_symbolic_dims_says_what_it_assumed():
    model = symbolic_conv()
    plan = dml_ep.planning.planner.plan_model(model, input_shapes={"in0": (2, 2, 7, 7)})
    assert plan.assumed == {} and plan.dml_nodes[0].output_shape == (2, 4, 5, 5)
    with pytest.raises(ShapeError, match="kernel spans 3 but the padded input is only 1"):
        dml_ep.planning.planner.plan_model(model)  # H and W assumed 1: the error is the assumption's, at planning only


@pytest.mark.host_sensitive
def test_graph_output_that_is_an_initializer():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("c", TensorProto.FLOAT, [3])],
                 [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c")])
    assert_same(model, {"x": np.array([-1, 1], np.float32)})


@pytest.mark.host_sensitive
def test_sequence_intermediate_and_sequence_input():
    model = make([helper.make_node("SequenceInsert", ["seq", "x"], ["s2"]), helper.make_node("SequenceAt", ["s2", "i"], ["y"]),
                  helper.make_node("SequenceLength", ["s2"], ["n"])],
                 [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("i", TensorProto.INT64, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    feeds = {"seq": [np.array([5, 6], np.float32)], "x": np.array([1, 2], np.float32), "i": np.array(1)}
    assert_same(model, feeds)
    session = dml_ep.InferenceSession(model.SerializeToString())
    assert [i.type for i in session.get_inputs()][0] == "seq(tensor(float))"
    session.run(None, feeds)
    assert len(session.plan.entries) == 3


@pytest.mark.host_sensitive
def test_if_branch_reading_outer_scope_values():
    then = helper.make_graph([helper.make_node("Add", ["x", "c"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Sub", ["x", "c"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    model = make([helper.make_node("Relu", ["x0"], ["x"]), helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                 [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                 [numpy_helper.from_array(np.array([10, 20], np.float32), "c")])
    for cond in (True, False):
        assert_same(model, {"x0": np.array([-1, 3], np.float32), "cond": np.array(cond)})


def _onnxruntime_optimized_ops(model, tmp_path) -> list[str]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node]


@pytest.mark.host_sensitive
def test_a_value_an_if_branch_reads_is_not_fused_away(tmp_path):
    """DQ -> Conv -> Q whose Conv output an If branch also reads (quantize_static makes this of
    silero-vad's decoder): onnxruntime counts the branch's read as an edge and does not fuse the
    Conv into a QLinearConv, so the branch finds its value (dml_ep's QDQ rules used to fuse it,
    and the rewritten graph was invalid). The If, which reads nothing else made by a node, runs
    after the Conv all the same (dml_ep's order used to put it first)."""
    scale, zero = numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.uint8(128), "z")
    weights = [numpy_helper.from_array(np.arange(-4, 5, dtype=np.int8).reshape(1, 1, 3, 3), "w"),
               numpy_helper.from_array(np.float32(0.02), "ws"), numpy_helper.from_array(np.int8(0), "wz")]
    then = helper.make_graph([helper.make_node("Identity", ["y"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["y"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    model = make([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]), helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
                  helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]), helper.make_node("Conv", ["xd", "wd"], ["y"], pads=[1, 1, 1, 1]),
                  helper.make_node("QuantizeLinear", ["y", "s", "z"], ["yq"]), helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["out"]),
                  helper.make_node("If", ["cond"], ["branch"], then_branch=then, else_branch=other)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                 [helper.make_tensor_value_info("out", TensorProto.FLOAT, None), helper.make_tensor_value_info("branch", TensorProto.FLOAT, None)],
                 [scale, zero, *weights])
    assert "QLinearConv" not in _onnxruntime_optimized_ops(model, tmp_path)  # the reference's own rules keep the Conv
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(1, 1, 4, 4)
    # The Conv is a float CONVOLUTION on DirectML, summed in its own order: the branch's value within
    # a float32 sum's rounding bound of onnxruntime's, (9 + 2) * 2^-24 of the largest sum of
    # magnitudes (9 taps of at most 3 * 0.08); the quantized output bit for bit.
    bound = 11 * 2.0**-24 * 9 * 3 * 0.08
    for cond in (True, False):
        (out, branch), (expected_out, expected_branch) = both(model, {"x": x, "cond": np.array(cond)})
        np.testing.assert_array_equal(out, expected_out)
        assert branch.dtype == expected_branch.dtype and branch.shape == expected_branch.shape
        np.testing.assert_allclose(branch, expected_branch, rtol=0, atol=bound)


@pytest.mark.host_sensitive
def test_an_if_branchs_large_constant_survives_onnxruntimes_rewrite():
    """onnxruntime's optimized model keeps initializers of 4 KiB and more in a file beside it, an
    If branch's too (silero-vad's LSTM constants): they are read back, or the graph is invalid."""
    table = numpy_helper.from_array(np.arange(2048, dtype=np.float32), "table")
    then = helper.make_graph([helper.make_node("Add", ["x", "table"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                             [table])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    model = make([helper.make_node("Identity", ["x0"], ["x"]),  # an Identity: onnxruntime's rewrite runs
                  helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                 [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [2048]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    for cond in (True, False):
        assert_same(model, {"x0": np.full(2048, 0.5, np.float32), "cond": np.array(cond)})


def test_the_values_a_contrib_nodes_subgraph_reads_are_its_inputs():
    """Subgraphs are looked for in the attributes of control-flow ops and of every op outside
    ai.onnx (the attributes of other ai.onnx ops are not read: their schemas have no graph)."""
    decoder = helper.make_graph([helper.make_node("Add", ["step", "outer"], ["next"])], "decoder",
                                [helper.make_tensor_value_info("step", TensorProto.FLOAT, [1])],
                                [helper.make_tensor_value_info("next", TensorProto.FLOAT, [1])])
    contrib = helper.make_node("GreedySearch", ["ids"], ["seq"], domain="com.microsoft", decoder=decoder)
    assert graph_module.node_reads(contrib) == ["ids", "outer"]
    assert graph_module.node_reads(helper.make_node("Add", ["a", "b"], ["c"])) == ["a", "b"]




def test_the_ops_searched_for_subgraphs_are_those_whose_schemas_have_a_graph():
    """The list is typed out (onnx's schema list is slow to read): it must hold every ai.onnx op
    with a graph attribute in any version of the installed onnx."""
    kinds = {onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS}
    with_graphs = {s.name for s in onnx.defs.get_all_schemas_with_history()
                   if s.domain == "" and any(a.type in kinds for a in s.attributes.values())}
    assert graph_module.OPS_WITH_GRAPHS == with_graphs
@pytest.mark.host_sensitive
def test_zero_size_input_left_to_fallback_nodes():
    model = make([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    out = assert_same(model, {"x": np.zeros((0, 3), np.float32), "b": np.ones(3, np.float32)})
    assert out[0].shape == (0, 3)
    session = dml_ep.InferenceSession(model.SerializeToString())
    session.run(None, {"x": np.zeros((0, 3), np.float32), "b": np.ones(3, np.float32)})
    add = session.plan.entries[-1]
    assert "empty" in add.reason


def test_an_input_of_undefined_element_type():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
    with pytest.raises(ModelError, match="undefined element type"):
        dml_ep.InferenceSession(model.SerializeToString())


def test_a_tensor_of_another_shape_than_planned_is_an_error():
    """A desc reads its tensor as planned or not at all: never a silent reinterpretation."""
    model = make([helper.make_node("Add", ["a", "b"], ["y"])],
                 [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 6]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    session = dml_ep.InferenceSession(model.SerializeToString())
    (entry,) = session.plan.entries
    wrong = {"a": np.zeros((3, 4), np.float32), "b": np.zeros((3, 4), np.float32)}
    with pytest.raises(ShapeError, match=r"planned for shape \[2, 6\] and got \[3, 4\]"):
        session.executor.run_dml(entry, wrong)


@pytest.mark.host_sensitive
def test_compare_counts_nan_matching_nan_as_equal():
    model = make([helper.make_node("Sqrt", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    from dml_ep.conformance.compare import compare_model

    report = compare_model(model, {"x": np.array([-1, 4, 9], np.float32)})
    assert report.ok and report.outputs[0].equal == 3


# --- the CLI on the same models -----------------------------------------------------------------

def cli(capsys, *argv):
    from dml_ep.cli.commands import main

    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_inspect_names_the_symbolic_dims_it_assumed(tmp_path, capsys):
    path = tmp_path / "conv.onnx"
    model = symbolic_conv()
    model.graph.node[0].attribute.append(helper.make_attribute("pads", [1, 1, 1, 1]))
    onnx.save(model, path)
    status, out, _ = cli(capsys, "inspect", path)
    assert status == 0 and "symbolic dimensions N, H, W were taken as N=1, H=1, W=1" in out  # 1*4*1*1 outputs x 2*3*3 MACs:
    assert "estimated MACs: 72 on DirectML (100.0%), 0 on the fallback, with the symbolic dimensions taken as N=1, H=1, W=1" in out
    status, out, _ = cli(capsys, "inspect", path, "--shape", "in0=2,2,8,8")
    assert status == 0 and f"estimated MACs: {2 * 4 * 8 * 8 * 2 * 9:,} on DirectML" in out and "taken as" not in out


def test_inspect_plans_from_a_run_on_given_inputs(tmp_path, capsys):
    path, shape = tmp_path / "reshape.onnx", tmp_path / "s.npy"
    onnx.save(make([helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), path)
    status, out, _ = cli(capsys, "inspect", path)
    assert status == 0 and "1 node(s) are planned only when run, their input shapes depend on data" in out
    np.save(shape, np.array([3, 4]))
    status, out, _ = cli(capsys, "inspect", path, "--input", f"s={shape}")
    assert status == 0 and "planned only when run" not in out and "estimated MACs: 12 on DirectML" in out


def test_inspect_and_run_a_sequence_model(tmp_path, capsys):
    path = tmp_path / "seq.onnx"
    onnx.save(make([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]), helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), path)
    status, out, _ = cli(capsys, "inspect", path)
    assert status == 0 and "SequenceConstruct" in out
    status, out, _ = cli(capsys, "run", path)
    assert status == 0 and "[4]" in out


def test_run_says_when_random_inputs_took_symbolic_dims_as_1(tmp_path, capsys):
    path = tmp_path / "conv.onnx"
    onnx.save(symbolic_conv(), path)
    status, _, err = cli(capsys, "run", path)
    assert status == 2 and "kernel spans 3 but the padded input is only 1" in err
    assert "random inputs in0 (random (seed 0), N, H, W taken as 1): give the shapes with --shape" in err
    status, out, _ = cli(capsys, "run", path, "--shape", "in0=1,2,5,5")
    assert status == 0 and "[1, 4, 3, 3]" in out


@pytest.mark.host_sensitive
def test_a_negative_declared_size_is_a_free_dimension_as_in_onnxruntime():
    """Exporters write -1 for a free batch size (rapidocr's text-direction classifier does):
    onnxruntime takes any negative size as unknown, runs every batch and reports None."""
    model = make([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 2])])
    for batch in (1, 3):
        assert_same(model, {"x": np.arange(batch * 2, dtype=np.float32).reshape(batch, 2) - 2})
    session = dml_ep.InferenceSession(model.SerializeToString())
    assert [i.shape for i in session.get_inputs()] == [i.shape for i in cpu_session(model).get_inputs()] == [[None, 2]]
    with pytest.raises(dml_ep.core.errors.FeedError, match="dimension 1 is 3"):
        session.run(None, {"x": np.zeros((1, 3), np.float32)})
