"""The int4 LLM in onnxruntime-genai's DirectML shape (``scripts/make_llm.py``; the DML variant ships
as ``models/llm/tiny_llm.int4.dml.onnx``): where the real EP runs each node, a prompt and a decode
step with a KV cache through dml_ep in float16, and compare's causes against onnxruntime's CPU EP.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.numerics.kernels.mlas_sgemm import host_runs_sqnbit_fp32
from dml_ep.ort.reference import cpu_session

pytestmark = pytest.mark.host_sensitive  # MatMulNBits' CPU kernels differ per host (CompInt8 needs AVX2)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "llm" / "tiny_llm.int4.dml.onnx"
FLOAT_CAUSES = {"float summation order", "float16 weights", "float32 rounding"}


def make_llm():
    spec = importlib.util.spec_from_file_location("make_llm", ROOT / "scripts" / "make_llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def feeds(dtype, sequence: int, past: int, seed: int = 0) -> dict:
    """A prompt (past 0) or a decode step (sequence 1 after ``past`` tokens)."""
    rng = np.random.default_rng(seed)
    out = {"input_ids": rng.integers(0, 256, (1, sequence)), "attention_mask": np.ones((1, past + sequence), np.int64),
           "position_ids": np.arange(past, past + sequence).reshape(1, sequence)}
    for layer in range(2):
        for kind in ("key", "value"):
            out[f"past_key_values.{layer}.{kind}"] = (rng.standard_normal((1, 2, past, 16)) * 0.5).astype(dtype)
    return out


def test_the_shipped_model_is_the_scripts():
    assert make_llm().build("dml").SerializeToString() == SHIPPED.read_bytes()


def test_where_the_real_ep_runs_each_node():
    """MatMulNBits as DEQUANTIZE -> GEMM; GroupQueryAttention planned when run; RotaryEmbedding and the
    skip layer norms as the DML EP's graphs, the simplified layer norm on MEAN_VARIANCE_NORMALIZATION2; the
    mask's shape arithmetic CPU-preferred. Nearly all the MACs are on DirectML operators dml_ep models."""
    plan = dml_ep.InferenceSession(str(SHIPPED)).plan
    by_op = {}
    for entry in plan.entries:
        by_op.setdefault(entry.node.op_type, set()).add(entry.operator if isinstance(entry, dml_ep.operators.nodes.DmlNode) else entry.kind)
    assert by_op["DmlDequantize"] == {"DML_OPERATOR_DEQUANTIZE"} and by_op["DmlGemm"] == {"DML_OPERATOR_GEMM"}
    assert by_op["GroupQueryAttention"] == {"planned-when-run"}  # its total_sequence_length is computed at run time
    assert by_op["SimplifiedLayerNormalization"] == {"DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"}
    skip = {(e.node.op_type, e.operator) for e in plan.dml_nodes if e.origin.nodes[0].op_type == "SkipSimplifiedLayerNormalization"}
    assert {operator for _, operator in skip} == {"DML_OPERATOR_ELEMENT_WISE_ADD1", "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"}
    rotary = [entry for entry in plan.entries if entry.origin.nodes[0].op_type == "RotaryEmbedding"]  # the DML EP's graph, split
    assert len(rotary) == 4 * 10 and all(isinstance(entry, dml_ep.operators.nodes.DmlNode) for entry in rotary)
    assert by_op["Shape"] == {"cpu-output"} and "cpu-preferred" in by_op["Cast"]
    assert plan.summary()["dml"]["macs_percent"] >= 99


@pytest.mark.parametrize("sequence, past", [(8, 0), (1, 8)], ids=["prompt", "decode"])
def test_prompt_and_decode_step_in_float16(sequence, past):
    inputs = feeds(np.float16, sequence, past)
    ours = dml_ep.InferenceSession(str(SHIPPED)).run(None, inputs)
    theirs = cpu_session(onnx.load(SHIPPED)).run(None, inputs)
    for mine, reference in zip(ours, theirs):
        assert mine.dtype == reference.dtype == np.float16 and mine.shape == reference.shape
        # At most 2 float16 ulps of the output's largest magnitude: measured 1.5 at most (1.2e-4 to 1.8e-4 on logits and
        # a prompt's keys and values of 0.17 to 0.26, ulp 1.2e-4 below 0.25; 6.1e-5 on a decode's of 1.3 to 2), the same
        # natively (AVX-512 VNNI) and under QEMU's Haswell and Nehalem: float32 sums of float16 products (DirectML's GEMM,
        # onnxruntime's fp16 MatMulNBits) each rounded once to float16, in a different order.
        ulp = np.spacing(np.abs(reference).max())
        assert np.abs(mine.astype(np.float32) - reference.astype(np.float32)).max() <= 2 * ulp
    report = compare_model(onnx.load(SHIPPED), inputs, per_node=True)
    gemms = [node for node in report.nodes if node.op_type == "DmlGemm"]
    assert len(gemms) == 15 and all(set(node.causes) <= FLOAT_CAUSES for node in gemms)


