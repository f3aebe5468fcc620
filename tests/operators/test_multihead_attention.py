from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from dxdispatch_replays import export_and_replay
from onnx import TensorProto, helper

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.core.errors import RealEpError
from dml_ep.numerics.kernels.mlas_sgemm import host_sgemm
from dml_ep.operators.multihead_attention import device_precision
from dml_ep.ort.reference import cpu_session

PROMPT = dict(batch=1, sequence=5, heads=4, kv_heads=2, head=16, past=8, total=5)  # a buffer longer than the prompt
DECODE = dict(batch=2, sequence=1, heads=4, kv_heads=2, head=16, past=6, total=7)
SHARED = dict(batch=1, sequence=1, heads=4, kv_heads=1, head=8, past=9, total=6)  # genai's DML layout: past = present = the whole buffer


def gqa_model(batch, sequence, heads, kv_heads, head, past, total, dtype, total_constant=True, inputs=("q", "k", "v", "pk", "pv", "sl", "tot"),
              **attributes):
    """One GroupQueryAttention with its three outputs; total_sequence_length an initializer or a feed."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    shapes = {"q": [batch, sequence, heads * head], "k": [batch, sequence, kv_heads * head], "v": [batch, sequence, kv_heads * head],
              "pk": [batch, kv_heads, past, head], "pv": [batch, kv_heads, past, head]}
    declared = [helper.make_tensor_value_info(name, elem, shape) for name, shape in shapes.items() if name in inputs]
    declared.append(helper.make_tensor_value_info("sl", TensorProto.INT32, [batch]))
    initializers = [helper.make_tensor("tot", TensorProto.INT32, [], [total])] if total_constant else []
    if not total_constant:
        declared.append(helper.make_tensor_value_info("tot", TensorProto.INT32, []))
    node = helper.make_node("GroupQueryAttention", list(inputs), ["o", "present_key", "present_value"], domain="com.microsoft",
                            num_heads=heads, kv_num_heads=kv_heads, **attributes)
    outputs = [helper.make_tensor_value_info(name, elem, None) for name in ("o", "present_key", "present_value")]
    graph = helper.make_graph([node], "gqa", declared, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)


def gqa_feeds(batch, sequence, heads, kv_heads, head, past, total, dtype, seed=0, total_constant=True):
    rng = np.random.default_rng(seed)
    feeds = {"q": rng.standard_normal((batch, sequence, heads * head)), "k": rng.standard_normal((batch, sequence, kv_heads * head)),
             "v": rng.standard_normal((batch, sequence, kv_heads * head)), "pk": rng.standard_normal((batch, kv_heads, past, head)),
             "pv": rng.standard_normal((batch, kv_heads, past, head))}
    feeds = {name: (2 * value).astype(dtype) for name, value in feeds.items()}
    feeds["sl"] = np.full(batch, total - 1, np.int32)
    if not total_constant:
        feeds["tot"] = np.array(total, np.int32)
    return feeds


def exact_attention(feeds, heads, kv_heads, pasts, rows, scale=None):
    """Causal grouped attention in float64 on the present buffers (the past, grown to ``rows``, with the
    new rows at ``pasts[b]``): query i of batch b sees rows 0 .. pasts[b] + i. Returns output, presents."""
    q, k, v = feeds["q"], feeds["k"], feeds["v"]
    batch, sequence, hidden = q.shape
    head = hidden // heads
    presents = []
    for name, new in (("pk", k), ("pv", v)):
        present = np.zeros((batch, kv_heads, rows, head), q.dtype)
        if name in feeds:
            present[:, :, :feeds[name].shape[2]] = feeds[name][:, :, :rows]
        for b in range(batch):
            present[b, :, pasts[b]:pasts[b] + sequence] = new[b].reshape(sequence, kv_heads, head).transpose(1, 0, 2)
        presents.append(present)
    out = np.zeros((batch, sequence, heads, head))
    scale = 1 / np.sqrt(head) if scale is None else scale
    for b in range(batch):
        seen = pasts[b] + sequence
        for n in range(heads):
            keys = presents[0][b, n // (heads // kv_heads), :seen].astype(np.float64)
            values = presents[1][b, n // (heads // kv_heads), :seen].astype(np.float64)
            scores = q[b, :, n * head:(n + 1) * head].astype(np.float64) @ keys.T * scale
            scores[np.arange(seen)[None, :] > pasts[b] + np.arange(sequence)[:, None]] = -np.inf
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[b, :, n] = (p / p.sum(axis=1, keepdims=True)) @ values
    return out.reshape(batch, sequence, hidden), presents[0], presents[1]


def ulps(a: np.ndarray, b: np.ndarray) -> float:
    """The largest difference in units in the last place of the largest magnitude of ``b`` in ``a``'s
    type (an attention output sums products of many magnitudes: its error scales with the tensor's)."""
    unit = np.spacing(np.abs(b).max().astype(a.dtype))
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max() / unit)


