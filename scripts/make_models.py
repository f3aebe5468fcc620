"""Build the quantized ONNX models that dml_ep is exercised on.

Each model starts as a float32 graph and is quantized the way users do it:
``quant_pre_process`` followed by ``quantize_static`` (uint8 activations, int8
per-channel weights, MinMax calibration on seeded random data). Everything is
seeded, so two runs give byte-identical files.

Each model comes in three formats, made from the same float model (and, for the
static ones, the same calibration data and options):

- QOperator, ``<name>.onnx``: QLinearConv / QLinearMatMul / QLinearAdd ... nodes,
  which the DirectML EP maps directly.
- QDQ, ``<name>.qdq.onnx``: QuantizeLinear / DequantizeLinear pairs around float
  ops, the quantizer's default format. When a session is created, onnxruntime's
  graph optimizer fuses those groups back into QLinear nodes (for the CPU and
  DirectML EPs), so an EP sees mostly the same QLinear nodes as in QOperator.
- dynamic, ``<name>.dynamic.onnx``: ``quantize_dynamic`` with its defaults (int8 weights,
  DynamicQuantizeLinear + MatMulInteger / ConvInteger), the most common quantized text models;
  onnxruntime fuses each MatMul chain into MatMulIntegerToFloat for the DirectML EP.

    python scripts/make_models.py                 # all models, all formats, into .cache/models
    python scripts/make_models.py --only mlp      # a subset
    python scripts/make_models.py --format qdq    # one format only
    python scripts/make_models.py --ship          # small models into models/ (QDQ: small_cnn; dynamic: transformer_block)
    python scripts/make_models.py --list
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

REPO = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO / ".cache" / "models"
SHIP_DIR = REPO / "models"

OPSET = 17  # LayerNormalization needs 17; ORT's quantizer handles it in both formats.
CALIB_SAMPLES = 4
CALIB_BATCH = 2  # used for symbolic (batch) dimensions during calibration

QUANT_OPTIONS = {
    "ActivationSymmetric": False,  # uint8 activations with a real zero point
    "WeightSymmetric": True,  # int8 weights with zero point 0, as DML expects
    # Left False on purpose: when True, ORT 1.2x only "forces" Reshape/Transpose/
    # MaxPool whose input is an initializer and leaves the others in float.
    "ForceQuantizeNoInputCheck": False,
    "MatMulConstBOnly": False,  # also quantize activation x activation MatMuls
}


# quant_format name -> (onnxruntime QuantFormat, file name suffix)
FORMATS: dict[str, tuple[QuantFormat | None, str]] = {
    "qoperator": (QuantFormat.QOperator, ".onnx"),
    "qdq": (QuantFormat.QDQ, ".qdq.onnx"),
    # quantize_static's own defaults (QDQ, int8 activations and weights, per tensor): what most users ship,
    # which onnxruntime does not rewrite into QLinear nodes for DML (DQ -> float Conv -> Q on DirectML)
    "qdq-int8": (QuantFormat.QDQ, ".qdq_int8.onnx"),
    "dynamic": (None, ".dynamic.onnx"),
}


class ModelSpec(NamedTuple):
    """A registry entry: how to build the float model and whether it ships."""

    build: Callable[[np.random.Generator], onnx.ModelProto]
    source: str
    small: bool = False  # its QOperator model ships in models/
    ship_qdq: bool = False  # its QDQ model ships too (keep the shipped set small)
    ship_dynamic: bool = False  # its dynamically quantized model ships too
    # ORT's optimizer folds BatchNorm into Conv, but it also fuses MatMul+Add into
    # Gemm (-> QGemm); hand-built graphs skip it to keep QLinearMatMul + QLinearAdd.
    optimize: bool = True


# --------------------------------------------------------------------------
# Helpers for hand-built graphs


class GraphBuilder:
    """Accumulates nodes and seeded initializers for a hand-written graph."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def normal(self, name: str, shape: tuple[int, ...], std: float, mean: float = 0.0) -> str:
        return self.const(name, self.rng.normal(mean, std, shape).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        """Add a node with a single output named after the node."""
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x: str, name: str, n_in: int, n_out: int, bias: bool = True) -> str:
        """MatMul by a weight, then Add of a 1-D bias (becomes QLinearAdd with broadcast)."""
        w = self.normal(f"{name}.weight", (n_in, n_out), std=np.sqrt(1.0 / n_in))
        y = self.op("MatMul", [x, w], f"{name}.matmul")
        if bias:
            b = self.normal(f"{name}.bias", (n_out,), std=0.02)
            y = self.op("Add", [y, b], f"{name}.add")
        return y

    def conv(
        self, x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, gain: float = 2.0
    ) -> str:
        """Conv with He-initialised weights (``gain`` / fan-in: 2 before a Relu, 1 for a linear
        output) and a small bias."""
        fan_in = c_in // group * k * k
        w = self.normal(f"{name}.weight", (c_out, c_in // group, k, k), std=np.sqrt(gain / fan_in))
        b = self.normal(f"{name}.bias", (c_out,), std=0.02)
        pad = k // 2
        return self.op(
            "Conv", [x, w, b], name, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group
        )

    def model(self, name: str, inputs: list, result: str, output_shape: list) -> onnx.ModelProto:
        """Finish the graph; `result`, the last node's output, becomes the graph output "output"."""
        assert self.nodes[-1].output[0] == result, "the result must come from the last node"
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(self.nodes, name, inputs, [float_tensor("output", output_shape)], self.inits)
        return finish_model(graph)


def finish_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    """Wrap a graph in a checked model with the project's opset."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_models")
    model.ir_version = 8  # readable by every onnxruntime >= 1.14
    onnx.checker.check_model(model, full_check=True)
    return model


def float_tensor(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# --------------------------------------------------------------------------
# Hand-built float models


def build_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """Three MatMuls with bias Adds and Relus: QLinearMatMul + broadcast QLinearAdd."""
    g = GraphBuilder(rng)
    x = g.linear("input", "fc1", 64, 128)
    x = g.op("Relu", [x], "relu1")
    x = g.linear(x, "fc2", 128, 128)
    x = g.op("Relu", [x], "relu2")
    x = g.linear(x, "fc3", 128, 10, bias=False)
    return g.model("mlp", [float_tensor("input", ["batch", 64])], x, ["batch", 10])


def build_small_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """A ResNet-style CNN: 3x3, strided, depthwise and 1x1 convs with residual Adds."""
    g = GraphBuilder(rng)
    stem = g.op("Relu", [g.conv("input", "stem", 3, 16, 3)], "stem.relu")

    x = g.op("Relu", [g.conv(stem, "block1.conv1", 16, 16, 3)], "block1.relu1")
    x = g.conv(x, "block1.conv2", 16, 16, 3)
    x = g.op("Relu", [g.op("Add", [x, stem], "block1.add")], "block1.relu2")

    down = g.op("Relu", [g.conv(x, "down1", 16, 32, 3, stride=2)], "down1.relu")
    x = g.op("Relu", [g.conv(down, "block2.dw", 32, 32, 3, group=32)], "block2.dw.relu")
    x = g.conv(x, "block2.pw", 32, 32, 1)
    x = g.op("Relu", [g.op("Add", [x, down], "block2.add")], "block2.relu")

    x = g.op("Relu", [g.conv(x, "down2", 32, 64, 3, stride=2)], "down2.relu")
    x = g.op("GlobalAveragePool", [x], "pool")
    x = g.op("Flatten", [x], "flatten", axis=1)
    x = g.linear(x, "classifier", 64, 10)
    return g.model("small_cnn", [float_tensor("input", [1, 3, 32, 32])], x, [1, 10])


# MobileNetV2's inverted-residual stages, (expansion t, output channels c, blocks n, first stride s),
# cut from its 17 blocks to 12 (one or two fewer per stage) so that building stays quick; the
# last stage of each stride keeps MobileNetV2's channels.
MOBILENET_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2), (6, 96, 2, 1), (6, 160, 1, 2), (6, 320, 1, 1)]


def build_mobilenet(rng: np.random.Generator) -> onnx.ModelProto:
    """A MobileNetV2-like CNN at 224x224: inverted residuals (1x1 expand, 3x3 depthwise, 1x1
    project, Add where shapes match) with Relu6 as Clip(0, 6), global average pool, MatMul + Add
    classifier. There is no BatchNorm (Conv has a bias); the projection of a residual block starts
    small, as BatchNorm's zero-init trick does, so that the sums do not grow with depth."""
    g = GraphBuilder(rng)
    zero, six = g.const("relu6.min", np.float32(0)), g.const("relu6.max", np.float32(6))

    def relu6(x: str, name: str) -> str:
        return g.op("Clip", [x, zero, six], f"{name}.relu6")

    x = relu6(g.conv("input", "stem", 3, 32, 3, stride=2), "stem")
    channels, index = 32, 0
    for expansion, c_out, blocks, first_stride in MOBILENET_STAGES:
        for i in range(blocks):
            name, stride, hidden = f"block{index}", first_stride if i == 0 else 1, channels * expansion
            residual = stride == 1 and channels == c_out
            y = x if expansion == 1 else relu6(g.conv(x, f"{name}.expand", channels, hidden, 1), f"{name}.expand")
            y = relu6(g.conv(y, f"{name}.dw", hidden, hidden, 3, stride=stride, group=hidden), f"{name}.dw")
            y = g.conv(y, f"{name}.project", hidden, c_out, 1, gain=0.2 if residual else 1.0)
            x = g.op("Add", [y, x], f"{name}.add") if residual else y
            channels, index = c_out, index + 1
    x = relu6(g.conv(x, "head", channels, 1280, 1), "head")
    x = g.op("GlobalAveragePool", [x], "pool")
    x = g.op("Flatten", [x], "flatten", axis=1)
    x = g.linear(x, "classifier", 1280, 1000)
    return g.model("mobilenet", [float_tensor("input", [1, 3, 224, 224])], x, [1, 1000])


def build_transformer_block(
    rng: np.random.Generator, seq: int = 16, hidden: int = 64, heads: int = 4
) -> onnx.ModelProto:
    """A post-LN encoder block: QKV projections, two activation x activation MatMuls, MLP."""
    g = GraphBuilder(rng)
    head_dim = hidden // heads
    split_shape = g.const("split_heads.shape", np.array([1, seq, heads, head_dim], np.int64))
    merge_shape = g.const("merge_heads.shape", np.array([1, seq, hidden], np.int64))

    def heads_of(name: str, perm: list[int]) -> str:
        y = g.linear("input", name, hidden, hidden)
        y = g.op("Reshape", [y, split_shape], f"{name}.reshape")
        return g.op("Transpose", [y], f"{name}.transpose", perm=perm)

    q = heads_of("attn.q", [0, 2, 1, 3])  # [1, heads, seq, head_dim]
    k = heads_of("attn.k", [0, 2, 3, 1])  # [1, heads, head_dim, seq]
    v = heads_of("attn.v", [0, 2, 1, 3])
    scores = g.op("MatMul", [q, k], "attn.scores")
    scale = g.const("attn.scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    scores = g.op("Mul", [scores, scale], "attn.scale_mul")
    probs = g.op("Softmax", [scores], "attn.softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], "attn.context")
    ctx = g.op("Transpose", [ctx], "attn.merge.transpose", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, merge_shape], "attn.merge.reshape")
    x = g.op("Add", [g.linear(ctx, "attn.out", hidden, hidden), "input"], "attn.residual")
    x = layer_norm(g, x, "ln1", hidden)

    h = g.op("Relu", [g.linear(x, "mlp.fc1", hidden, 4 * hidden)], "mlp.relu")
    y = g.op("Add", [g.linear(h, "mlp.fc2", 4 * hidden, hidden), x], "mlp.residual")
    y = layer_norm(g, y, "ln2", hidden)
    shape = [1, seq, hidden]
    return g.model("transformer_block", [float_tensor("input", shape)], y, shape)


def layer_norm(g: GraphBuilder, x: str, name: str, hidden: int) -> str:
    gamma = g.normal(f"{name}.weight", (hidden,), std=0.1, mean=1.0)
    beta = g.normal(f"{name}.bias", (hidden,), std=0.02)
    return g.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-5)


# --------------------------------------------------------------------------
# Architectures from the onnx wheel's backend test data

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_model(file_name: str) -> Callable[[np.random.Generator], onnx.ModelProto]:
    """Builder for an onnx "light" model with its placeholder weights made real."""

    def build(rng: np.random.Generator) -> onnx.ModelProto:
        model = onnx.load(LIGHT_DIR / file_name)
        materialize_parameters(model.graph, rng)
        sums_to_adds(model.graph)
        drop_initializer_inputs(model.graph)
        model.ir_version = 8  # IR 3 requires weights to be inputs too
        model = onnx.version_converter.convert_version(model, OPSET)
        return finish_model(model.graph)

    return build


def parameter_roles(graph: onnx.GraphProto) -> dict[str, tuple[str, int]]:
    """Map each parameter tensor to the (op_type, input index) that consumes it.

    A BatchNormalization ending a residual branch that is added to an identity
    shortcut gets op_type "ResidualBN": like ResNet's zero-init trick, a small
    scale there stops the residual sums from growing the activations with depth.
    """
    bn_outputs = {n.output[0] for n in graph.node if n.op_type == "BatchNormalization"}
    residual_inputs = set()
    for node in graph.node:
        if node.op_type in ("Add", "Sum") and not set(node.input) <= bn_outputs:
            residual_inputs.update(node.input)
    roles = {}
    for node in graph.node:
        if node.op_type in ("Conv", "Gemm", "BatchNormalization"):
            residual = node.op_type == "BatchNormalization" and node.output[0] in residual_inputs
            for index, name in enumerate(node.input[1:], start=1):
                roles[name] = ("ResidualBN" if residual else node.op_type, index)
    return roles


def random_parameter(role: tuple[str, int], shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A trained-looking value for a parameter, chosen so activations stay O(1)."""
    op_type, index = role
    if op_type == "Conv" and index == 1:
        value = rng.normal(0.0, np.sqrt(2.0 / np.prod(shape[1:])), shape)  # He init
    elif op_type == "Gemm" and index == 1:
        value = rng.normal(0.0, np.sqrt(1.0 / shape[1]), shape)  # [out, in]: the light Gemms use transB=1
    elif op_type in ("Conv", "Gemm"):  # biases
        value = rng.normal(0.0, 0.02, shape)
    elif index == 1:  # BatchNorm scale
        value = rng.uniform(0.1, 0.3, shape) if op_type == "ResidualBN" else rng.uniform(0.5, 1.0, shape)
    elif index == 4:  # BatchNorm running variance
        value = rng.uniform(0.5, 1.5, shape)
    else:  # BatchNorm bias and running mean
        value = rng.normal(0.0, 0.1, shape)
    return value.astype(np.float32)


def materialize_parameters(graph: onnx.GraphProto, rng: np.random.Generator) -> None:
    """Replace ConstantOfShape weight placeholders (and stray float params) by seeded initializers.

    The light models store every weight as ConstantOfShape(shape) = 0.02, and
    a few as real but arbitrary tensors; both would make a degenerate network.
    """
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    placeholders = {n.output[0]: n for n in graph.node if n.op_type == "ConstantOfShape"}
    roles = parameter_roles(graph)
    new_inits = []
    for name, role in roles.items():
        if name in placeholders:
            shape = tuple(int(d) for d in inits[placeholders[name].input[0]])
        elif name in inits and inits[name].dtype == np.float32:
            shape = inits[name].shape
        else:
            continue
        new_inits.append(numpy_helper.from_array(random_parameter(role, shape, rng), name))
    replaced = {t.name for t in new_inits}
    keep_nodes = [n for n in graph.node if not (n.op_type == "ConstantOfShape" and n.output[0] in replaced)]
    used = {i for n in keep_nodes for i in n.input}
    keep_inits = [t for t in graph.initializer if t.name in used and t.name not in replaced]
    del graph.node[:]
    graph.node.extend(keep_nodes)
    del graph.initializer[:]
    graph.initializer.extend(keep_inits + new_inits)


def sums_to_adds(graph: onnx.GraphProto) -> None:
    """Two-input Sum (Caffe2 export) is Add; only Add quantizes to QLinearAdd."""
    for node in graph.node:
        if node.op_type == "Sum" and len(node.input) == 2:
            node.op_type = "Add"


def drop_initializer_inputs(graph: onnx.GraphProto) -> None:
    """IR 3 lists weights as graph inputs; dropping them lets ORT fold BatchNorm into Conv."""
    inits = {t.name for t in graph.initializer}
    used = {i for n in graph.node for i in n.input}
    keep = [i for i in graph.input if i.name not in inits and i.name in used]
    del graph.input[:]
    graph.input.extend(keep)


# --------------------------------------------------------------------------
# Registry

MODELS: dict[str, ModelSpec] = {
    "mlp": ModelSpec(build_mlp, "onnx.helper: MatMul/Add/Relu MLP", small=True, optimize=False),
    "small_cnn": ModelSpec(
        build_small_cnn, "onnx.helper: ResNet-style CNN", small=True, ship_qdq=True, optimize=False
    ),
    "transformer_block": ModelSpec(
        build_transformer_block, "onnx.helper: post-LN encoder block", small=True, optimize=False, ship_dynamic=True
    ),
    "encoder": ModelSpec(
        lambda rng: build_transformer_block(rng, seq=128, hidden=384, heads=6),
        "onnx.helper: the encoder block at MiniLM's size (seq 128, hidden 384, 6 heads, MLP 1536)", optimize=False,
    ),
    "mobilenet": ModelSpec(
        build_mobilenet, "onnx.helper: MobileNetV2-like CNN, 12 inverted residuals with depthwise convs", optimize=False
    ),
    "squeezenet": ModelSpec(light_model("light_squeezenet.onnx"), "onnx test data light_squeezenet"),
    "shufflenet": ModelSpec(light_model("light_shufflenet.onnx"), "onnx test data light_shufflenet"),
    "resnet50": ModelSpec(light_model("light_resnet50.onnx"), "onnx test data light_resnet50"),
}


# --------------------------------------------------------------------------
# Quantization


def seed_of(name: str) -> int:
    """A per-model seed that does not shift when models are added or reordered."""
    return zlib.crc32(name.encode())


def random_inputs(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Standard-normal inputs, i.e. normalised images or hidden states."""
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else CALIB_BATCH for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


class RandomDataReader(CalibrationDataReader):
    """Yields a fixed number of seeded random input batches."""

    def __init__(self, model: onnx.ModelProto, seed: int):
        rng = np.random.default_rng(seed)
        self.batches = iter([random_inputs(model, rng) for _ in range(CALIB_SAMPLES)])

    def get_next(self):
        return next(self.batches, None)


def preprocess(src: Path, dst: Path, optimize: bool) -> None:
    """ORT's recommended pre-processing; symbolic shape inference is optional.

    It needs sympy and rejects some graphs, and the models here have static
    shapes anyway, so on failure it is skipped.
    """
    try:
        quant_pre_process(str(src), str(dst), skip_optimization=not optimize)
    except Exception:
        quant_pre_process(str(src), str(dst), skip_optimization=not optimize, skip_symbolic_shape=True)


def check_format(quant_format: str) -> None:
    if quant_format not in FORMATS:
        raise ValueError(f"unknown quant_format {quant_format!r}; expected one of {', '.join(FORMATS)}")


def model_path(name: str, out_dir: Path, quant_format: str = "qoperator") -> Path:
    """Where build_model writes a model: <name>.onnx (QOperator) or <name>.qdq.onnx (QDQ)."""
    check_format(quant_format)
    return Path(out_dir) / f"{name}{FORMATS[quant_format][1]}"


def quantize(float_model: onnx.ModelProto, out_path: Path, seed: int, optimize: bool, quant_format: str) -> None:
    """Pre-process and quantize in quant_format, statically ("qoperator", "qdq", "qdq-int8") or dynamically
    ("dynamic", quantize_dynamic's defaults), via a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="make_models.") as tmp:
        float_path, prep_path = Path(tmp, "float.onnx"), Path(tmp, "prep.onnx")
        onnx.save(float_model, float_path)
        preprocess(float_path, prep_path, optimize)
        if quant_format == "dynamic":
            quantize_dynamic(str(prep_path), str(out_path), weight_type=QuantType.QInt8)
            return
        if quant_format == "qdq-int8":
            quantize_static(str(prep_path), str(out_path), RandomDataReader(float_model, seed))
            return
        quantize_static(
            str(prep_path),
            str(out_path),
            RandomDataReader(float_model, seed),
            quant_format=FORMATS[quant_format][0],
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options=QUANT_OPTIONS,
        )


def build_model(name: str, out_dir: Path, keep_float: bool = False, quant_format: str = "qoperator") -> Path:
    """Build one model's float graph, quantize it into out_dir in quant_format, and return its path.

    Both formats start from the same seeded float model and calibration data.
    """
    out_path = model_path(name, out_dir, quant_format)
    spec = MODELS[name]
    float_model = spec.build(np.random.default_rng(seed_of(name)))
    if keep_float:
        onnx.save(float_model, Path(out_dir) / f"{name}.float.onnx")
    quantize(float_model, out_path, seed_of(name) + 1, spec.optimize, quant_format)
    return out_path


def build_models(out_dir, names=None, keep_float: bool = False, quant_format: str = "qoperator") -> dict[str, Path]:
    """Build the named models (default: all) into out_dir; returns name -> path of the quant_format model."""
    check_format(quant_format)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {name: build_model(name, out_dir, keep_float, quant_format) for name in (names or MODELS)}


# --------------------------------------------------------------------------
# CLI


def op_counts(path: Path) -> dict[str, int]:
    counts = collections.Counter(n.op_type for n in onnx.load(path).graph.node)
    return dict(sorted(counts.items()))


def describe(name: str, path: Path, seconds: float) -> str:
    ops = ", ".join(f"{op}={count}" for op, count in op_counts(path).items())
    return f"{name:21s} {path.stat().st_size / 1024:9.1f} KiB {seconds:6.1f}s  {ops}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help=f"output directory (default {CACHE_DIR.relative_to(REPO)})")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), metavar="NAME", help="models to build")
    parser.add_argument(
        "--format",
        choices=[*FORMATS, "all"],
        default="all",
        help="quantization format(s) to write: <name>.onnx (qoperator), <name>.qdq.onnx (qdq), <name>.qdq_int8.onnx (qdq-int8: "
             "quantize_static's defaults), <name>.dynamic.onnx (dynamic); default all",
    )
    parser.add_argument(
        "--ship", action="store_true", help="write the small models into models/ (QDQ and dynamic: only those marked to ship)"
    )
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for name, spec in MODELS.items():
            print(f"{name:18s} {'small' if spec.small else 'large':5s}  {spec.source}")
        return 0
    small = [name for name, spec in MODELS.items() if spec.small]
    names = args.only or (small if args.ship else list(MODELS))
    if args.ship and not set(names) <= set(small):
        sys.exit(f"only small models ship: {', '.join(small)}")
    formats = list(FORMATS) if args.format == "all" else [args.format]
    ships = {"qoperator": lambda spec: True, "qdq": lambda spec: spec.ship_qdq, "qdq-int8": lambda spec: False,
             "dynamic": lambda spec: spec.ship_dynamic}
    jobs = [(name, fmt) for name in names for fmt in formats if not args.ship or ships[fmt](MODELS[name])]
    if not jobs:
        sys.exit(f"none of these ship in format {args.format}")
    out_dir = args.out or (SHIP_DIR if args.ship else CACHE_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    float_written = set()
    for name, fmt in jobs:
        start = time.perf_counter()
        path = build_model(name, out_dir, keep_float=not args.ship and name not in float_written, quant_format=fmt)
        float_written.add(name)
        label = path.name.removesuffix(".onnx")
        print(describe(label, path, time.perf_counter() - start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
