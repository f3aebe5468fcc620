"""Build a small decoder-only int4 LLM in the shape onnxruntime-genai's model builder emits.

Two variants of one seeded model, in two sizes: ``tiny`` (2 layers, hidden 64, 4 query and 2
key-value heads of 16, MLP 128, vocabulary 256; shipped), and ``small`` (2 layers, hidden 512, 8
query and 2 key-value heads of 64, MLP 1408, vocabulary 8192: a real small LLM's width, where the
matrix products outweigh the per-node costs; scripts/bench.py times both):

- ``dml`` (``-e dml``): float16 inputs and outputs, MatMulNBits 4-bit, block 32, symmetric (no zero
  points), accuracy level 0; GroupQueryAttention with a separate RotaryEmbedding for Q and K;
  SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization; a KV cache
  (``past_key_values.N.key/value`` -> ``present.N.key/value``).
- ``cpu`` (``-e cpu``): the same graph in float32 with accuracy level 4.

The builder's choices this follows (onnxruntime-genai ``src/python/py/models/builder.py`` and
``builders/base.py``): fp16 I/O for DML int4; symmetric int4 weights
without zero points; GQA for (dml, fp16) with unpacked Q, K, V and RoPE outside GQA; ``seqlens_k``
= ReduceSum(attention_mask) - 1 and ``total_sequence_length`` = its width, both int32.

    python scripts/make_llm.py                   # both variants into .cache/models
    python scripts/make_llm.py --size small      # small_llm.int4.{dml,cpu}.onnx
    python scripts/make_llm.py --ship            # the tiny DML variant into models/llm/ (tiny_llm.int4.dml.onnx)
"""

from __future__ import annotations

import argparse
import sys
from typing import NamedTuple
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
BLOCK = 32
MS = "com.microsoft"


class Size(NamedTuple):
    vocab: int
    hidden: int
    heads: int
    kv_heads: int
    head_size: int
    mlp: int
    layers: int
    max_positions: int


SIZES = {"tiny": Size(256, 64, 4, 2, 16, 128, 2, 128), "small": Size(8192, 512, 8, 2, 64, 1408, 2, 512)}


