"""ONNX's official node test cases through :mod:`dml_ep.backend` (the public name of :mod:`dml_ep.interop.backend`), run by ONNX's own test runner.

Covered: QLinearConv, QLinearMatMul, MaxPool (the 8-bit case rerun at opset 12 on DirectML), Add (float Add maps to ELEMENT_WISE_ADD1, integer adds run on
fallback), Sum, and QuantizeLinear / DequantizeLinear (fallback). In the official cases every
input, scales included, is a graph input, so the quantized ops run on fallback (the importer needs
constant scales); ``test_official_quantized_cases_on_directml`` reruns them with the scales, zero
points and weights as initializers so the DirectML kernels meet the official data too.
``test_official_cases_pass_where_onnxruntime_passes`` sweeps every official case whose name
matches ``SWEEP`` (issue 9): each must pass unless onnxruntime's own backend fails it here.
"""

import re

import numpy as np
import onnx
import onnx.backend.test
import pytest
from onnx import helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import _normalize_tensor

import dml_ep.backend
from dml_ep.core.enums import DML_FEATURE_LEVEL
from dml_ep.core.errors import DmlEpError, ModelError
from dml_ep.operators.nodes import DmlNode

OPS = r"^test_(qlinearconv|qlinearmatmul|add|sum|quantizelinear|dequantizelinear)_"

backend_test = onnx.backend.test.BackendTest(dml_ep.backend, __name__).include(OPS)
# The Q/DQ cases are all written at ai.onnx opset 28: they run on the fallback, and onnxruntime
# 1.32 has no QuantizeLinear or DequantizeLinear kernel at that opset (NOT_IMPLEMENTED). Expected
# failures, so that a newer onnxruntime that runs them is noticed.
backend_test.xfail(r"^test_(de)?quantizelinear_")

# Only the included CPU cases: the runner otherwise lists all 4000+ ONNX tests as skipped.
OnnxBackendNodeModelTest = backend_test.test_cases["OnnxBackendNodeModelTest"]
for _name in [n for n in vars(OnnxBackendNodeModelTest) if n.startswith("test_")]:
    if not (re.search(OPS, _name) and _name.endswith("_cpu")):
        delattr(OnnxBackendNodeModelTest, _name)


def _official_cases(pattern):
    return [pytest.param(case, id=case.name) for case in load_model_tests(kind="node") if re.match(pattern, case.name)]


