"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear on ELEMENT_WISE_QUANTIZE_LINEAR,
ELEMENT_WISE_DEQUANTIZE_LINEAR and DYNAMIC_QUANTIZE_LINEAR.

References: onnxruntime (single-node models; bit-exact in the "onnxruntime" arithmetic, on the
engine DML_EP_ENGINE selects), float32 quotients written out for "directml" (the same codes), exact
rationals for the ideal compare uses, ONNX's official node tests.
"""

import re
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import _normalize_tensor

import dml_ep
import dml_ep.interop.backend
from dml_ep.core.errors import QuantizationParameterError
from dml_ep.interop.dxdispatch import export as dxdispatch_export
from dml_ep.interop.dxdispatch import load as dxdispatch_load
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from exact_values import exact_quantize, float32_quantize

rng = np.random.default_rng(7)
F32 = np.float32


def model_of(op_type, inputs, constants, outputs, opset=19, domain="", **attributes):
    """One node; ``inputs`` {name: array} are graph inputs, ``constants`` initializers (a None
    value omits the input), ``outputs`` [(name, elem type)]."""
    names = [name for name in (*inputs, *constants)]
    order = attributes.pop("order", names)
    node_inputs = ["" if constants.get(n, 0) is None else n for n in order]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    node = helper.make_node(op_type, node_inputs, [n for n, _ in outputs], domain=domain, **attributes)
    graph = helper.make_graph(
        [node], "one",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in constants.items() if a is not None])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


def run_both(model, feeds, arithmetic="onnxruntime", **options):
    """dml_ep's outputs (asserting every node ran on DirectML) and onnxruntime's (one thread)."""
    session = dml_ep.InferenceSession(model, arithmetic=arithmetic, **options)
    assert all(isinstance(e, DmlNode) for e in session.plan.entries), [getattr(e, "reason", "") for e in session.plan.entries]
    ours = session.run(None, feeds)
    theirs = cpu_session(model, threads=1).run(None, feeds)
    return ours, theirs


def assert_bit_exact(ours, theirs):
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b, strict=True)


def adversarial(scale: float, shape, zero_point=0) -> np.ndarray:
    """Random values, exact ties (k + 1/2) * scale, their float32 neighbours, NaN, +-inf, huge."""
    n = int(np.prod(shape))
    k = rng.integers(-300, 300, n).astype(np.float64)
    ties = ((k + 0.5) * scale).astype(F32)
    kinds = rng.integers(0, 5, n)
    x = np.where(kinds == 0, rng.uniform(-3, 3, n).astype(F32) * F32(scale * 60), ties)
    x = np.where(kinds == 3, np.nextafter(ties, F32(np.inf)), x)
    x = np.where(kinds == 4, np.nextafter(ties, F32(-np.inf)), x)
    x[:4] = [np.nan, np.inf, -np.inf, 3e38]
    return x.astype(F32).reshape(shape)


# --- QuantizeLinear ----------------------------------------------------------------------------


@pytest.mark.host_sensitive
@pytest.mark.parametrize("opset", [10, 13, 19])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_quantize_linear_per_tensor_is_bit_exact_in_both_arithmetics(opset, dtype):
    scale = F32(0.039215686)  # ORT's Int8 test scale: 5 / scale is 127.49999 in float32
    x = adversarial(float(scale), (4, 64))
    x[0, 4:6] = [5.0, -5.0]
    zero_point = np.array(3 if dtype == np.uint8 else -3, dtype)
    model = model_of("QuantizeLinear", {"x": x}, {"s": scale, "z": zero_point}, [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))], opset)
    ours, theirs = run_both(model, {"x": x})
    assert_bit_exact(ours, theirs)
    (directml,) = dml_ep.InferenceSession(model).run(None, {"x": x})
    np.testing.assert_array_equal(directml, float32_quantize(x, scale, zero_point, dtype), strict=True)
    np.testing.assert_array_equal(directml, theirs[0], strict=True)
    assert np.any(directml != exact_quantize(x, scale, zero_point, dtype))  # the near-ties: float32 is not the exact ideal
    # ties: x / scale exactly k + 1/2 rounds to even
    assert exact_quantize(np.array([F32(2.5) * F32(0.25)]), F32(0.25), 0, dtype)[0] == 2


def test_quantize_linear_division_not_reciprocal_at_orts_dml_skip():
    """ORT's QuantizeLinearOpTest.Int8 skips DML at x = -5, scale 0.039215686: -127 expected, DirectML
    gives -128. The float32 division gives -127.49999 -> -127 (dml_ep's point value); the multiply by
    the float32 reciprocal, a form D3D allows, gives -127.5 -> -128, DirectML's value."""
    x, scale = np.array([-5.0, 5.0], F32), F32(0.039215686)
    model = model_of("QuantizeLinear", {"x": x}, {"s": scale, "z": np.int8(0)}, [("y", TensorProto.INT8)], 13)
    (directml,) = dml_ep.InferenceSession(model).run(None, {"x": x})
    assert directml.tolist() == [-127, 127] == float32_quantize(x, scale, 0, np.int8).tolist()
    assert float32_quantize(x, scale, 0, np.int8, reciprocal=True).tolist() == [-128, 127]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_linear_per_axis_with_run_time_parameters(axis):
    x = adversarial(0.05, (3, 4, 5))
    length = x.shape[axis]
    scale = rng.uniform(0.01, 0.1, length).astype(F32)
    zero_point = rng.integers(0, 255, length).astype(np.uint8)
    model = model_of("QuantizeLinear", {"x": x, "s": scale, "z": zero_point}, {}, [("y", TensorProto.UINT8)], axis=axis)
    feeds = {"x": x, "s": scale, "z": zero_point}
    ours, theirs = run_both(model, feeds)
    assert_bit_exact(ours, theirs)
    shape = [1] * 3
    shape[axis] = length
    (directml,) = dml_ep.InferenceSession(model).run(None, feeds)
    np.testing.assert_array_equal(directml, float32_quantize(x, scale.reshape(shape), zero_point.reshape(shape), np.uint8))


@pytest.mark.host_sensitive
def test_quantize_linear_without_zero_point_defaults_to_zero_and_needs_fl_6_2():
    x = adversarial(0.125, (2, 50))  # a power-of-two scale: exact ties, which round to even
    model = model_of("QuantizeLinear", {"x": x}, {"s": F32(0.125)}, [("y", TensorProto.UINT8)])
    ours, theirs = run_both(model, {"x": x})
    assert_bit_exact(ours, theirs)
    np.testing.assert_array_equal(dml_ep.InferenceSession(model).run(None, {"x": x})[0], exact_quantize(x, F32(0.125), 0, np.uint8))
    (entry,) = dml_ep.InferenceSession(model, feature_level="6_1").plan.entries
    assert "null ZeroPointTensor requires DML_FEATURE_LEVEL_6_2" in entry.reason and "fails creating the operator" in entry.reason


@pytest.mark.host_sensitive
@pytest.mark.parametrize("axis", [None, 1])
def test_float16_quantize_linear_19_is_float32_quotient_in_both_arithmetics(axis):
    """Float16 input and scale (QuantizeLinear-19, FL 6_0): widened to float32, then the float32
    quotient; onnxruntime's CPU EP gives the same bits."""
    scale = np.array([0.0392, 0.125, 3.3], np.float16) if axis else np.float16(0.00731)
    zero_point = np.array([3, 128, 250], np.uint8) if axis else np.uint8(3)
    x = adversarial(0.05, (4, 3, 50)).astype(np.float16)
    model = model_of("QuantizeLinear", {"x": x}, {"s": scale, "z": zero_point}, [("y", TensorProto.UINT8)], 19,
                     **({"axis": axis} if axis else {}))
    for arithmetic in ("onnxruntime", "directml"):
        ours, theirs = run_both(model, {"x": x}, arithmetic)
        assert_bit_exact(ours, theirs)
    shape = (1, 3, 1) if axis else ()
    want = float32_quantize(x.astype(F32), np.reshape(scale, shape).astype(F32), np.reshape(zero_point, shape), np.uint8)
    np.testing.assert_array_equal(ours[0], want, strict=True)
    (entry,) = dml_ep.InferenceSession(model, feature_level="5_2").plan.entries
    assert "DataType FLOAT16 is not supported at DML_FEATURE_LEVEL_5_2" in entry.reason


def test_quantize_linear_fallbacks_say_what_the_real_ep_does():
    x = np.zeros((2, 3), F32)
    (entry,) = dml_ep.InferenceSession(model_of("QuantizeLinear", {"x": x}, {"s": F32(0.5), "z": np.uint8(0)},
                                                [("y", TensorProto.UINT8)], opset=21)).plan.entries
    assert isinstance(entry, DmlNode) and entry.operator == "DML_OPERATOR_QUANTIZE"  # DmlOperatorQuantization21
    (entry,) = dml_ep.InferenceSession(model_of("QuantizeLinear", {"x": x}, {"s": F32(0.5), "z": np.uint8(0)},
                                                [("y", TensorProto.UINT8)], opset=23)).plan.entries
    assert entry.reason == ("QuantizeLinear-23: the DML EP of onnxruntime 1.24 registers QuantizeLinear 10, 13, 19, 21, not 23 "
                            "(a kernel matches only its own since-version); on the CPU in the real EP too")


def test_run_time_zero_scale_names_the_node():
    x = np.ones((2, 3), F32)
    model = model_of("QuantizeLinear", {"x": x, "s": np.array(0.0, F32)}, {"z": np.uint8(1)}, [("y", TensorProto.UINT8)], order=["x", "s", "z"])
    model.graph.node[0].name = "quant"
    session = dml_ep.InferenceSession(model)
    assert isinstance(session.plan.entries[0], DmlNode)
    with pytest.raises(QuantizationParameterError, match="quant.*not positive"):
        session.run(None, {"x": x, "s": np.array(0.0, F32)})


# --- DequantizeLinear --------------------------------------------------------------------------


def exact_float32(value: Fraction) -> np.float32:
    """The float32 nearest to ``value``, halves to even (no overflow in these tests)."""
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - value), int(np.float32(c).view(np.int32)) & 1))
    return np.float32(best)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("opset, domain", [(10, ""), (13, ""), (19, ""), (19, "com.microsoft")])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_dequantize_linear_is_bit_exact(opset, domain, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (3, 40), dtype=dtype, endpoint=True)
    x[0, :2] = [info.min, info.max]
    per_axis = opset > 10  # opset 10's scale is a scalar (no axis attribute)
    scale = rng.uniform(0.001, 0.1, 40 if per_axis else ()).astype(F32)
    zero_point = np.zeros(scale.shape, dtype) if dtype == np.int32 else rng.integers(info.min, info.max, scale.shape, dtype=dtype)
    axis = {"axis": 1} if per_axis else {}
    model = model_of("DequantizeLinear", {"x": x}, {"s": scale, "z": zero_point}, [("y", TensorProto.FLOAT)], opset, domain, **axis)
    ours, theirs = run_both(model, {"x": x})
    assert_bit_exact(ours, theirs)
    if dtype != np.int32:  # 8-bit: the directml arithmetic equals onnxruntime's
        assert_bit_exact(dml_ep.InferenceSession(model).run(None, {"x": x}), theirs)


