"""Data movement on DirectML: Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Expand
(ELEMENT_WISE_IDENTITY), Concat (JOIN), Slice (SLICE1), Gather (GATHER), of every type the DML
EP's rows take (8-bit codes mostly; each op once per type below), each against
onnxruntime's CPU EP element for element, each planned as the DirectML operator the DML EP uses."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.interop.dxdispatch import export, load
from dml_ep.operators.nodes import DmlNode, FallbackNode
from onnx_builders import Feed, run_ort, single_node_model

RNG = np.random.default_rng(19)


def codes(shape, dtype=np.uint8):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def plan_and_check(model, feeds, operator):
    """The node runs as ``operator`` and gives onnxruntime's output exactly."""
    session = dml_ep.InferenceSession(model)
    ours = session.run(None, feeds)[0]
    entry, = session.plan.entries
    assert isinstance(entry, DmlNode), entry.summary()
    assert entry.operator == f"DML_OPERATOR_{operator}"
    expected = run_ort(model, feeds, "ort")
    assert ours.dtype == expected.dtype and ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)
    return entry


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape, perm", [((2, 3, 4), None), ((2, 3, 4, 5), [0, 2, 3, 1]), ((1, 40, 3, 8, 15), [2, 0, 3, 1, 4]), ((7,), [0])])
def test_transpose_reads_permuted_strides(dtype, shape, perm):
    attributes = {} if perm is None else {"perm": perm}
    model, feeds = single_node_model("Transpose", [Feed(codes(shape, dtype))], dtype, len(shape), **attributes)
    entry = plan_and_check(model, feeds, "ELEMENT_WISE_IDENTITY")
    assert entry.desc.InputTensor.Strides is not None or perm == [0]  # the layout change is in the input's strides


@pytest.mark.host_sensitive
@pytest.mark.parametrize("op_type, shape, operands, attributes, rank", [
    ("Reshape", (2, 3, 4), [np.array([0, -1])], {}, 2),
    ("Reshape", (2, 3, 4), [np.array([4, 0, 2])], {}, 3),
    ("Reshape", (2, 3, 4), [np.array([24])], {}, 1),
    ("Flatten", (2, 3, 4), [], {"axis": 2}, 2),
    ("Flatten", (2, 3, 4), [], {"axis": -3}, 2),
    ("Flatten", (2, 3, 4), [], {"axis": 0}, 2),
    ("Squeeze", (2, 1, 4, 1), [], {}, 2),
    ("Squeeze", (2, 1, 4, 1), [np.array([-1])], {}, 3),
    ("Unsqueeze", (2, 4), [np.array([0, -1])], {}, 4),
    ("Identity", (2, 4), [], {}, 2),
])
def test_reshapes_are_an_identity_of_the_output_sizes(op_type, shape, operands, attributes, rank):
    model, feeds = single_node_model(op_type, [Feed(codes(shape)), *operands], np.uint8, rank, **attributes)
    entry = plan_and_check(model, feeds, "ELEMENT_WISE_IDENTITY")
    assert entry.desc.InputTensor == entry.desc.OutputTensor


@pytest.mark.host_sensitive
def test_squeeze_and_unsqueeze_of_opset_11_take_axes_as_an_attribute():
    x = codes((3, 1, 5))
    for op_type, axes, rank in (("Squeeze", [1], 2), ("Unsqueeze", [0, 4], 5)):
        model, feeds = single_node_model(op_type, [Feed(x)], np.uint8, rank, opset=11, axes=axes)
        plan_and_check(model, feeds, "ELEMENT_WISE_IDENTITY")