def test_the_cpu_variant_quantizes_activations_where_the_host_does(tmp_path):
    model = make_llm().build("cpu")
    report = compare_model(model, feeds(np.float32, 8, 0), per_node=True)
    causes = set().union(*(node.causes for node in report.nodes if node.op_type == "DmlGemm"))
    assert causes <= FLOAT_CAUSES | {"int8 activations"}
    from operator_cases import host_quantizes_activations
    assert ("int8 activations" in causes) == host_quantizes_activations()


def test_the_cli_takes_an_empty_kv_cache(capsys):
    """``--shape NAME=1,2,0,16``: a prompt's past length 0, as onnxruntime takes it."""
    from dml_ep.cli.commands import main

    shapes = [f"--shape=past_key_values.{layer}.{kind}=1,2,0,16" for layer in range(2) for kind in ("key", "value")]
    code = main(["compare", str(SHIPPED), "--shape=input_ids=1,8", "--shape=attention_mask=1,8", "--shape=position_ids=1,8",
                 "--val-range=attention_mask=1,1", "--val-range=position_ids=0,7", "--val-range=input_ids=0,255", *shapes])
    out = capsys.readouterr().out
    assert code in (0, 1) and "present.1.value  float16  [1, 2, 8, 16]" in out
    assert code == 0 or "causes (nodes differing in isolation): " in out and "other" not in out.split("causes (nodes differing")[1].split("\n")[0]


@pytest.mark.parametrize("sequence, past", [(8, 0), (1, 8)], ids=["prompt", "decode"])
def test_the_dxdispatch_export_replays_bit_for_bit(tmp_path, sequence, past):
    """The DEQUANTIZE dispatchables read the weights' bytes as UINT4 (their .npy resources are
    uint8) and bind their one quantization tensor as a list of one; the export, read back and run
    with dml_ep's kernels, gives what dml_ep gave (validated against DxDispatch's schema)."""
    from dxdispatch_replays import export_and_replay

    made, _ = export_and_replay(onnx.load(SHIPPED), tmp_path / "out", feeds(np.float16, sequence, past))
    dequantize = [d for d in made.model["dispatchables"].values() if d["type"] == "DML_OPERATOR_DEQUANTIZE"]
    assert len(dequantize) == 15 and all(d["desc"]["InputTensor"]["DataType"] == "UINT4" for d in dequantize)


def test_the_prompt_in_onnxruntime_arithmetic_names_every_difference():
    """In onnxruntime's arithmetic each float16 MatMulNBits gives onnxruntime's bits (CompFp32 in
    float32, the weight kept float32); what still differs is the SiLU chain, which onnxruntime's
    CPU EP computes in float32 across Sigmoid -> Mul -> Mul (InsertCastTransformer) and DirectML
    in float16 op by op: "graph", found by running the chain on onnxruntime's inputs."""
    from dml_ep.reports.report import CAUSES

    report = compare_model(onnx.load(SHIPPED), feeds(np.float16, 8, 0), arithmetic="onnxruntime", per_node=True)
    gemms = [node for node in report.nodes if node.op_type == "DmlGemm"]
    if host_runs_sqnbit_fp32():
        assert len(gemms) == 15 and all(node.isolated.differing == 0 for node in gemms)
    else:  # an onnxruntime without the CompFp32 kernel (no AVX2) sums in another order
        assert len(gemms) == 15 and all(set(node.causes) <= FLOAT_CAUSES for node in gemms)
    silu = [node for node in report.nodes if node.node.endswith("/mlp/Mul")]
    assert len(silu) == 2 and all(set(node.causes) == {"graph"} and "InsertCastTransformer" in node.graph for node in silu
                                  if node.inexact_in_isolation)
    assert not any(n.node.startswith("InsertedPrecisionFreeCast_") for n in report.nodes)  # the CPU EP's casts are not the DML EP's
    assert all(set(node.causes) <= set(CAUSES) - {"other"} for node in report.nodes)