def planned(model, **options) -> list[str]:
    session = dml_ep.InferenceSession(model.SerializeToString(), **options)
    return session, [getattr(entry, "operator", None) or entry.reason for entry in session.plan.entries]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [PROMPT, DECODE, SHARED], ids=["prompt", "decode", "shared-buffer"])
def test_directml_is_causal_grouped_attention_within_float_rounding(shape, dtype):
    """"directml": float64 sums each rounded once to float32, then once to the tensor type: within
    4 float32 ULP (of the output's largest magnitude) of the exact value, within 1 in float16 (measured: 1 and 0)."""
    model, feeds = gqa_model(**shape, dtype=dtype), gqa_feeds(**shape, dtype=dtype)
    session, operators = planned(model)
    assert operators == ["DML_OPERATOR_MULTIHEAD_ATTENTION1"]
    out, key, value = session.run(None, feeds)
    pasts = [shape["total"] - 1 if shape["sequence"] == 1 else 0] * shape["batch"]
    exact, exact_key, exact_value = exact_attention(feeds, shape["heads"], shape["kv_heads"], pasts, max(shape["past"], shape["total"]))
    assert out.dtype == dtype and ulps(out, exact.astype(dtype)) <= (1 if dtype == np.float16 else 4)
    np.testing.assert_array_equal(key, exact_key)
    np.testing.assert_array_equal(value, exact_value)