def _with_constant_parameters(case):
    """The case's model with every input but the first as an initializer, and the first input's data."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, expected = ([_normalize_tensor(t) for t in tensors] for tensors in case.data_sets[0])
    graph = model.graph
    graph.initializer.extend(numpy_helper.from_array(a, v.name) for v, a in zip(graph.input[1:], inputs[1:]))
    del graph.input[1:]
    return model, inputs[0], expected


@pytest.mark.parametrize("case", _official_cases(r"^test_(qlinearconv|qlinearmatmul|matmulinteger|convinteger|dynamicquantizelinear)"))
def test_official_quantized_cases_with_run_time_parameters_on_directml(case):
    """As written, every scale and zero point a graph input: the real EP binds them as tensors, so
    each quantized node runs on DirectML (float16 scales excepted: the real EP fails creating the
    operator); the _expanded cases' float nodes are float DirectML operators dml_ep does not model."""
    inputs, expected = ([_normalize_tensor(t) for t in tensors] for tensors in case.data_sets[0])
    session = dml_ep.backend.prepare(case.model, arithmetic="onnxruntime").session
    outputs = session.run(None, dict(zip((i.name for i in case.model.graph.input), inputs)))
    for entry in session.executor.plan.entries:
        if entry.node.op_type in ("QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "QuantizeLinear"):
            assert isinstance(entry, DmlNode) or "float16" in case.name and "FLOAT32 scales" in entry.reason, entry.summary()
    for y, want in zip(outputs, expected):  # ONNX's expected outputs (onnxruntime refuses convinteger_with_padding's per-channel zero point)
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("case", _official_cases(r"^test_(qlinearconv|qlinearmatmul)"))
def test_official_quantized_cases_on_directml(case):
    """With constant parameters the node runs on DirectML; float16 scales (QLinearMatMul-21) fall back."""
    model, x, expected = _with_constant_parameters(case)
    rep = dml_ep.backend.prepare(model)
    (entry,) = rep.session.plan.entries
    if "float16" in case.name:  # DirectML's quantized operators take FLOAT32 scales only
        assert "float16" in entry.reason
    else:
        assert isinstance(entry, DmlNode)
    (y,) = rep.run([x])
    np.testing.assert_array_equal(y, expected[0])


@pytest.mark.parametrize("case", _official_cases(r"^test_maxpool_.*u?int8$"))
def test_official_8_bit_maxpool_cases_at_opset_12_on_directml(case):
    """The official cases are written at opset 22, whose MaxPool has no DML EP row (the sweep runs
    them on the fallback); MaxPool-12 has the same semantics and runs on DirectML."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    model.opset_import[0].version = 12
    rep = dml_ep.backend.prepare(model)
    (entry,) = rep.session.plan.entries
    assert isinstance(entry, DmlNode), entry.summary()
    inputs, expected = ([_normalize_tensor(t) for t in tensors] for tensors in case.data_sets[0])
    for y, want in zip(rep.run(inputs), expected, strict=True):
        np.testing.assert_array_equal(y, want)


DATA_MOVEMENT = r"^test_(transpose|reshape|flatten|squeeze|unsqueeze|concat|slice|gather(?!_elements|nd))(_|$)"


def _as_uint8(model: onnx.ModelProto) -> onnx.ModelProto:
    """An official float32 case with its float32 tensors retyped uint8 (indices and shapes stay), at
    opset 21: the cases are written at opset 25, whose versions of these ops have no DML EP row
    (the sweep runs them on the fallback); their version at 21 has the same semantics."""
    retyped = onnx.ModelProto()
    retyped.CopyFrom(model)
    retyped.opset_import[0].version = 21
    for value in (*retyped.graph.input, *retyped.graph.output):
        if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            value.type.tensor_type.elem_type = onnx.TensorProto.UINT8
    return retyped


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", _official_cases(DATA_MOVEMENT))
def test_official_data_movement_cases_on_uint8_codes_run_on_directml(case):
    """The official data-movement cases are float32; the same graphs on uint8 codes (the tensors
    a quantized model moves) run on DirectML and give onnxruntime's output element for element."""
    import onnxruntime

    model = _as_uint8(case.model)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8  # every such case moves float32 data
    inputs = [_normalize_tensor(t) for t in case.data_sets[0][0]]
    inputs = [(np.abs(x) * 37).astype(np.uint8) if x.dtype == np.float32 else x for x in inputs]
    feeds = {value.name: x for value, x in zip(model.graph.input, inputs)}
    session = dml_ep.InferenceSession(model)
    ours = session.run(None, feeds)
    theirs = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for mine, expected in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(mine, expected, strict=True)
    if all(y.size for y in theirs):  # an empty output is left to the CPU EP, as every empty tensor
        assert all(isinstance(entry, DmlNode) for entry in session.plan.entries), [e.summary() for e in session.plan.entries]


def test_supports_cpu_only():
    assert dml_ep.backend.supports_device("CPU")
    assert not dml_ep.backend.supports_device("CUDA")
    with pytest.raises(RuntimeError, match="CPU only"):
        dml_ep.backend.prepare(helper.make_model(helper.make_graph([], "g", [], [])), "CUDA")


def test_run_node_infers_output_types():
    """Broadcast along the rows: [[1,2,3],[4,5,6]] + [10,20,30]."""
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    b = np.array([10, 20, 30], np.float32)
    (c,) = dml_ep.backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, [[11, 22, 33], [14, 25, 36]])


def test_run_node_qlinearmatmul():
    """[[1,2],[3,4]]^2 = [[7,10],[15,22]]; * 0.5 * 0.5 / 0.5 = 3.5, 5, 7.5, 11 -> half to even 4, 5, 8, 11."""
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    a = np.array([[1, 2], [3, 4]], np.uint8)
    scale, zero = np.array(0.5, np.float32), np.array(0, np.uint8)
    outputs = dml_ep.backend.run_node(node, [a, scale, zero, a, scale, zero, scale, zero])
    np.testing.assert_array_equal(outputs.y, [[4, 5], [8, 11]])


