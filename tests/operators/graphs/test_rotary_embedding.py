"""com.microsoft RotaryEmbedding as the DML EP's DirectML graph (``dml_ep/operators/graphs/rotary_embedding.py``):
planned as the operators DmlOperatorRotaryEmbedding.cpp builds; the "onnxruntime" arithmetic bit for bit with
onnxruntime's CPU RotaryEmbedding, the "directml" one with the graph's documented operators computed by hand (each
MULTIPLY and the ADD rounded once in the input's type), float16 and float32, 3-D and 4-D, halves and interleaved
pairs, 2-D and 1-D position ids, ``rotary_embedding_dim`` below the head size."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import dml_ep
from dml_ep.core.errors import RealEpError
from dml_ep.operators.graphs.rotary_embedding import layout
from dml_ep.operators.nodes import DmlNode
from dml_ep.ort.reference import cpu_session
from onnx_builders import Feed, rotary_embedding, single_node_model

LLM = Path(__file__).resolve().parents[3] / "models" / "llm" / "tiny_llm.int4.dml.onnx"
ROTATION = ["ELEMENT_WISE_IDENTITY", "SPLIT", "JOIN"]
PRODUCTS = ["GATHER", "GATHER", "FILL_VALUE_SEQUENCE", "ELEMENT_WISE_MULTIPLY", "ELEMENT_WISE_MULTIPLY", "ELEMENT_WISE_MULTIPLY",
            "ELEMENT_WISE_ADD"]
# dtype, rank, interleaved, 1-D offset, rotary_embedding_dim (0: the head)
CASES = list(itertools.product([np.float16, np.float32], [3, 4], [0, 1], [None, 2], [0, 4]))


def case_id(case) -> str:
    dtype, rank, interleaved, offset, rotary = case
    return f"{np.dtype(dtype).name}-{rank}d-{'pairs' if interleaved else 'halves'}-{'offset' if offset is not None else 'ids'}-rd{rotary or 'H'}"


def model_of(case, **more):
    dtype, rank, interleaved, offset, rotary = case
    return rotary_embedding(dtype, rank, rotary=rotary, interleaved=interleaved, offset=offset, **more)


def operators(session) -> list[str]:
    return [entry.operator.removeprefix("DML_OPERATOR_") for entry in session.plan.entries]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_planned_as_the_real_eps_operators(case):
    _, _, _, offset, rotary = case
    model, _ = model_of(case)
    expected = (["SPLIT"] if rotary else []) + ROTATION + (["FILL_VALUE_SEQUENCE", "ELEMENT_WISE_ADD"] if offset is not None else [])
    expected += PRODUCTS + (["JOIN"] if rotary else [])
    session = dml_ep.InferenceSession(model.SerializeToString())
    assert operators(session) == expected
    assert all(isinstance(e, DmlNode) and e.origin.nodes[0].op_type == "RotaryEmbedding" for e in session.plan.entries)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_onnxruntime_arithmetic_is_onnxruntimes_rotary_embedding(case):
    model, feeds = model_of(case, batch=2, sequence=5, heads=3, head_size=24 if case[4] == 0 else 8)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="onnxruntime").run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)


def by_hand(x, positions, cos, sin, case, heads):
    """The DML EP's graph with numpy: the rotated columns' halves (pairs) swapped, x * cos and swapped * sin each
    rounded to the type, the sign exact, the sum rounded; the rest copied."""
    dtype, rank, interleaved, offset, rotary = case
    seq = x.shape[2] if rank == 4 else x.shape[1]
    heads_last = x if rank == 4 else x.reshape(x.shape[0], seq, heads, -1).transpose(0, 2, 1, 3)  # [B, N, S, H]
    rotary = rotary or heads_last.shape[-1]
    ids = offset + np.arange(seq)[None].repeat(x.shape[0], 0) if offset is not None else positions
    c, s = (t[ids][:, None].astype(np.float64) for t in (cos, sin))  # [B, 1, S, rd/2]
    part = heads_last[..., :rotary].astype(np.float64)
    if interleaved:
        real, imag = part[..., 0::2], part[..., 1::2]
    else:
        real, imag = part[..., :rotary // 2], part[..., rotary // 2:]
    rounded = lambda v: v.astype(dtype).astype(np.float64)  # noqa: E731
    out_real = rounded(rounded(real * c) - rounded(imag * s))
    out_imag = rounded(rounded(imag * c) + rounded(real * s))
    out = np.stack([out_real, out_imag], -1).reshape(part.shape) if interleaved else np.concatenate([out_real, out_imag], -1)
    full = np.concatenate([out.astype(dtype), heads_last[..., rotary:]], -1)
    return full if rank == 4 else full.transpose(0, 2, 1, 3).reshape(x.shape)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_directml_arithmetic_rounds_each_multiply_and_the_add(case):
    model, feeds = model_of(case, batch=2, sequence=5, heads=3)
    x, positions = feeds["in0"], feeds["in1"]
    cos, sin = (numpy_helper.to_array(t) for t in model.graph.initializer)
    expected = by_hand(x, positions, cos, sin, case, heads=3)
    got = dml_ep.InferenceSession(model.SerializeToString(), arithmetic="directml").run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)


def test_the_two_arithmetics_differ_by_the_graphs_roundings():
    """float16: onnxruntime rounds ``x*cos - x'*sin`` once, the DirectML graph each product and the sum: apart by at
    most an ULP of the output and half an ULP of each product (|cos|, |sin| <= 1: of the head's largest |x|), and apart
    somewhere."""
    model, feeds = rotary_embedding(np.float16, 3, batch=4, sequence=16, heads=4, head_size=32, rows=32)
    runs = [dml_ep.InferenceSession(model.SerializeToString(), arithmetic=a).run(None, feeds)[0] for a in ("directml", "onnxruntime")]
    directml, onnxruntime = (r.astype(np.float64).reshape(4, 16, 4, 32) for r in runs)
    largest = np.abs(feeds["in0"].reshape(4, 16, 4, 32)).max(axis=-1, keepdims=True)
    ulp = lambda v: np.spacing(np.abs(v).astype(np.float16)).astype(np.float64)  # noqa: E731
    assert np.all(np.abs(directml - onnxruntime) <= ulp(onnxruntime) + ulp(largest)) and np.any(directml != onnxruntime)


def test_the_tiny_llms_rotary_embeddings_are_modelled():
    session = dml_ep.InferenceSession(str(LLM))
    nodes = {}
    for entry in session.plan.entries:
        node = entry.origin.nodes[0]
        if node.op_type == "RotaryEmbedding":
            assert isinstance(entry, DmlNode), entry
            nodes.setdefault(node.name, []).append(entry.operator.removeprefix("DML_OPERATOR_"))
    assert len(nodes) == 4 and all(ops == ROTATION + PRODUCTS for ops in nodes.values()), nodes


def test_a_sequence_beyond_the_caches_is_the_real_eps_not_implemented():
    model, _ = rotary_embedding(np.float16, 3, sequence=12, rows=10)
    with pytest.raises(RealEpError, match="not currently supported"):
        dml_ep.InferenceSession(model.SerializeToString())


def test_layout_reads_the_node_as_the_ep_does():
    assert layout((2, 3, 64), (10, 8), {}).heads == 4  # head size from the caches: 2 * 8
    found = layout((2, 3, 64), (10, 4), {"num_heads": 4, "rotary_embedding_dim": 8})
    assert (found.heads, found.head_size, found.rotary, found.transposed) == (4, 16, 8, False)
    assert layout((2, 4, 3, 16), (10, 8), {"interleaved": 1}).interleaved
    assert "num_heads must be provided" in layout((2, 3, 64), (10, 4), {"rotary_embedding_dim": 8})
    assert "second dimension" in layout((2, 4, 3, 16), (10, 8), {"num_heads": 2})
    assert "invalid" in layout((2, 3, 64), (10, 8), {"num_heads": 4, "rotary_embedding_dim": 8})  # caches of H/2, rd/2 = 4


@pytest.mark.host_sensitive
@pytest.mark.parametrize("sequence, position", [(6, 0), (1, 6)], ids=["prompt", "decode"])
def test_the_tiny_llms_node_and_caches_in_both_arithmetics(sequence, position):
    """The LLM's own q RotaryEmbedding (num_heads given, float16 caches of its builder) at a prompt's and a decode
    step's shapes: the "onnxruntime" arithmetic is onnxruntime's output, the "directml" one the graph by hand."""
    llm = onnx.load(str(LLM))
    node = next(n for n in llm.graph.node if n.op_type == "RotaryEmbedding" and "q_rotary" in n.name)
    caches = [numpy_helper.to_array(next(t for t in llm.graph.initializer if t.name == name)) for name in node.input[2:]]
    heads = next(a.i for a in node.attribute if a.name == "num_heads")
    hidden = heads * 2 * caches[0].shape[1]
    x = np.random.default_rng(0).standard_normal((1, sequence, hidden)).astype(np.float16)
    positions = np.arange(position, position + sequence, dtype=np.int64)[None]
    model, feeds = single_node_model("RotaryEmbedding", [Feed(x), Feed(positions), *caches], np.float16, 3, domain="com.microsoft",
                                     num_heads=heads)
    expected = cpu_session(model, threads=1).run(None, feeds)[0]
    runs = {a: dml_ep.InferenceSession(model.SerializeToString(), arithmetic=a).run(None, feeds)[0] for a in ("onnxruntime", "directml")}
    np.testing.assert_array_equal(runs["onnxruntime"], expected)
    np.testing.assert_array_equal(runs["directml"], by_hand(x, positions, *caches, (np.float16, 3, 0, None, 0), heads))
