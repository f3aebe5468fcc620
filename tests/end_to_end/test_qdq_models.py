"""QDQ models as onnxruntime's quantizer writes them, through onnxruntime's rewrites for DML nodes.

For each model scripts/make_models.py builds (ResNet-50 only under ``-m slow``), in its QDQ form:
the plan puts every QDQ Conv, MatMul and Add on its DirectML operator, as the real EP would after
onnxruntime's QDQ rules; Mul and Gemm stay float because their rules are for CPU nodes only; the
DirectML descs equal those of the QOperator model made from the same float model; and compared
with onnxruntime CPU (which applies the CPU rules), every difference is traced to a node whose
group only a CPU-only rule fuses, and the outputs are bit-exact where no such node exists.
"""

import numpy as np
import onnx
import pytest

from dml_ep.conformance.compare import compare_model
from dml_ep.operators.nodes import DmlNode
from dml_ep.planning.planner import plan_model
from dml_ep.runtime.inputs import random_inputs

MODELS = ["mlp", "small_cnn", "transformer_block", "squeezenet", "shufflenet", pytest.param("resnet50", marks=pytest.mark.slow)]
OPERATOR = {
    "Conv": "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION",
    "MatMul": "DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY",
    "Add": "DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD",
}


def qdq_targets(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The model's Conv nodes, and its MatMul and Add nodes with two DQ inputs and one Q reading them."""
    producer = {o: n for n in model.graph.node for o in n.output}
    readers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    targets = []
    for node in model.graph.node:
        dq_inputs = [producer.get(i) is not None and producer[i].op_type == "DequantizeLinear" for i in node.input]
        q_reader = [r.op_type for r in readers.get(node.output[0], [])] == ["QuantizeLinear"]
        if node.op_type == "Conv" or node.op_type in ("MatMul", "Add") and dq_inputs == [True, True] and q_reader:
            targets.append(node)
    return targets


FLOAT_OPERATOR = {"Mul": "DML_OPERATOR_ELEMENT_WISE_MULTIPLY", "Gemm": "DML_OPERATOR_GEMM", "Softmax": "DML_OPERATOR_ACTIVATION_SOFTMAX1"}


@pytest.mark.parametrize("name", MODELS)
def test_qdq_conv_matmul_add_run_on_directml(built, name):
    model = onnx.load(built(name, "qdq"))
    plan = plan_model(model)
    # origins hold copies of the user's nodes (so a plan keeps no model alive): match by content
    entry_of = {n.SerializeToString(): e for e in plan.entries for n in e.origin.nodes}
    targets = qdq_targets(model)
    assert targets
    for node in targets:
        entry = entry_of[node.SerializeToString()]
        assert isinstance(entry, DmlNode), f"{node.name}: {entry.summary()}"
        assert entry.operator == OPERATOR[node.op_type]
        assert node.name == entry.node.name  # the rewritten node keeps the target's name
    assert plan.summary()["dml"]["macs_percent"] >= 99.0
    for node in model.graph.node:
        if node.op_type in FLOAT_OPERATOR:
            entry = entry_of[node.SerializeToString()]
            assert entry.node.op_type == node.op_type and entry.origin.cpu_rule in ("2DQ", "Gemm", "1DQ")
            # a float Mul, Gemm or Softmax between DQs and Q (QLinearMul, QGemm, QLinearSoftmax are for CPU nodes only):
            # DirectML's float operator
            assert isinstance(entry, DmlNode) and entry.operator == FLOAT_OPERATOR[node.op_type]


@pytest.mark.parametrize("name", MODELS)
def test_qoperator_and_qdq_models_give_the_same_descs(built, name):
    qoperator = plan_model(onnx.load(built(name)))
    qdq = plan_model(onnx.load(built(name, "qdq")))
    # the quantized operators; the QDQ model keeps DequantizeLinear nodes no rule fuses (on DirectML too), and a
    # float Gemm, Mul or Softmax between them (QGemm, QLinearMul and QLinearSoftmax in the QOperator model, which the
    # real EP leaves to the CPU; their QDQ rules are for CPU nodes only, so the DML EP takes the float node)
    float_ops = ("QuantizeLinear", "DequantizeLinear", "Gemm", "Mul", "Softmax")
    products = [[e.desc.to_dict() for e in plan.dml_nodes if e.node.op_type not in float_ops] for plan in (qdq, qoperator)]
    assert products[0] == products[1] and len(products[0]) > 0


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name", MODELS)
def test_qdq_model_differences_are_traced_to_cpu_only_rules(built, name):
    model = onnx.load(built(name, "qdq"))
    report = compare_model(model, random_inputs(model, seed=0), reference="ort", arithmetic="onnxruntime")
    cpu_only = [e for e in plan_model(model).entries if e.origin.cpu_rule]
    if not cpu_only:
        assert report.ok and report.nodes is None
        return
    if not report.ok:
        assert report.first_divergent is not None
        assert set(report.cause_counts) == {"graph"}, report.cause_counts
        differing = {n.node for n in report.nodes if n.differs_in_isolation}
        assert differing <= {e.node.name for e in cpu_only}
    # every output is either exact or off by quantized steps the report counts
    assert all(np.isfinite(o.max_diff) for o in report.outputs)


def test_errors_name_the_model_nodes_a_rewritten_node_came_from():
    """A zero scale in a QDQ group is reported on the QLinearConv the Conv rule made, naming the
    user's Conv, its DQs and its Q, so the user can find it in their file."""
    from pathlib import Path

    import dml_ep

    model = onnx.load(Path(__file__).resolve().parents[2] / "models" / "small_cnn.qdq.onnx")
    scale = next(t for t in model.graph.initializer if t.name == "stem.relu_scale")
    scale.CopyFrom(onnx.numpy_helper.from_array(np.array(0.0, np.float32), scale.name))
    with pytest.raises(dml_ep.core.errors.QuantizationParameterError) as raised:
        dml_ep.InferenceSession(model)
    message = str(raised.value)
    assert message.startswith("node 'stem' (QLinearConv), tensor 'stem.relu_scale': scale 0 is not positive")
    assert message.endswith("(made by the graph rewrites Conv from the model's nodes stem.bias_DequantizeLinear, "
                            "stem.weight_DequantizeLinear, input_DequantizeLinear, stem, stem.relu_QuantizeLinear)")