class LlmBuilder:
    """Nodes and initializers of one variant, weights drawn in a fixed order from one seed."""

    def __init__(self, size: Size, float_type, accuracy_level: int, seed: int = 0):
        self.size, self.rng = size, np.random.default_rng(seed)
        self.float_type, self.accuracy_level = np.dtype(float_type), accuracy_level
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, outputs: int = 1, domain: str = "", **attributes) -> list[str]:
        """A node named ``name``, its first output too; of a SkipSimplifiedLayerNormalization's
        four, the mean and inverse standard deviation omitted ("") as the builder omits them."""
        names = [name if i == 0 else "" if i in (1, 2) else f"{name}/output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=name, domain=domain, **attributes))
        return names

    def weight(self, name: str, shape, std: float = 0.08) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(self.float_type))

    def matmul_nbits(self, x: str, name: str, k: int, n: int) -> str:
        """A symmetric 4-bit MatMulNBits (block 32, no zero points: MatMulNBits' default 8)."""
        w = self.rng.standard_normal((n, k)) * 0.08
        blocks = w.reshape(n, k // BLOCK, BLOCK)
        scale = (np.abs(blocks).max(axis=-1) / 7).astype(self.float_type)
        codes = np.clip(np.rint(blocks / scale.astype(np.float64)[..., None]) + 8, 0, 15).astype(np.uint8)
        packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
        b, s = self.const(f"{name}.qweight", packed), self.const(f"{name}.scales", scale)
        return self.op("MatMulNBits", [x, b, s], name, domain=MS, K=k, N=n, bits=4, block_size=BLOCK,
                       accuracy_level=self.accuracy_level)[0]

    def layer(self, index: int, x: str, skip: str | None, positions: str, seqlens: str, total: str, caches: tuple) -> tuple[str, str]:
        """One decoder layer; returns its MLP output and the residual it adds to."""
        prefix, size = f"/model/layers.{index}", self.size
        weight = self.weight(f"model.layers.{index}.input_layernorm.weight", (size.hidden,), 0.1)
        if skip is None:
            normed = self.op("SimplifiedLayerNormalization", [x, weight], f"{prefix}/input_layernorm/LayerNorm", epsilon=1e-6, axis=-1)[0]
            residual = x
        else:
            normed, _, _, residual = self.op("SkipSimplifiedLayerNormalization", [x, skip, weight], f"{prefix}/input_layernorm/SkipLayerNorm",
                                             outputs=4, domain=MS, epsilon=1e-6)
        q = self.matmul_nbits(normed, f"{prefix}/attn/q_proj/MatMul", size.hidden, size.heads * size.head_size)
        k = self.matmul_nbits(normed, f"{prefix}/attn/k_proj/MatMul", size.hidden, size.kv_heads * size.head_size)
        v = self.matmul_nbits(normed, f"{prefix}/attn/v_proj/MatMul", size.hidden, size.kv_heads * size.head_size)
        q = self.op("RotaryEmbedding", [q, positions, "cos_cache", "sin_cache"], f"{prefix}/attn/q_rotary/RotaryEmbedding", domain=MS,
                    num_heads=size.heads)[0]
        k = self.op("RotaryEmbedding", [k, positions, "cos_cache", "sin_cache"], f"{prefix}/attn/k_rotary/RotaryEmbedding", domain=MS,
                    num_heads=size.kv_heads)[0]
        past_key, past_value, present_key, present_value = caches
        attention = helper.make_node("GroupQueryAttention", [q, k, v, past_key, past_value, seqlens, total],
                                     [f"{prefix}/attn/GroupQueryAttention", present_key, present_value],
                                     name=f"{prefix}/attn/GroupQueryAttention", domain=MS, num_heads=size.heads, kv_num_heads=size.kv_heads,
                                     scale=size.head_size**-0.5)
        self.nodes.append(attention)
        o = self.matmul_nbits(attention.output[0], f"{prefix}/attn/o_proj/MatMul", size.heads * size.head_size, size.hidden)
        weight = self.weight(f"model.layers.{index}.post_attention_layernorm.weight", (size.hidden,), 0.1)
        normed, _, _, residual = self.op("SkipSimplifiedLayerNormalization", [o, residual, weight],
                                         f"{prefix}/post_attention_layernorm/SkipLayerNorm", outputs=4, domain=MS, epsilon=1e-6)
        gate = self.matmul_nbits(normed, f"{prefix}/mlp/gate_proj/MatMul", size.hidden, size.mlp)
        up = self.matmul_nbits(normed, f"{prefix}/mlp/up_proj/MatMul", size.hidden, size.mlp)
        sigmoid = self.op("Sigmoid", [gate], f"{prefix}/mlp/act_fn/Sigmoid")[0]
        silu = self.op("Mul", [gate, sigmoid], f"{prefix}/mlp/act_fn/Mul")[0]
        product = self.op("Mul", [silu, up], f"{prefix}/mlp/Mul")[0]
        return self.matmul_nbits(product, f"{prefix}/mlp/down_proj/MatMul", size.mlp, size.hidden), residual


def build(variant: str, size_name: str = "tiny") -> onnx.ModelProto:
    """The ``dml`` or ``cpu`` variant of the model of size ``size_name`` (module docstring)."""
    size = SIZES[size_name]
    float_type = np.float16 if variant == "dml" else np.float32
    g = LlmBuilder(size, float_type, accuracy_level=0 if variant == "dml" else 4)
    element = helper.np_dtype_to_tensor_dtype(np.dtype(float_type))
    inverse = 1.0 / 10000 ** (np.arange(0, size.head_size, 2) / size.head_size)
    angles = np.outer(np.arange(size.max_positions), inverse)
    g.const("cos_cache", np.cos(angles).astype(float_type))
    g.const("sin_cache", np.sin(angles).astype(float_type))
    embedded = g.op("Gather", [g.weight("model.embed_tokens.weight", (size.vocab, size.hidden), 0.5), "input_ids"], "/model/embed_tokens/Gather")[0]
    summed = g.op("ReduceSum", ["attention_mask", g.const("/model/attn_mask_reformat/one_axis", np.array([1]))],
                  "/model/attn_mask_reformat/attn_mask_subgraph/ReduceSum", keepdims=0)[0]
    minus = g.op("Sub", [summed, g.const("/model/constants/INT64/1", np.array(1))], "/model/attn_mask_reformat/attn_mask_subgraph/Sub")[0]
    seqlens = g.op("Cast", [minus], "/model/attn_mask_reformat/attn_mask_subgraph/Sub/Cast", to=TensorProto.INT32)[0]
    shape = g.op("Shape", ["attention_mask"], "/model/attn_mask_reformat/attn_mask_subgraph/Shape")[0]
    width = g.op("Gather", [shape, g.const("/model/constants/INT64/[1]", np.array(1))], "/model/attn_mask_reformat/attn_mask_subgraph/Gather",
                 axis=0)[0]
    total = g.op("Cast", [width], "/model/attn_mask_reformat/attn_mask_subgraph/Gather/Cast", to=TensorProto.INT32)[0]
    x, skip = embedded, None
    cache_shape = ["batch_size", size.kv_heads, "past_sequence_length", size.head_size]
    present_shape = ["batch_size", size.kv_heads, "total_sequence_length", size.head_size]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", element, ["batch_size", "sequence_length", size.vocab])]
    for index in range(size.layers):
        names = (f"past_key_values.{index}.key", f"past_key_values.{index}.value", f"present.{index}.key", f"present.{index}.value")
        inputs += [helper.make_tensor_value_info(name, element, cache_shape) for name in names[:2]]
        outputs += [helper.make_tensor_value_info(name, element, present_shape) for name in names[2:]]
        x, skip = g.layer(index, x, skip, "position_ids", seqlens, total, names)
    weight = g.weight("model.norm.weight", (size.hidden,), 0.1)
    normed = g.op("SkipSimplifiedLayerNormalization", [x, skip, weight], "/model/layers.2/final_norm_layernorm/SkipLayerNorm", outputs=4,
                  domain=MS, epsilon=1e-6)[0]
    logits = g.matmul_nbits(normed, "/lm_head/MatMul", size.hidden, size.vocab)
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/lm_head/Identity"))
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)], ir_version=10,
                             producer_name="dml_ep scripts/make_llm.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "models", help="output directory (default .cache/models)")
    parser.add_argument("--size", choices=SIZES, default="tiny", help="the model's size (default %(default)s)")
    parser.add_argument("--ship", action="store_true", help="write the tiny DML variant into models/llm/")
    args = parser.parse_args(argv)
    out = REPO / "models" / "llm" if args.ship else args.out
    out.mkdir(parents=True, exist_ok=True)
    for variant in ("dml",) if args.ship else ("dml", "cpu"):
        size = "tiny" if args.ship else args.size
        model = build(variant, size)  # onnx's checker knows no SimplifiedLayerNormalization (onnxruntime's, in the onnx domain)
        path = out / f"{size}_llm.int4.{variant}.onnx"
        onnx.save(model, path)
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # onnxruntime loads it
        print(f"{path.name}: {len(model.graph.node)} nodes, {path.stat().st_size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
