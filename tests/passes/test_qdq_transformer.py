"""``dml_ep.passes.qdq_transformer`` for CPU nodes against onnxruntime's own optimizer: every QDQ
pass in onnxruntime's order (EnsureUniqueDQForNodeUnit, WeightBiasQuantization,
ReluQuantFusion/ClipQuantFusion, the selector-action rules, QDQFinalCleanupTransformer) leaves the
op types the optimized graph onnxruntime's CPU EP writes has, for the cases the rules fuse and the
cases a condition rejects.
"""

from __future__ import annotations

import collections

import onnx
import onnxruntime as ort
import pytest

from dml_ep.passes import CPU
from onnx_builders import (MS, S8, U16, argmax_model, binary_model, cleanup_model, concat_model, conv_model, drop_model,
                           gemm_model, matmul_model, ops, rewrite, shared_dq_model, unary_model)

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)


def onnxruntime_ops(model, tmp_path) -> collections.Counter:
    """The op types in the graph onnxruntime's CPU EP optimizes at ORT_ENABLE_EXTENDED."""
    path = str(tmp_path / "optimized.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = path
    options.log_severity_level = 3
    # ConvActivationFusion (CPU EP: float Conv + Relu -> FusedConv) is no QDQ rewrite; left out so
    # that an unfused group compares as the float ops it keeps.
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                         disabled_optimizers=["ConvActivationFusion"])
    return collections.Counter((n.op_type, n.domain) for n in onnx.load(path).graph.node if n.op_type != "Identity")


CPU_CASES = {
    # the cases the rules fuse
    "conv": lambda: conv_model(),
    "conv-no-bias": lambda: conv_model(bias=None),
    "conv-float-bias": lambda: conv_model(bias="float"),
    "conv-dq-graph-output": lambda: conv_model(dq_is_output=True),
    "shared-dq": shared_dq_model,
    "matmul": lambda: matmul_model(),
    "matmul-no-q": lambda: matmul_model(tail="none"),
    "mul": lambda: binary_model("Mul"),
    "add": lambda: binary_model("Add"),
    "gemm": gemm_model,
    "concat": lambda: concat_model(),
    "reshape-drop": lambda: drop_model("Reshape"),
    "reshape-drop-uint16": lambda: drop_model("Reshape", dtype=U16, domain=MS),
    "reshape-drop-negative-scale": lambda: drop_model("Reshape", dq_scale=-0.05, q_scale=-0.05),
    "maxpool-drop": lambda: drop_model("MaxPool"),
    "resize-drop": lambda: drop_model("Resize"),
    "argmax-drop-dq": lambda: argmax_model(),
    "relu-removal": lambda: conv_model(activation="Relu", q_zp=0),
    "clip-removal": lambda: conv_model(activation=("Clip", 0, 6), q_scale=0.02, q_zp=0),
    "averagepool": lambda: unary_model("AveragePool"),
    "sigmoid": lambda: unary_model("Sigmoid"),
    "softmax": lambda: unary_model("Softmax"),
    "leakyrelu": lambda: unary_model("LeakyRelu"),
    "final-cleanup": lambda: cleanup_model(),
    "final-cleanup-identity": lambda: cleanup_model(q_is_output=True),
    # the cases a condition rejects
    "conv-int8": lambda: conv_model(x_type=S8),
    "conv-uint16": lambda: conv_model(x_type=U16, domain=MS),
    "conv-int8-bias": lambda: conv_model(bias="int8"),
    "conv-graph-output": lambda: conv_model(conv_is_output=True),
    "conv-other-consumer": lambda: conv_model(other_consumer=True),
    "float-bias-no-q-path": lambda: conv_model(bias="float", other_consumer=True),
    "matmul-q-and-other": lambda: matmul_model(tail="q+other"),
    "add-mixed-types": lambda: binary_model("Add", b_type=S8),
    "gemm-a-not-from-dq": lambda: gemm_model(a_from_dq=False),
    "sigmoid-type-mismatch": lambda: unary_model("Sigmoid", q_type=S8),
    "reshape-different-scales": lambda: drop_model("Reshape", q_scale=0.06),
    "maxpool-uint16": lambda: drop_model("MaxPool", dtype=U16, domain=MS),
    "maxpool-negative-scale": lambda: drop_model("MaxPool", dq_scale=-0.05, q_scale=-0.05),
    "maxpool-zero-scale": lambda: drop_model("MaxPool", dq_scale=0.0, q_scale=0.0),
    "maxpool-opset-11": lambda: drop_model("MaxPool", opset=11),
    "argmax-no-zero-point": lambda: argmax_model(zero_point=False),
    "concat-input-not-from-dq": lambda: concat_model(second_from_dq=False),
    "relu-kept": lambda: conv_model(activation="Relu", q_zp=10),
    "clip-kept": lambda: conv_model(activation=("Clip", 0, 6), q_scale=0.05, q_zp=0),
    "final-cleanup-different-scales": lambda: cleanup_model(q_scale=0.06),
    "final-cleanup-output-with-readers": lambda: cleanup_model(q_is_output=True, q_other_reader=True),
}


@pytest.mark.parametrize("case", CPU_CASES)
def test_cpu_rewrite_matches_onnxruntime(case, tmp_path):
    """For CPU nodes, qdq_transformer(provider=CPU) leaves the op types onnxruntime's own
    optimizer leaves (ORT_ENABLE_EXTENDED: level 1 and 2, where the QDQ transformers run)."""
    model = CPU_CASES[case]()
    ours = collections.Counter(op for op in ops(rewrite(model, provider=CPU)) if op[0] != "Identity")
    assert ours == onnxruntime_ops(model, tmp_path)