LONG_PROMPT = dict(PROMPT, sequence=24, past=32, total=24, head=64)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("flash", [True, False], ids=["flash", "no-flash"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [PROMPT, DECODE, LONG_PROMPT], ids=["prompt", "decode", "prompt-24"])
def test_onnxruntime_arithmetic_is_the_cpu_kernel_but_for_its_float32_flash_attention(shape, dtype, flash, monkeypatch):
    """Bit for bit with onnxruntime's non-flash path: float16 always, float32 with its flash kernel
    off; with it (float32, the default), within 24 ULP of the output's largest magnitude (measured
    19 at 24 keys). The presents, rows 0 .. total - 1, bit for bit."""
    if not flash:
        monkeypatch.setenv("ORT_GQA_DISABLE_FLASH_ATTENTION", "1")
    model, feeds = gqa_model(**shape, dtype=dtype), gqa_feeds(**shape, dtype=dtype)
    expected = cpu_session(model, threads=1).run(None, feeds)
    out, key, value = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    if dtype == np.float16 or not flash:
        np.testing.assert_array_equal(out, expected[0])
    else:
        assert ulps(out, expected[0]) <= 24
    total = shape["total"]
    np.testing.assert_array_equal(key[:, :, :total], expected[1][:, :, :total])
    np.testing.assert_array_equal(value[:, :, :total], expected[2][:, :, :total])


@pytest.mark.host_sensitive
def test_the_shared_buffer_keeps_the_past_beyond_the_total_where_the_cpu_writes_zeros():
    """The real EP aliases past to present: rows after the new one keep the buffer's content."""
    model, feeds = gqa_model(**SHARED, dtype=np.float16), gqa_feeds(**SHARED, dtype=np.float16)
    key = dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[1]
    cpu_key = cpu_session(model, threads=1).run(None, feeds)[1]
    total = SHARED["total"]
    np.testing.assert_array_equal(key[:, :, total:], feeds["pk"][:, :, total:])
    np.testing.assert_array_equal(key[:, :, :total], cpu_key[:, :, :total])
    assert not np.array_equal(key, cpu_key)


@pytest.mark.host_sensitive
def test_a_prompt_with_a_past_attends_as_if_there_were_none():
    """S > 1: PastSequenceLengths is FILL_VALUE_CONSTANT's zeros, whatever seqlens_k says; onnxruntime's
    CPU attends to the past (a chunked prefill)."""
    shape = dict(batch=1, sequence=3, heads=2, kv_heads=1, head=8, past=4, total=7)
    model, feeds = gqa_model(**shape, dtype=np.float32), gqa_feeds(**shape, dtype=np.float32)
    session, _ = planned(model)
    assert np.array_equal(session.plan.entries[0].inputs["PastSequenceLengthsTensor"], [0])
    out, key, _ = session.run(None, feeds)
    exact, exact_key, _ = exact_attention(feeds, 2, 1, [0], 7)
    assert ulps(out, exact.astype(np.float32)) <= 4
    np.testing.assert_array_equal(key, exact_key)  # the new rows at 0 .. 2, over the past's
    cpu = cpu_session(model, threads=1).run(None, feeds)[0]
    assert np.abs(cpu - out).max() > 1e-3


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_prompt_with_an_empty_cache_runs_on_directml(dtype):
    """An empty past [B, kvN, 0, H] (onnxruntime's CPU layout): the real EP never binds the past, so
    its empty-tensor skip does not apply; the present is the new rows."""
    shape = dict(PROMPT, past=0)
    model, feeds = gqa_model(**shape, dtype=dtype), gqa_feeds(**shape, dtype=dtype)
    session, operators = planned(model)
    assert operators == ["DML_OPERATOR_MULTIHEAD_ATTENTION1"]
    out, key, value = session.run(None, feeds)
    expected = cpu_session(model, threads=1).run(None, feeds)
    assert ulps(out, expected[0]) <= (1 if dtype == np.float16 else 4)
    np.testing.assert_array_equal(key, expected[1])
    np.testing.assert_array_equal(value, expected[2])


@pytest.mark.host_sensitive
def test_without_a_past_the_present_holds_the_new_rows():
    model = gqa_model(**PROMPT, dtype=np.float16, inputs=("q", "k", "v", "", "", "sl", "tot"))
    feeds = {name: value for name, value in gqa_feeds(**PROMPT, dtype=np.float16).items() if name not in ("pk", "pv")}
    out, key, value = dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)
    expected = cpu_session(model, threads=1).run(None, feeds)
    assert ulps(out, expected[0]) <= 1
    np.testing.assert_array_equal(key, expected[1])
    np.testing.assert_array_equal(value, expected[2])


def test_scale_and_the_ignored_attributes():
    """``scale`` is MULTIHEAD_ATTENTION1's Scale; softcap and local_window_size the real EP never reads."""
    feeds = gqa_feeds(**DECODE, dtype=np.float32)
    plain = dml_ep.InferenceSession(gqa_model(**DECODE, dtype=np.float32, scale=0.5).SerializeToString())
    ignored = dml_ep.InferenceSession(gqa_model(**DECODE, dtype=np.float32, scale=0.5, softcap=2.0, local_window_size=2).SerializeToString())
    assert plain.plan.entries[0].desc.Scale == 0.5
    np.testing.assert_array_equal(plain.run(None, feeds)[0], ignored.run(None, feeds)[0])
    exact = exact_attention(feeds, 4, 2, [6, 6], 7, scale=0.5)[0]
    assert ulps(plain.run(None, feeds)[0], exact.astype(np.float32)) <= 8


@pytest.mark.host_sensitive
def test_a_total_computed_at_run_time_is_planned_when_run():
    """The real EP reads a required CPU input that is not an initializer when it runs the node;
    dml_ep plans the node then: the present keeps the buffer past the total, as the CPU's does not."""
    model, feeds = gqa_model(**SHARED, dtype=np.float16, total_constant=False), gqa_feeds(**SHARED, dtype=np.float16, total_constant=False)
    session, [reason] = planned(model)
    assert "input 6 'tot' is computed at run time" in reason
    key = session.run(None, feeds)[1]
    np.testing.assert_array_equal(key[:, :, SHARED["total"]:], feeds["pk"][:, :, SHARED["total"]:])
    assert not np.array_equal(key, cpu_session(model, threads=1).run(None, feeds)[1])