_QLINEAR_ADD = helper.make_node(
    "QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], domain="com.microsoft"
)


def test_run_node_contrib_op_needs_outputs_info():
    a = np.array([[1, 2], [3, 4]], np.uint8)
    scale, zero = np.array(0.5, np.float32), np.array(0, np.uint8)
    with pytest.raises(ModelError, match="pass outputs_info"):
        dml_ep.backend.run_node(_QLINEAR_ADD, [a, scale, zero, a, scale, zero, scale, zero])


def test_run_node_qlinear_add_with_scalar_scales():
    """(a * 0.5 + a * 0.5) / 0.5 = 2a."""
    a = np.array([[1, 2], [3, 4]], np.uint8)
    scale, zero = np.array(0.5, np.float32), np.array(0, np.uint8)
    (y,) = dml_ep.backend.run_node(
        _QLINEAR_ADD, [a, scale, zero, a, scale, zero, scale, zero], outputs_info=[(np.uint8, (2, 2))]
    )
    np.testing.assert_array_equal(y, [[2, 4], [6, 8]])


def test_prepare_passes_session_options_through():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    model = helper.make_model(
        helper.make_graph([node], "g", [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in "ab"],
                          [helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    rep = dml_ep.backend.prepare(model, feature_level="3_0", arithmetic="onnxruntime")
    assert rep.session.plan.feature_level == DML_FEATURE_LEVEL.FL_3_0
    assert rep.session.arithmetic.mode == "onnxruntime"
    x = np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(DmlEpError, match="feature level"):
        dml_ep.backend.run_node(node, [x, x], feature_level="9_9")
    with pytest.raises(DmlEpError, match="arithmetic"):
        dml_ep.backend.run_node(node, [x, x], arithmetic="fast")
    with pytest.raises(TypeError, match="unknown option"):
        dml_ep.backend.run_node(node, [x, x], device_id=1)


def test_run_counts_inputs():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    with pytest.raises(DmlEpError, match="1 inputs given"):
        dml_ep.backend.run_node(node, [np.ones(2, np.float32)])


# --- the issue-9 sweep: every official node case of these ops that onnxruntime's backend passes ---

SWEEP = r"(qlinear|add|sum|quantize|dequantize|matmulinteger|convinteger|maxpool|transpose|reshape|flatten|squeeze|unsqueeze|concat|slice|gather|relu)"


# Cases dml_ep passes in the onnxruntime arithmetic only (none since the "directml" quantize step
# divides in float32: 0.5 / float32(5/255) = 25.5 -> 179, ONNX's value in test_dynamicquantizelinear).
ONNXRUNTIME_ARITHMETIC_ONLY: set[str] = set()


def _passes(backend, case, **options) -> None:
    """Raises as ONNX's runner would if ``backend`` fails the case."""
    rep = backend.prepare(case.model, "CPU", **options)
    for inputs, expected in case.data_sets:
        outputs = rep.run([_normalize_tensor(t) for t in inputs])
        onnx.backend.test.runner.Runner.assert_similar_outputs([_normalize_tensor(t) for t in expected], list(outputs), case.rtol, case.atol)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in load_model_tests(kind="node") if re.search(SWEEP, c.name)])
def test_official_cases_pass_where_onnxruntime_passes(case):
    """dml_ep fails an official case only where onnxruntime's own backend fails it on this machine."""
    import onnxruntime.backend

    try:
        _passes(onnxruntime.backend, case)
    except Exception as exc:  # onnxruntime's failure, whatever its type: the case says nothing of dml_ep
        pytest.xfail(f"onnxruntime's backend fails it too: {str(exc).splitlines()[0][:200]}")
    _passes(dml_ep.backend, case, **({"arithmetic": "onnxruntime"} if case.name in ONNXRUNTIME_ARITHMETIC_ONLY else {}))
