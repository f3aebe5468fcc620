"""ConvInteger on CONVOLUTION_INTEGER: bit-exact against onnxruntime's CPU EP (both arithmetics give
the exact int32 sums; both engines), per-channel filter zero points against an int64 reference
(onnxruntime refuses them), the official ONNX cases, a 3-D fallback, and a quantize_dynamic CNN."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import _normalize_tensor

import dml_ep
import dml_ep.interop.backend
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.operators.convolution_integer import DML_CONVOLUTION_INTEGER_OPERATOR_DESC
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.realep.placement import ASSIGNED_TO_DML
from exact_values import exact_accumulator, resolve_pads
from onnx_builders import Feed, conv_integer, run_ort

ENGINES = ("onnxruntime", "numpy")


def session(model, arithmetic="onnxruntime", engine="onnxruntime", **options):
    sess = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine=engine, **options)
    return sess


def run_on_dml(model, feeds, arithmetic="onnxruntime", engine="onnxruntime", **options):
    """dml_ep's output, asserting the node ran as CONVOLUTION_INTEGER."""
    sess = session(model, arithmetic, engine, **options)
    y = sess.run(None, feeds)[0]
    (entry,) = sess.plan.entries
    assert isinstance(entry, DmlNode) and isinstance(entry.desc, DML_CONVOLUTION_INTEGER_OPERATOR_DESC), entry.summary()
    return y


def codes(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)


CASES = {  # name -> (x shape, w shape, attributes)
    "plain": ((1, 3, 7, 6), (4, 3, 3, 3), {}),
    "pads": ((2, 3, 6, 6), (5, 3, 3, 2), {"pads": [1, 2, 0, 1]}),
    "strides_dilations": ((1, 4, 11, 9), (3, 4, 3, 3), {"strides": [2, 3], "dilations": [2, 1], "pads": [1, 1, 2, 0]}),
    "same_upper": ((1, 2, 7, 8), (3, 2, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower": ((1, 2, 7, 8), (3, 2, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    "valid": ((1, 2, 7, 8), (3, 2, 2, 3), {"auto_pad": "VALID"}),
    "groups": ((1, 6, 6, 5), (4, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 5, 6, 6), (5, 1, 3, 3), {"group": 5, "pads": [1, 0, 1, 2]}),
    "pointwise": ((2, 8, 4, 5), (6, 8, 1, 1), {}),
    "conv1d": ((2, 3, 12), (4, 3, 3), {"pads": [2, 1], "strides": [2], "dilations": [2]}),
    "conv1d_grouped": ((1, 4, 10), (6, 2, 3), {"group": 2, "auto_pad": "SAME_UPPER"}),
}
TYPES = [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8), (np.int8, np.uint8)]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("x_type,w_type", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("case", CASES)
def test_bit_exact_against_onnxruntime(case, x_type, w_type, engine):
    x_shape, w_shape, attributes = CASES[case]
    rng = np.random.default_rng(hash((case, x_type, w_type)) % 2**32)
    x, w = codes(rng, x_type, x_shape), codes(rng, w_type, w_shape)
    x_zp, w_zp = codes(rng, x_type, ()), codes(rng, w_type, ())
    model, feeds = conv_integer(x, w, x_zp, w_zp, **attributes)
    starts, ends = resolve_pads(x_shape[2:], w_shape[2:], attributes.get("strides", [1] * (len(x_shape) - 2)),
                                attributes.get("dilations", [1] * (len(x_shape) - 2)), attributes.get("pads"), attributes.get("auto_pad"))
    exact = exact_accumulator(x, x_zp, w, w_zp, attributes.get("group", 1), attributes.get("strides", [1] * len(starts)),
                              attributes.get("dilations", [1] * len(starts)), starts, ends)
    expected = {"onnxruntime": run_ort(model, feeds, "ort"), "directml": exact}  # the host's onnxruntime; the exact sums
    for arithmetic, want in expected.items():
        y = run_on_dml(model, feeds, arithmetic, engine)
        assert y.dtype == np.int32 and y.shape == want.shape
        np.testing.assert_array_equal(y, want)
    if not (host_saturates_u8s8() and w_type == np.uint8 and x_type == np.int8):  # MLAS's U8S8, the filter as A
        np.testing.assert_array_equal(expected["onnxruntime"], exact)  # padding counts as the zero point in onnxruntime too


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ENGINES)
def test_zero_points_absent_and_extreme(engine):
    rng = np.random.default_rng(1)
    x, w = np.full((1, 4, 5, 5), 255, np.uint8), np.full((3, 4, 3, 3), -128, np.int8)
    w[:, ::2] = 127
    for operands in ([], [np.uint8(0)], [np.uint8(255), np.int8(-128)], [None, np.int8(127)]):
        model, feeds = conv_integer(x, w, *operands, pads=[1, 1, 1, 1])
        np.testing.assert_array_equal(run_on_dml(model, feeds, engine=engine), run_ort(model, feeds, "ort"))
    x = codes(rng, np.uint8, (1, 4, 5, 5))
    model, feeds = conv_integer(x, w)
    np.testing.assert_array_equal(run_on_dml(model, feeds, engine=engine), run_ort(model, feeds, "ort"))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ENGINES)