@pytest.mark.host_sensitive
def test_dequantize_linear_directml_rounds_wide_int32_once():
    """|x - zp| > 2^24: onnxruntime rounds to float32 then multiplies; DirectML's ideal rounds once."""
    x = np.array([2**24 + 1, -(2**31), 2**31 - 1, 123456789, -987654321, 3, 2**29 + 7], np.int32)
    scale = F32(0.1)
    model = model_of("DequantizeLinear", {"x": x, "s": np.array(scale)}, {}, [("y", TensorProto.FLOAT)])
    feeds = {"x": x, "s": np.array(scale)}
    ours, theirs = run_both(model, feeds)
    assert_bit_exact(ours, theirs)
    (ideal,) = dml_ep.InferenceSession(model).run(None, feeds)
    expected = np.array([exact_float32(int(v) * Fraction(float(scale))) for v in x], F32)
    np.testing.assert_array_equal(ideal, expected, strict=True)
    assert np.any(ideal != theirs[0])


def test_dequantize_linear_float16_output_falls_back_on_dml():
    x = np.zeros((2, 3), np.uint8)
    (entry,) = dml_ep.InferenceSession(model_of("DequantizeLinear", {"x": x}, {"s": np.float16(0.5), "z": np.uint8(0)},
                                                [("y", TensorProto.FLOAT16)])).plan.entries
    assert "float16 output is not modelled by dml_ep" in entry.reason and "on DirectML in the real EP" in entry.reason