@pytest.mark.host_sensitive
def test_a_reshape_whose_shape_is_computed_is_planned_from_the_value_of_the_run():
    """Shape -> Concat -> Reshape, as exporters write it: the shape comes at run time (a required
    CPU input of the real EP), and each run plans the Reshape for the shape it computed."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Concat", ["s", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["q", "target"], ["y"])]
    graph = helper.make_graph(nodes, "computed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6]),
                                                  helper.make_tensor_value_info("q", TensorProto.UINT8, ["n", 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [numpy_helper.from_array(np.array([-1]), "minus_one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    session = dml_ep.InferenceSession(model)
    for n in (2, 5):
        feeds = {"x": np.zeros((n, 6), np.float32), "q": codes((n, 2, 3))}
        np.testing.assert_array_equal(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))
        reshape = session.plan.entries[-1]
        assert isinstance(reshape, DmlNode) and reshape.output_shape == (n, 6)
    unplanned = dml_ep.InferenceSession(model).plan.entries[-1]  # before a run: no value to plan from
    assert isinstance(unplanned, FallbackNode) and "computed at run time" in unplanned.reason


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes, axis", [([(2, 3), (2, 5)], -1), ([(1, 2, 3, 4), (1, 1, 3, 4), (1, 4, 3, 4)], 1), ([(3,), (2,)], 0),
                                          ([(1, 2, 1, 3, 4), (1, 2, 2, 3, 4)], 2)])
def test_concat_joins_along_the_padded_axis(dtype, shapes, axis):
    operands = [Feed(codes(shape, dtype)) for shape in shapes]
    model, feeds = single_node_model("Concat", operands, dtype, len(shapes[0]), axis=axis)
    entry = plan_and_check(model, feeds, "JOIN")
    rank = len(shapes[0])
    assert entry.desc.InputCount == len(shapes) and entry.desc.OutputTensor.DimensionCount == max(rank, 4)
    assert entry.desc.Axis == axis % rank + max(rank, 4) - rank


@pytest.mark.host_sensitive
@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, -1], [3, -7], [0, 1], [1, -2]),
    ([0], [100], [1], [2]),
    ([-100], [2], None, None),
    ([4, 5], [0, 0], [0, 1], [-1, -3]),
])
def test_slice_windows_match_onnxruntime(starts, ends, axes, steps):
    x = codes((5, 6, 2))
    operands = [Feed(x), np.array(starts), np.array(ends), None if axes is None else np.array(axes), None if steps is None else np.array(steps)]
    while operands[-1] is None:
        operands.pop()
    model, feeds = single_node_model("Slice", operands, np.uint8, 3)
    plan_and_check(model, feeds, "SLICE1")



@pytest.mark.host_sensitive
def test_slice_steps_beyond_int32_reach_directml_as_the_dml_ep_clamps_them():
    """ReadCpuLocalTensorIntoInt32 clamps int64 steps into int32: DirectML's INT InputWindowStrides
    get 2^31-1 and -2^31 for steps of 2^62 and -2^62, one element per axis as for onnxruntime."""
    operands = [Feed(codes((5, 6, 2))), np.array([1, -1]), np.array([5, -100]), np.array([0, 1]), np.array([2**62, -(2**62)])]
    model, feeds = single_node_model("Slice", operands, np.uint8, 3)
    entry = plan_and_check(model, feeds, "SLICE1")
    assert entry.desc.InputWindowStrides == (2**31 - 1, -(2**31), 1)

@pytest.mark.host_sensitive
def test_slice_1_takes_its_window_from_attributes():
    model, feeds = single_node_model("Slice", [Feed(codes((4, 6), np.int8))], np.int8, 2, opset=9, starts=[1, 2], ends=[3, 1000], axes=[0, 1])
    plan_and_check(model, feeds, "SLICE1")


@pytest.mark.host_sensitive
@pytest.mark.parametrize("data_shape, indices, axis", [((5, 3), [[0, 4], [-1, 2]], 0), ((2, 5, 3), [4, 0, -5], 1), ((6,), 3, 0)])
def test_gather_picks_slices_with_negative_indices_counted_from_the_end(data_shape, indices, axis):
    indices = np.array(indices, np.int64)
    model, feeds = single_node_model("Gather", [Feed(codes(data_shape, np.int8)), Feed(indices)], np.int8,
                                     len(data_shape) - 1 + indices.ndim, axis=axis)
    plan_and_check(model, feeds, "GATHER")


# Every element type of the DML EP's data movement rows: floats with the bit patterns a move must keep
# (NaN payloads, denormals, -0), the integers at their extremes, bool as DirectML's UINT8.
TYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.bool_]


def values(shape, dtype):
    """Random bits of ``dtype`` (every float bit pattern, NaNs and denormals included), or random bools."""
    if dtype is np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    return RNG.integers(0, np.iinfo(unsigned).max, shape, dtype=unsigned, endpoint=True).view(dtype)


def same_bits(ours, theirs):
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours.view(f"u{ours.itemsize}") if ours.dtype.kind == "f" else ours,
                                  theirs.view(f"u{theirs.itemsize}") if theirs.dtype.kind == "f" else theirs)


MOVES = [
    ("Transpose", [(2, 3, 4)], [], {"perm": [2, 0, 1]}, 3, "ELEMENT_WISE_IDENTITY"),
    ("Reshape", [(2, 3, 4)], [np.array([4, -1])], {}, 2, "ELEMENT_WISE_IDENTITY"),
    ("Expand", [(3, 1, 4)], [np.array([2, 1, 5, 4])], {}, 4, "ELEMENT_WISE_IDENTITY"),
    ("Concat", [(2, 3), (2, 5)], [], {"axis": -1}, 2, "JOIN"),
    ("Slice", [(4, 6)], [np.array([3, 1]), np.array([0, 6]), np.array([0, 1]), np.array([-1, 2])], {}, 2, "SLICE1"),
    ("Gather", [(5, 3)], [np.array([[4, 0], [-1, 2]])], {"axis": 0}, 3, "GATHER"),
]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op_type, shapes, constants, attributes, rank, operator", MOVES)
def test_every_type_of_the_real_eps_rows_moves_bit_for_bit(dtype, op_type, shapes, constants, attributes, rank, operator):
    """Pure moves: onnxruntime's output bit for bit, float bit patterns (NaN payloads) included."""
    feeds_in = [Feed(values(shape, dtype)) for shape in shapes]
    model, feeds = single_node_model(op_type, [*feeds_in, *constants], dtype, rank, **attributes)
    session = dml_ep.InferenceSession(model)
    entry, = session.plan.entries
    assert isinstance(entry, DmlNode) and entry.operator == f"DML_OPERATOR_{operator}", entry.summary()
    assert entry.desc.OutputTensor.DataType.name == ("UINT8" if dtype is np.bool_ else np.dtype(dtype).name.upper())
    same_bits(session.run(None, feeds)[0], run_ort(model, feeds, "ort"))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("shape, target, expected", [((3, 1), (2, 1, 4), (2, 3, 4)), ((1,), (3,), (3,)), ((2, 3), (3,), (2, 3))])