def test_a_constant_total_is_planned_at_load_and_sizes_the_present():
    shape = dict(SHARED, total=4)
    session, operators = planned(gqa_model(**shape, dtype=np.float16))
    assert operators == ["DML_OPERATOR_MULTIHEAD_ATTENTION1"]
    [entry] = session.plan.entries
    assert entry.desc.OutputPresentKeyTensor.Sizes == (1, 1, 9, 8) and entry.desc.QueryHeadCount == 4 and entry.desc.KeyValueHeadCount == 1
    assert entry.desc.Scale == np.float32(1 / np.sqrt(8)) and entry.desc.MaskFilterValue == -10000.0
    assert session.plan.summary()["dml"]["macs"] == 2 * 32 * 9  # Q.K^T and P.V over the present's 9 rows


def test_below_feature_level_6_3_it_falls_back():
    _, [reason] = planned(gqa_model(**DECODE, dtype=np.float16, total_constant=True), feature_level="6_2")
    assert "DML_FEATURE_LEVEL_6_3" in reason


@pytest.mark.parametrize("change", ["causal", "packed"])
def test_what_the_real_ep_refuses_is_an_error(change):
    if change == "causal":
        model = gqa_model(**DECODE, dtype=np.float16, total_constant=True, causal=0)
    else:
        model = gqa_model(**DECODE, dtype=np.float16, total_constant=True, inputs=("q", "", "", "pk", "pv", "sl", "tot"))
    with pytest.raises(RealEpError):
        dml_ep.InferenceSession(model.SerializeToString())


def test_device_precision_sums_webnn_matmul_and_softmax_tolerances():
    session, _ = planned(gqa_model(**SHARED, dtype=np.float16, total_constant=True))
    precision = device_precision(session.plan.entries[0].desc)
    assert precision.ulp16 == precision.ulp32 == 2 * 8 + 3 * 9 + 3 + 2 * 9


LLM = Path(__file__).resolve().parents[2] / "models" / "llm" / "tiny_llm.int4.dml.onnx"


def llm_feeds(sequence: int, past: int, total: int) -> dict:
    """The shipped LLM's inputs: ``total`` tokens seen, ``sequence`` of them new, a cache of ``past`` rows."""
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 256, (1, sequence)), "attention_mask": np.ones((1, total), np.int64),
             "position_ids": np.arange(total - sequence, total).reshape(1, sequence)}
    for layer in range(2):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{layer}.{kind}"] = (rng.standard_normal((1, 2, past, 16)) * 0.5).astype(np.float16)
    return feeds


@pytest.mark.host_sensitive
@pytest.mark.parametrize("sequence, past, total", [(8, 16, 8), (1, 8, 9)], ids=["prompt-in-a-buffer", "decode"])
def test_the_shipped_llm_runs_its_attention_on_multihead_attention1(sequence, past, total):
    """genai's DML LLM: total_sequence_length computed at run time (Shape -> Gather -> Cast), so both
    GroupQueryAttention nodes are planned when run; the outputs within 2 float16 ULP of the largest
    magnitude of onnxruntime's (as the LLM's other float16 nodes), the presents' first ``total`` rows too;
    each node fed onnxruntime's inputs, in the "onnxruntime" arithmetic, bit for bit."""
    feeds = llm_feeds(sequence, past, total)
    session = dml_ep.InferenceSession(str(LLM))
    ours = session.run(None, feeds)
    attention = [entry for entry in session.plan.entries if entry.node.op_type == "GroupQueryAttention"]
    assert [getattr(entry, "operator", None) for entry in attention] == ["DML_OPERATOR_MULTIHEAD_ATTENTION1"] * 2
    theirs = cpu_session(onnx.load(LLM)).run(None, feeds)
    for mine, reference in zip(ours, theirs):
        rows = mine if mine.ndim == 3 else mine[:, :, :total]
        assert mine.shape == reference.shape and ulps(rows, (reference if mine.ndim == 3 else reference[:, :, :total])) <= 2
    report = compare_model(onnx.load(LLM), feeds, arithmetic="onnxruntime", per_node=True)
    isolated = [node.isolated for node in report.nodes if node.op_type == "GroupQueryAttention"]
    assert len(isolated) == 2 and all(result is not None and result.equal == result.elements for result in isolated)  # float16: bit for bit