# --- DynamicQuantizeLinear ---------------------------------------------------------------------

DQL_OUTPUTS = [("y", TensorProto.UINT8), ("y_scale", TensorProto.FLOAT), ("y_zero_point", TensorProto.UINT8)]


def dql_inputs():
    yield "random", rng.uniform(-3, 5, (2, 300)).astype(F32)
    yield "zeros", np.zeros((3, 7), F32)
    yield "positive", rng.uniform(1, 2, (5, 9)).astype(F32)
    yield "negative", -rng.uniform(1, 2, (41,)).astype(F32)
    yield "constant", np.full((2, 2, 3), 0.7, F32)
    scale = F32(6.0) / F32(255)
    k = rng.integers(-80, 160, 200).astype(np.float64)
    ties = ((k + 0.5) * np.float64(scale)).astype(F32)
    yield "ties", np.concatenate([ties, [F32(-80 * scale), F32(175 * scale)], np.nextafter(ties[:50], F32(9))]).astype(F32)
    nan = rng.uniform(-1, 1, 77).astype(F32)
    nan[[0, 13, 40, 76]] = np.nan
    yield "nan", nan
    yield "official", np.array([0, 2, -3, -2.5, 1.34, 0.5], F32)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name, x", list(dql_inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_dynamic_quantize_linear(name, x):
    model = model_of("DynamicQuantizeLinear", {"x": x}, {}, DQL_OUTPUTS, opset=11)
    ours, theirs = run_both(model, {"x": x})
    assert_bit_exact(ours, theirs)
    y, scale, zero_point = dml_ep.InferenceSession(model).run(None, {"x": x})  # directml
    assert_bit_exact([scale, zero_point], theirs[1:])  # the parameters as onnxruntime computes them
    np.testing.assert_array_equal(y, float32_quantize(x, scale, zero_point, np.uint8), strict=True)
    if name == "official":  # 0.5 / scale is 25.4999... exactly, 25.5 as a float32 quotient: 179 in both, 178 ideal
        assert y[5] == theirs[0][5] == 179 and exact_quantize(x, scale, zero_point, np.uint8)[5] == 178
    if name == "zeros":
        assert scale == 1 and zero_point == 0