def test_expand_broadcasts_with_zero_strides(shape, target, expected):
    x = codes(shape)
    model, feeds = single_node_model("Expand", [Feed(x), np.array(target)], np.uint8, len(expected))
    entry = plan_and_check(model, feeds, "ELEMENT_WISE_IDENTITY")
    assert entry.output_shape == expected
    assert shape == expected or 0 in entry.desc.InputTensor.Strides


def test_a_string_tensor_moved_is_left_to_the_cpu_as_in_the_real_ep():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])], [helper.make_tensor_value_info("y", TensorProto.STRING, [2])]),
        opset_imports=[helper.make_opsetid("", 19)])
    entry, = dml_ep.InferenceSession(model).plan.entries
    assert isinstance(entry, FallbackNode) and entry.kind != "not-modelled", entry.reason


@pytest.mark.host_sensitive
def test_transpose_of_opset_12_is_the_since_version_1_row():
    model, feeds = single_node_model("Transpose", [Feed(codes((2, 3)))], np.uint8, 2, opset=12)
    plan_and_check(model, feeds, "ELEMENT_WISE_IDENTITY")


def test_dxdispatch_binds_joins_inputs_as_a_list_and_replays_them(tmp_path):
    a, b = codes((1, 2, 3, 4)), codes((1, 3, 3, 4))
    model, feeds = single_node_model("Concat", [Feed(a), Feed(b)], np.uint8, 4, axis=1)
    export(model, str(tmp_path / "out"), feeds)
    exported = load(str(tmp_path / "out"))
    dispatch, = [c for c in exported.commands if c["type"] == "dispatch"]
    assert dispatch["bindings"]["InputTensors"] == ["in0", "in1"]
    replayed = exported.run()
    np.testing.assert_array_equal(replayed["y"], np.concatenate([a, b], axis=1))


def test_identity_applies_a_scale_bias_and_keeps_the_bits_of_the_unit_one():
    """ELEMENT_WISE_IDENTITY's ScaleBias: x * Scale + Bias rounded once ({0.5, 1}); {1, 0} a move (-0 and NaN payloads kept)."""
    from dml_ep.operators.element_wise_identity import DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC, identity
    from dml_ep.operators.importing import tensor

    def run(scale_bias, x):
        desc = DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC(InputTensor=tensor(x.dtype, (1, 1, 1, x.size)), OutputTensor=tensor(x.dtype, (1, 1, 1, x.size)),
                                                       ScaleBias=scale_bias)
        return identity(desc, {"InputTensor": x}, None, None).reshape(-1)

    # 2047 * 0.5 + 1 = 1024.5, a float16 tie: to even
    np.testing.assert_array_equal(run((0.5, 1.0), np.array([2, 4, -0.0, 2047], np.float16)), np.array([2, 3, 1, 1024], np.float16))
    x = np.array([0x8000, 0x7E01], np.uint16).view(np.float16)  # -0 and a NaN with a payload
    np.testing.assert_array_equal(run((1.0, 0.0), x).view(np.uint16), [0x8000, 0x7E01])