def test_run_time_zero_points(engine):
    """x_zero_point (and w_zero_point, and w) fed as graph inputs: read at each run."""
    rng = np.random.default_rng(2)
    x, w = codes(rng, np.uint8, (1, 3, 6, 6)), codes(rng, np.int8, (4, 3, 3, 3))
    model, _ = conv_integer(x, w, Feed(np.uint8(0)), np.int8(2), pads=[1, 1, 1, 1])
    sess = session(model, engine=engine)
    for x_zp in (0, 131, 255, 7):
        feeds = {"in0": codes(rng, np.uint8, x.shape), "in2": np.array(x_zp, np.uint8)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(model, feeds, "ort"))
        assert isinstance(sess.plan.entries[0], DmlNode)
    model, _ = conv_integer(x, Feed(w), Feed(np.uint8(0)), Feed(np.int8(0)), strides=[2, 1], pads=[0, 1, 2, 1])
    sess = session(model, engine=engine)
    for w_zp in (0, -128, 5, 0):
        feeds = {"in0": x, "in1": codes(rng, np.int8, w.shape), "in2": np.array(9, np.uint8), "in3": np.array(w_zp, np.int8)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(model, feeds, "ort"))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("group", [1, 2])
def test_per_channel_filter_zero_point(engine, group):
    """onnxruntime's CPU kernel refuses it (Non per-tensor quantization is not supported now); the
    real EP runs it on DirectML, and dml_ep gives the exact sums."""
    rng = np.random.default_rng(3)
    x, w = codes(rng, np.uint8, (2, 4, 6, 5)), codes(rng, np.int8, (6, 4 // group, 3, 3))
    w_zp, x_zp = codes(rng, np.int8, (6,)), np.uint8(100)
    model, feeds = conv_integer(x, w, x_zp, w_zp, pads=[1, 0, 1, 1], group=group)
    with pytest.raises(Exception, match="Non per-tensor quantization is not supported"):
        run_ort(model, feeds, "ort")
    expected = exact_accumulator(x, x_zp, w, w_zp, group, [1, 1], [1, 1], [1, 0], [1, 1])
    for arithmetic in ("onnxruntime", "directml"):
        np.testing.assert_array_equal(run_on_dml(model, feeds, arithmetic, engine), expected)


def test_u8_filter_s8_input_saturates_as_mlas_u8s8():
    """uint8 filter x int8 input is MLAS's U8S8 GEMM (the filter is A): on a saturating host the
    pairs of products along the NCHW im2col K (channel outer, tap inner) saturate to int16."""
    x = np.full((1, 2, 3, 3), -128, np.int8)
    x[0, 1] = 127
    w = np.full((1, 2, 2, 1), 255, np.uint8)  # K = (c0 t0, c0 t1 | c1 t0, c1 t1): pairs within one channel
    model, feeds = conv_integer(x, w)
    exact = run_on_dml(model, feeds, "directml")
    assert exact[0, 0, 0, 0] == 255 * (-128 * 2 + 127 * 2)
    saturated = run_on_dml(model, feeds, "onnxruntime", u8s8_saturation=True)
    pairs = np.clip(255 * -128 * 2, -32768, 32767) + np.clip(255 * 127 * 2, -32768, 32767)
    np.testing.assert_array_equal(saturated, np.full_like(exact, pairs))
    # the quantize_dynamic pair (uint8 input, int8 filter) is MLAS's S8U8: exact on every x86 host
    model, feeds = conv_integer(np.full((1, 2, 3, 3), 255, np.uint8), np.full((1, 2, 2, 1), -128, np.int8))
    np.testing.assert_array_equal(run_on_dml(model, feeds, "onnxruntime", u8s8_saturation=True), run_on_dml(model, feeds, "directml"))


@pytest.mark.host_sensitive
def test_conv3d_falls_back_assigned_to_dml():
    rng = np.random.default_rng(4)
    x, w = codes(rng, np.uint8, (1, 2, 4, 4, 4)), codes(rng, np.uint8, (3, 2, 2, 2, 2))
    model, feeds = conv_integer(x, w, np.uint8(1), np.uint8(2))
    sess = session(model)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(model, feeds, "ort"))
    (entry,) = sess.plan.entries
    assert isinstance(entry, FallbackNode) and ASSIGNED_TO_DML in entry.reason
    assert "3-D convolution is not supported (DirectML's CONVOLUTION_INTEGER is 1-D or 2-D)" in entry.reason


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in load_model_tests(kind="node") if re.match(r"^test_convinteger_", c.name)])
def test_official_cases_on_directml(case):
    """The official cases (every input fed, the zero points bound at run time) run on
    CONVOLUTION_INTEGER and give ONNX's expected output."""
    rep = dml_ep.interop.backend.prepare(case.model)
    for inputs, expected in case.data_sets:
        outputs = rep.run([_normalize_tensor(t) for t in inputs])
        (entry,) = rep.session.plan.entries
        assert isinstance(entry, DmlNode) and isinstance(entry.desc, DML_CONVOLUTION_INTEGER_OPERATOR_DESC)
        np.testing.assert_array_equal(outputs[0], _normalize_tensor(expected[0]))