@pytest.mark.host_sensitive
def test_dynamic_quantize_linear_feeds_matmul_integer_and_exports():
    """Its three outputs feed the next node at run time (here on the fallback), and DxDispatch
    exports them as the node's outputs; the replay gives the same values."""
    a = rng.uniform(-1, 1, (4, 16)).astype(F32)
    b = rng.integers(0, 255, (16, 8)).astype(np.uint8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["a"], ["aq", "as", "az"], name="dql"),
             helper.make_node("MatMulInteger", ["aq", "b", "az"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "as"], ["y"])]
    graph = helper.make_graph(nodes, "dql_mm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime")
    assert isinstance(session.plan.entries[0], DmlNode) and session.plan.entries[0].outputs == ["aq", "as", "az"]
    np.testing.assert_array_equal(session.run(None, {"a": a})[0], cpu_session(model, threads=1).run(None, {"a": a})[0])


def test_dynamic_quantize_linear_dxdispatch_round_trip(tmp_path):
    x = rng.uniform(-2, 3, (2, 3, 4)).astype(F32)
    model = model_of("DynamicQuantizeLinear", {"x": x}, {}, DQL_OUTPUTS, opset=11)
    made = dxdispatch_export(model, str(tmp_path / "out"), {"x": x})
    command = made.model["commands"][0]
    assert [command["bindings"][f] for f in ("OutputTensor", "OutputScaleTensor", "OutputZeroPointTensor")] == ["y", "y_scale", "y_zero_point"]
    replayed = dxdispatch_load(str(tmp_path / "out")).run()
    assert set(replayed) == {"y", "y_scale", "y_zero_point"}
    for name in replayed:
        np.testing.assert_array_equal(replayed[name].reshape(-1), made.values[name].reshape(-1), err_msg=name)


# --- the official ONNX node tests ---------------------------------------------------------------


def _cases(pattern):
    return [pytest.param(c, id=c.name) for c in load_model_tests(kind="node") if re.fullmatch(pattern, c.name)]


def _data(case):
    inputs, expected = ([_normalize_tensor(t) for t in tensors] for tensors in case.data_sets[0])
    return inputs, expected


@pytest.mark.parametrize("arithmetic", ["directml", "onnxruntime"])
@pytest.mark.parametrize("case", _cases(r"test_dynamicquantizelinear(_min_adjusted|_max_adjusted)?"))
def test_official_dynamic_quantize_linear_runs_on_directml(case, arithmetic):
    rep = dml_ep.interop.backend.prepare(case.model, arithmetic=arithmetic)
    assert all(isinstance(e, DmlNode) for e in rep.session.plan.entries)
    inputs, expected = _data(case)
    for ours, want in zip(rep.run(inputs), expected):
        np.testing.assert_array_equal(ours, want, strict=True)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", _cases(r"test_(de)?quantizelinear(_axis)?"))
def test_official_quantize_cases_at_opset_19_run_on_directml(case):
    """The official cases are written at opset 28 (no DML row: CPU); at opset 19 dml_ep runs them
    on DirectML and matches onnxruntime, in both arithmetics (their values are no near-ties)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = 19
    inputs, _ = _data(case)
    feeds = {i.name: np.asarray(a) for i, a in zip(model.graph.input, inputs)}
    ours, theirs = run_both(model, feeds)
    assert_bit_exact(ours, theirs)
    assert_bit_exact(dml_ep.InferenceSession(model).run(None, feeds), theirs)