# --- MultiHeadAttention on MULTIHEAD_ATTENTION -------------------------------------------------


def mha_model(batch, sequence, keys, heads, head, value_head, dtype, bias=False, mask=None, attention_bias=False, past=0, presents=False,
              seed=0, **attributes):
    """One MultiHeadAttention of separate query, key and value, with the optional inputs asked for,
    and its feeds (``mask``: the key_padding_mask's shape; its last key masked, or key lengths for [B])."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    shapes = {"q": [batch, sequence, heads * head], "k": [batch, keys, heads * head], "v": [batch, keys, heads * value_head]}
    if bias:
        shapes["b"] = [heads * (2 * head + value_head)]
    if mask is not None:
        shapes["m"] = list(mask)
    if attention_bias:
        shapes["ab"] = [batch, heads, sequence, past + keys]
    if past:
        shapes["pk"], shapes["pv"] = [batch, heads, past, head], [batch, heads, past, value_head]
    inputs = [name if name in shapes else "" for name in ("q", "k", "v", "b", "m", "ab", "pk", "pv")]
    while not inputs[-1]:
        inputs.pop()
    outputs = ["o", "present_key", "present_value"] if presents else ["o"]
    node = helper.make_node("MultiHeadAttention", inputs, outputs, domain="com.microsoft", num_heads=heads, **attributes)
    declared = [helper.make_tensor_value_info(name, TensorProto.INT32 if name == "m" else elem, shape) for name, shape in shapes.items()]
    graph = helper.make_graph([node], "mha", declared, [helper.make_tensor_value_info(name, elem, None) for name in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(shape).astype(dtype) for name, shape in shapes.items() if name != "m"}
    if mask is not None:
        feeds["m"] = np.arange(keys - batch, keys, dtype=np.int32) if len(mask) == 1 else np.ones(mask, np.int32)
        if len(mask) > 1:
            feeds["m"][..., -1] = 0
    return model, feeds


MHA_CASES = {"plain": {}, "bias": dict(bias=True), "mask-2d": dict(mask=(2, 5)), "key-lengths": dict(mask=(2,)),
             "attention-bias": dict(attention_bias=True), "past": dict(past=3, presents=True),
             "bias-mask-3d-presents": dict(bias=True, mask=(2, 3, 5), presents=True),
             "all": dict(bias=True, mask=(2, 3, 5), attention_bias=True, presents=True, mask_filter_value=-3.0)}
FLASH = ("plain", "bias")  # onnxruntime's float32 MultiHeadAttention runs its flash kernel: no mask, attention bias, past or present


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_runs_on_multihead_attention_near_the_cpu_kernel(case, dtype):
    """Not bit for bit: float32 within 2 ULP of the output's largest magnitude (measured 1.6), float16
    within 1 (measured 0.25); the presents (the past, then K and V) bit for bit."""
    model, feeds = mha_model(2, 3, 5, 4, 8, 8, dtype, **MHA_CASES[case])
    session, operators = planned(model)
    assert operators == ["DML_OPERATOR_MULTIHEAD_ATTENTION"]
    ours, theirs = session.run(None, feeds), cpu_session(model, threads=1).run(None, feeds)
    assert ulps(ours[0], theirs[0]) <= (1 if dtype == np.float16 else 2)
    for mine, reference in zip(ours[1:], theirs[1:]):
        np.testing.assert_array_equal(mine, reference)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_in_the_onnxruntime_arithmetic_is_the_cpu_kernel_but_for_flash(case, dtype):
    """The CPU kernel's MLAS path bit for bit (float16 through onnxruntime's casts to float32);
    where onnxruntime runs its flash kernel, within 1 ULP of the output's largest magnitude (2 on a
    host without FMA3, whose MLAS kernels round each product apart: measured under QEMU's Nehalem)."""
    model, feeds = mha_model(2, 3, 5, 4, 8, 8, dtype, **MHA_CASES[case])
    ours = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    theirs = cpu_session(model).run(None, feeds)
    if case in FLASH:
        assert ulps(ours[0], theirs[0]) <= (1 if host_sgemm().fused else 2)
    else:
        for mine, reference in zip(ours, theirs):
            np.testing.assert_array_equal(mine, reference)