def quantize_dynamic_cnn(tmp_path):
    """A small float CNN (2-D and 1-D-free: Conv with bias and padding, Relu, a strided grouped Conv)
    quantized by onnxruntime's quantize_dynamic: DynamicQuantizeLinear -> ConvInteger(u8, s8)."""
    from onnxruntime.quantization import quantize_dynamic

    rng = np.random.default_rng(5)
    initializers = [numpy_helper.from_array(a, n) for n, a in [
        ("w1", rng.normal(size=(8, 3, 3, 3)).astype(np.float32)), ("b1", rng.normal(size=8).astype(np.float32)),
        ("w2", rng.normal(size=(8, 4, 3, 3)).astype(np.float32)), ("w3", rng.normal(size=(5, 8, 1, 1)).astype(np.float32))]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2], group=2, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Conv", ["r2", "w3"], ["y"])]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "cnn.onnx")
    quantize_dynamic(tmp_path / "cnn.onnx", tmp_path / "cnn_q.onnx", op_types_to_quantize=["Conv"])
    return onnx.load(tmp_path / "cnn_q.onnx"), {"x": rng.normal(size=(1, 3, 10, 10)).astype(np.float32)}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("engine", ENGINES)
def test_quantize_dynamic_cnn(tmp_path, engine):
    model, feeds = quantize_dynamic_cnn(tmp_path)
    conv_integers = [n for n in model.graph.node if n.op_type == "ConvInteger"]
    assert len(conv_integers) == 3
    sess = session(model, engine=engine)
    y = sess.run(None, feeds)[0]
    on_dml = [e for e in sess.plan.entries if isinstance(e, DmlNode) and isinstance(e.desc, DML_CONVOLUTION_INTEGER_OPERATOR_DESC)]
    assert len(on_dml) == 3
    assert {e.desc.InputTensor.DataType.name for e in on_dml} == {"UINT8"} and {e.desc.FilterTensor.DataType.name for e in on_dml} == {"INT8"}
    assert not any(e.desc.InputZeroPointTensor.Flags for e in on_dml)  # bound at run time (from DynamicQuantizeLinear)
    np.testing.assert_array_equal(y, run_ort(model, feeds, "ort"))


def test_desc_validation():
    """DirectML's rules: INT32 output, {1,OC,1,1} per-channel filter zero points, 2 spatial dimensions."""
    from dml_ep.core.errors import DescValidationError
    from dml_ep.operators.importing import tensor

    def desc(**changes):
        fields = dict(InputTensor=tensor(np.uint8, (1, 2, 5, 5)), InputZeroPointTensor=tensor(np.uint8, (1, 1, 1, 1)),
                      FilterTensor=tensor(np.int8, (3, 2, 3, 3)), FilterZeroPointTensor=tensor(np.int8, (1, 3, 1, 1)),
                      OutputTensor=tensor(np.int32, (1, 3, 3, 3)), DimensionCount=2, Strides=(1, 1), Dilations=(1, 1),
                      StartPadding=(0, 0), EndPadding=(0, 0), GroupCount=1)
        return DML_CONVOLUTION_INTEGER_OPERATOR_DESC(**{**fields, **changes})

    desc().validate("2_1")
    for changes, message in [({"OutputTensor": tensor(np.uint8, (1, 3, 3, 3))}, "OutputTensor: DataType UINT8"),
                             ({"FilterZeroPointTensor": tensor(np.int8, (1, 1, 1, 3))}, "FilterZeroPointTensor: sizes"),
                             ({"InputZeroPointTensor": tensor(np.int8, (1, 1, 1, 1))}, "InputZeroPointTensor: DataType INT8 must equal"),
                             ({"OutputTensor": tensor(np.int32, (1, 3, 3, 4))}, "OutputTensor: sizes"),
                             ({"DimensionCount": 3, "Strides": (1, 1, 1)}, "DimensionCount"),
                             ({"GroupCount": 2}, "GroupCount")]:
        with pytest.raises(DescValidationError, match=re.escape(message)):
            desc(**changes).validate("2_1")
    with pytest.raises(DescValidationError, match="requires"):
        desc().validate("2_0")


@pytest.mark.host_sensitive
def test_run_time_zero_point_of_a_node_planned_at_run_time():
    """A symbolic batch plans the node only when run, with the run's tensors: the kernel must
    still take x_zero_point from each run, not keep the first one."""
    rng = np.random.default_rng(4)
    x, w = codes(rng, np.uint8, (1, 3, 6, 6)), codes(rng, np.int8, (4, 3, 3, 3))
    model, _ = conv_integer(x, w, Feed(np.uint8(0)), np.int8(2), pads=[1, 1, 1, 1])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    sess = session(model)
    for batch, x_zp in ((2, 7), (2, 200), (3, 0)):
        feeds = {"in0": codes(rng, np.uint8, (batch, 3, 6, 6)), "in2": np.array(x_zp, np.uint8)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_ort(model, feeds, "ort"))