def test_multi_head_attention_is_the_exact_value_within_float32_rounding():
    """Bias, a [B, S, T] mask (MaskFilterValue -2 added: the masked keys still count), attention bias and a past, in float64 by hand."""
    model, feeds = mha_model(2, 3, 5, 4, 8, 6, np.float32, bias=True, mask=(2, 3, 8), attention_bias=True, past=3, mask_filter_value=-2.0)
    out = dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    q, k, v = (feeds[name].astype(np.float64) for name in ("q", "k", "v"))
    b = feeds["b"].astype(np.float32)
    q, k, v = (x.astype(np.float32) + part for x, part in zip((feeds["q"], feeds["k"], feeds["v"]), np.split(b, [32, 64])))
    q, k, v = (x.astype(np.float64).reshape(2, x.shape[1], 4, -1).transpose(0, 2, 1, 3) for x in (q, k, v))
    k = np.concatenate([feeds["pk"], k], axis=2)
    v = np.concatenate([feeds["pv"], v], axis=2)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(8) + feeds["ab"] + np.where(feeds["m"][:, None] == 0, -2.0, 0.0)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    exact = ((p / p.sum(axis=-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(2, 3, 24)
    assert ulps(out, exact.astype(np.float32)) <= 4


def test_unidirectional_is_never_read():
    """The DML EP builds MULTIHEAD_ATTENTION without causality whatever ``unidirectional`` says."""
    model, feeds = mha_model(1, 4, 4, 2, 8, 8, np.float32, unidirectional=1)
    plain, _ = mha_model(1, 4, 4, 2, 8, 8, np.float32)
    ours = dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(ours, dml_ep.InferenceSession(plain.SerializeToString()).run(None, feeds)[0])


def test_what_multi_head_attention_does_not_take():
    """Packed QKV is not modelled (a fallback saying so); an attention bias that broadcasts, and a
    present value whose head size is not the query's, the real EP refuses."""
    shape = [1, 3, 2, 3, 8]
    packed = helper.make_model(helper.make_graph(
        [helper.make_node("MultiHeadAttention", ["q"], ["o"], domain="com.microsoft", num_heads=2)], "packed",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    _, [reason] = planned(packed)
    assert "only separate 3-D query, key and value are modelled" in reason and "MULTIHEAD_ATTENTION" in reason
    model, _ = mha_model(1, 3, 5, 2, 8, 8, np.float32, attention_bias=True)
    model.graph.input[3].type.tensor_type.shape.dim[0].dim_value = 1
    model.graph.input[3].type.tensor_type.shape.dim[1].dim_value = 1
    with pytest.raises(RealEpError):
        dml_ep.InferenceSession(model.SerializeToString())
    model, _ = mha_model(1, 3, 5, 2, 8, 6, np.float32, presents=True)  # the EP describes present_value with the query's head size
    with pytest.raises(RealEpError, match="present_value"):
        dml_ep.InferenceSession(model.SerializeToString())


def test_multi_head_attention_macs_count_both_products_over_past_and_new_keys():
    model, _ = mha_model(2, 3, 5, 4, 8, 6, np.float16, past=3)
    session, operators = planned(model)
    assert operators == ["DML_OPERATOR_MULTIHEAD_ATTENTION"]
    assert session.plan.summary()["dml"]["macs"] == (2 * 3 * 32 + 2 * 3 * 24) * (5 + 3)  # Q.K^T and P.V over 8 keys


@pytest.mark.parametrize("shape", [SHARED, PROMPT], ids=["decode-shared-buffer", "prompt-in-a-buffer"])
def test_group_query_attention_exports_its_presents_as_the_past_buffers(shape, tmp_path):
    """DxDispatch: the present resources start as the past (the EP's alias), MULTIHEAD_ATTENTION1 writes
    the new rows into them; replayed with dml_ep's kernels, bit for bit."""
    model, feeds = gqa_model(**shape, dtype=np.float16), gqa_feeds(**shape, dtype=np.float16)
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    assert made.model["resources"]["present_key"]["initialValues"] == {"sourcePath": "resources/present_key.npy"}
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "resources" / "present_key.npy"), feeds["pk"])
    assert set(replayed) == {"o", "present_key", "present_value"}


def test_multi_head_attention_exports_and_replays(tmp_path):
    model, feeds = mha_model(2, 3, 5, 4, 8, 8, np.float32, bias=True, mask=(2, 3, 8), attention_bias=True, past=3, presents=True)
    made, replayed = export_and_replay(model, tmp_path / "out", feeds)
    assert set(replayed) == {"o", "present_key", "present_value"}


@pytest.mark.host_sensitive
def test_a_decode_step_of_a_ragged_batch_writes_and_reads_each_batch_at_its_own_length():
    """seqlens_k [3, 5]: batch 0 attends to 4 keys and writes its new row at 3, batch 1 to 6 at 5, as onnxruntime's CPU."""
    shape = dict(batch=2, sequence=1, heads=4, kv_heads=2, head=16, past=6, total=6)
    model, feeds = gqa_model(**shape, dtype=np.float16), gqa_feeds(**shape, dtype=np.float16)
    feeds["sl"] = np.array([3, 5], np.int32)
    out, key, _ = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)
    expected = cpu_session(model, threads=1).run(None, feeds)
    np.testing.assert_array_equal(out, expected[0])
    np.testing.assert_array_equal(key[0, :, :4], expected[1][0, :, :4])
    np.testing.assert_array_equal(key[1], expected[1][1])
    exact = exact_attention(feeds, 4, 2, [3, 5], 6)[0]
    assert ulps(dml_ep.InferenceSession(model.SerializeToString()).run(None, feeds)[0], exact.astype(np.float16)) <= 1



TWIN_CASES = {"gqa-prompt": PROMPT, "gqa-decode": DECODE, "gqa-prompt-24": LONG_PROMPT, "mha-all": "all", "mha-past": "past"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", TWIN_CASES)
def test_the_compiled_kernels_are_their_numpy_twins_bit_for_bit(case, dtype):
    """The "onnxruntime" engine's kernels sum MLAS's panels compiled, the "numpy" engine's in numpy: the same bits."""
    shape = TWIN_CASES[case]
    if isinstance(shape, dict):
        model, feeds = gqa_model(**shape, dtype=dtype), gqa_feeds(**shape, dtype=dtype)
    else:
        model, feeds = mha_model(2, 3, 5, 4, 8, 8, dtype, **MHA_CASES[shape])
    compiled, twin = (dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime", engine=engine) for engine in ("onnxruntime", "numpy"))
    assert compiled.executor.engine.compiled_kernels and not twin.executor.engine.compiled_kernels
    for ours, theirs in zip(compiled.run(None, feeds), twin.run(None, feeds)):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("lanes", [16, 8, 4])
def test_all_rows_softmax_at_once_is_mlas_row_by_row(lanes):
    """The causal rows' softmax in one pass (8 and 16 lanes: trailing zeros in the lane sums) gives
    MlasComputeSoftmax's bits on each row's visible keys (mlas_softmax: held to onnxruntime's Softmax
    in test_mlas_exp, and through GroupQueryAttention above), the hidden keys 0; a NaN stays in its row."""
    from dml_ep.numerics.kernels.mlas_exp import mlas_softmax
    from dml_ep.operators.multihead_attention import _causal_mlas_softmax

    past, sequence = 21, 13  # rows of 22 .. 34 keys: tails of every length past 16 and 32
    scores = (np.random.default_rng(4).standard_normal((3, sequence, past + sequence)) * 6).astype(np.float32)
    scores[1, 2, 5] = np.nan
    with np.errstate(all="ignore"):
        out = _causal_mlas_softmax(scores, past, lanes)
        for row in range(sequence):
            np.testing.assert_array_equal(out[:, row, :past + row + 1], mlas_softmax(scores[:, row, :past + row + 1], lanes))
    assert not out[:, np.arange(sequence)[:, None] < np.arange(past + sequence)[None, :] - past].any()
