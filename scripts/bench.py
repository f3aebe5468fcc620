"""Benchmark dml_ep against onnxruntime CPU (and onnx's ReferenceEvaluator) in one run.

    python scripts/bench.py [MODEL ...] [--repeat N] [--arithmetic directml|onnxruntime]
                            [--engine onnxruntime|numpy] [--profile] [--json FILE]
    python scripts/bench.py --llm /tmp/llms/llama1024-dml-int4 ...   # builder decoders: prompt + decode

Default models: the shipped ones plus a quantized ResNet-50 and a MobileNetV2-like CNN (depthwise
convolutions), QOperator and QDQ, and an encoder block at MiniLM's size quantized with
quantize_dynamic, built by scripts/make_models.py into its cache; 4-bit: that encoder block
quantized with MatMulNBitsQuantizer (block 32, symmetric) in both formats, and the int4 LLM's
prompt (32 tokens) and one decode step after it, the shipped tiny one (``llm-prompt``,
``llm-decode``) and one of a real small LLM's width (``llm-small-prompt``, ``llm-small-decode``).
Runtimes are timed interleaved after a warm-up, on the same inputs; the table gives medians and the dml_ep / onnxruntime ratio, never a lone absolute time,
and dml_ep's time per DirectML operator of the model (for a sub-millisecond model, its per-node
overhead). onnxruntime runs with intra-op threads = cores and thread spinning off: spinning
threads would keep both cores busy after each onnxruntime run and slow the dml_ep run that follows
it. Peak memory and thread count are each runtime's peak RSS and threads in a child process that
loads the model and runs it once. Single-node models (QLinearConv, QLinearMatMul, float Add) are
also timed against onnx's ReferenceEvaluator, the other pure-Python peer (it cannot run
com.microsoft QLinearAdd, so whole models mostly fall outside it). ``--profile`` adds where
dml_ep's time goes in each model, per DirectML operator type and fallback, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, helper

import dml_ep
from dml_ep.numerics.engines import ENGINES, default_engine
from dml_ep.ort.reference import cpu_session
from dml_ep.reports.meta import host_kind
from dml_ep.runtime.inputs import random_inputs

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "models").glob("*.onnx"))


def default_models() -> list[Path]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_models import build_models

    cache = ROOT / ".cache" / "models"
    built = [("resnet50", "qoperator", "resnet50.onnx"), ("resnet50", "qdq", "resnet50.qdq.onnx"),
             ("mobilenet", "qoperator", "mobilenet.onnx"), ("mobilenet", "qdq", "mobilenet.qdq.onnx"),
             ("encoder", "dynamic", "encoder.dynamic.onnx")]
    paths = [cache / file for _, _, file in built]
    for (name, quant_format, _), path in zip(built, paths):
        if not path.exists():
            build_models(cache, [name], quant_format=quant_format)
    return SHIPPED + paths + int4_encoders(cache)


def int4_encoders(cache: Path) -> list[Path]:
    """The MiniLM-sized encoder block quantized with MatMulNBitsQuantizer: QOperator (MatMulNBits)
    and QDQ (int4 DequantizeLinear -> MatMul, which onnxruntime rewrites into MatMulNBits)."""
    from make_models import build_models
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    paths = [cache / "encoder.int4.onnx", cache / "encoder.int4.qdq.onnx"]
    if not all(path.exists() for path in paths):
        float_path = cache / "encoder.float.onnx"
        if not float_path.exists():
            build_models(cache, ["encoder"], keep_float=True, quant_format="dynamic")
        for path, quant_format in zip(paths, (QuantFormat.QOperator, QuantFormat.QDQ)):
            model = onnx.version_converter.convert_version(onnx.load(float_path), 21)  # int4 DequantizeLinear is opset 21
            quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=32, is_symmetric=True, quant_format=quant_format)
            quantizer.process()
            quantizer.model.save_model_to_file(str(path), use_external_data_format=False)
    return paths


def llm_cases(cache: Path) -> dict[str, tuple[Path, dict]]:
    """The int4 LLM's DML variant: a 32-token prompt, and one decode step after it (the cache 32
    long); the shipped tiny one (``llm-...``: its 56 small nodes time dml_ep's per-node costs) and
    the small one (``llm-small-...``, hidden 512: built by scripts/make_llm.py into the cache)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_llm import SIZES, build

    small = cache / "small_llm.int4.dml.onnx"
    if not small.exists():
        cache.mkdir(parents=True, exist_ok=True)
        onnx.save(build("dml", "small"), small)
    cases = {}
    for prefix, path, size in (("llm", ROOT / "models" / "llm" / "tiny_llm.int4.dml.onnx", SIZES["tiny"]), ("llm-small", small, SIZES["small"])):
        rng = np.random.default_rng(0)
        for label, sequence, past in (("prompt", 32, 0), ("decode", 1, 32)):
            feeds = {"input_ids": rng.integers(0, size.vocab, (1, sequence)), "attention_mask": np.ones((1, past + sequence), np.int64),
                     "position_ids": np.arange(past, past + sequence).reshape(1, sequence)}
            for name in (f"past_key_values.{layer}.{kind}" for layer in range(size.layers) for kind in ("key", "value")):
                feeds[name] = (rng.standard_normal((1, size.kv_heads, past, size.head_size)) * 0.5).astype(np.float16)
            cases[f"{prefix}-{label}"] = (path, feeds)
    return cases


def single_node_models() -> dict[str, onnx.ModelProto]:
    """Typical single nodes: a ResNet 3x3 conv, a transformer-sized matmul, a float Add."""
    rng = np.random.default_rng(0)

    def const(name, array):
        return onnx.numpy_helper.from_array(np.asarray(array), name)

    def model(node, inputs, outputs, initializers):
        graph = helper.make_graph([node], node.op_type, inputs, outputs, initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])

    scale = lambda v: np.float32(v)  # noqa: E731
    conv = model(
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1]),
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 64, 56, 56])],
        [const("xs", scale(0.02)), const("xz", np.uint8(0)), const("w", rng.integers(-127, 128, (64, 64, 3, 3)).astype(np.int8)),
         const("ws", rng.uniform(0.001, 0.01, 64).astype(np.float32)), const("wz", np.zeros(64, np.int8)),
         const("ys", scale(0.5)), const("yz", np.uint8(10)), const("b", rng.integers(-1000, 1000, 64).astype(np.int32))],
    )
    matmul = model(
        helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"]),
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [128, 768])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [128, 768])],
        [const("as", scale(0.02)), const("az", np.uint8(128)), const("b", rng.integers(-127, 128, (768, 768)).astype(np.int8)),
         const("bs", scale(0.003)), const("bz", np.int8(0)), const("ys", scale(0.8)), const("yz", np.uint8(128))],
    )
    add = model(
        helper.make_node("Add", ["a", "b"], ["y"]),
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 64, 56, 56]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 64, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])],
        [],
    )
    dynamic_quantize = model(
        helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zp"]),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 768])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("y", TensorProto.UINT8), ("y_scale", TensorProto.FLOAT), ("y_zp", TensorProto.UINT8))],
        [],
    )
    weights = rng.integers(-127, 128, (768, 768)).astype(np.int8)
    matmul_integer = model(
        helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"]),
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [128, 768])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [128, 768])],
        [const("b", weights), const("az", np.uint8(131))],
    )
    integer_to_float = model(
        helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "", "bias"], ["y"], domain="com.microsoft"),
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [128, 768])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 768])],
        [const("b", weights), const("as", scale(0.02)), const("bs", scale(0.003)), const("az", np.uint8(131)),
         const("bias", rng.standard_normal(768).astype(np.float32))],
    )
    integer_to_float.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    conv_integer = model(
        helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1, 1, 1]),
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 64, 56, 56])],
        [const("w", rng.integers(-127, 128, (64, 64, 3, 3)).astype(np.int8)), const("xz", np.uint8(7))],
    )
    quantize = model(
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 64, 56, 56])],
        [const("s", scale(0.02)), const("z", np.uint8(128))],
    )
    dequantize = model(
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"]),
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])],
        [const("s", scale(0.02)), const("z", np.uint8(128))],
    )
    for single in (quantize, dequantize):
        single.opset_import[0].version = 19  # the DML EP registers Q/DQ 10, 13, 19 (21 differs, 23+ are CPU)
    return {"node:QLinearConv 64x56x56 3x3": conv, "node:QLinearMatMul 128x768x768": matmul, "node:Add 64x56x56": add,
            "node:DynamicQuantizeLinear 128x768": dynamic_quantize, "node:MatMulInteger 128x768x768": matmul_integer,
            "node:MatMulIntegerToFloat 128x768x768": integer_to_float, "node:ConvInteger 64x56x56 3x3": conv_integer,
            "node:QuantizeLinear 64x56x56": quantize, "node:DequantizeLinear 64x56x56": dequantize}


WARMUP = 3


def builder_llm_cases(path: Path, prompt: int = 8) -> dict[str, tuple[Path, dict]]:
    """An onnxruntime-genai model builder's decoder (``--llm``: its model.onnx or its folder, read
    with the genai_config.json beside it): a ``prompt``-token prompt pass, and one decode step after
    it (the cache ``prompt`` long), as onnxruntime-genai feeds them."""
    folder = path if path.is_dir() else path.parent
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    decoder = config["decoder"]
    model_path = folder / decoder["filename"]
    inputs = {value.name: value.type.tensor_type.elem_type for value in onnx.load(str(model_path), load_external_data=False).graph.input}
    kv_type = helper.tensor_dtype_to_np_dtype(inputs["past_key_values.0.key"])
    rng = np.random.default_rng(0)
    cases = {}
    for label, sequence, past in (("prompt", prompt, 0), ("decode", 1, prompt)):
        feeds = {"input_ids": rng.integers(0, config["vocab_size"], (1, sequence)), "attention_mask": np.ones((1, past + sequence), np.int64)}
        if "position_ids" in inputs:
            feeds["position_ids"] = np.arange(past, past + sequence).reshape(1, sequence)
        for layer in range(decoder["num_hidden_layers"]):
            for kind in ("key", "value"):
                shape = (1, decoder["num_key_value_heads"], past, decoder["head_size"])
                feeds[f"past_key_values.{layer}.{kind}"] = (rng.standard_normal(shape) * 0.5).astype(kv_type)
        cases[f"{folder.name}-{label}"] = (model_path, feeds)
    return cases


def time_interleaved(runners: dict, repeat: int) -> dict[str, list[float]]:
    """Milliseconds per call for each runner, alternating runners each round, after warm-up calls."""
    for _ in range(WARMUP):
        for run in runners.values():
            run()
    times = {name: [] for name in runners}
    for _ in range(repeat):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def summarize(times: dict[str, list[float]]) -> dict:
    """Medians, and the ratio dml_ep / onnxruntime with its spread from the rounds' paired ratios.

    Paired (same-round) ratios cancel slow phases of a loaded machine that hit both runtimes.
    """
    ratios = [d / o for d, o in zip(times["dml_ep"], times["ort"])]
    low, median, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    row = {f"{name}_ms": statistics.median(values) for name, values in times.items()}
    return {**row, "ratio": median, "ratio_iqr": [low, high]}


# VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child of this (large)
# process would report the parent's peak.
_PEAK_CHILD = """
import sys, numpy as np, onnx
from dml_ep.runtime.inputs import random_inputs
kind, path, arithmetic, engine = sys.argv[1:5]
if kind == "ort":
    from dml_ep.ort.reference import cpu_session
    session = cpu_session(onnx.load(path), spinning=False)
else:
    import dml_ep
    session = dml_ep.InferenceSession(path, arithmetic=arithmetic, engine=engine)
feeds = random_inputs(onnx.load(path), seed=0)
session.run(None, feeds)
threads = len(os.listdir("/proc/self/task"))
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024, threads)
"""


def peak_memory(kind: str, path: Path, arithmetic: str, engine: str) -> tuple[float | None, int | None]:
    """Peak RSS (MiB) and threads of a child process that loads the model and runs it once."""
    child = "import os\n" + _PEAK_CHILD
    result = subprocess.run([sys.executable, "-c", child, kind, str(path), arithmetic, engine], capture_output=True, text=True)
    if result.returncode:
        return None, None
    peak, threads = result.stdout.split()
    return float(peak), int(threads)


def bench_model(path: Path, repeat: int, arithmetic: str, threads: int, engine: str, profile: bool, feeds=None, label=None) -> dict:
    model = onnx.load(str(path))
    feeds = random_inputs(model, seed=0) if feeds is None else feeds
    ort_session = cpu_session(model, threads=threads, spinning=False)
    dml_session = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine=engine)
    times = time_interleaved({"ort": lambda: ort_session.run(None, feeds), "dml_ep": lambda: dml_session.run(None, feeds)}, repeat)
    row = {"model": label or path.stem, **summarize(times)}
    operators = len(dml_session.plan.dml_nodes)
    row["dml_ep_us_per_dml_node"] = row["dml_ep_ms"] * 1e3 / operators if operators else None
    (row["ort_peak_mb"], row["ort_threads"]), (row["dml_ep_peak_mb"], row["dml_ep_threads"]) = (
        peak_memory(kind, path, arithmetic, engine) for kind in ("ort", "dml_ep"))
    if profile:
        row["profile_ms"] = profile_run(dml_session, feeds, repeat)
    return row


def profile_run(session, feeds: dict, repeat: int) -> dict[str, float]:
    """Milliseconds per run in each DirectML operator type and in the CPU fallback (its
    partitions and single nodes), and the rest (planning, bookkeeping), medians over ``repeat`` runs."""
    executor = session.executor
    spent = {}

    def timed(method, label):
        def wrapper(entry_or_group, values):
            start = time.perf_counter()
            try:
                return method(entry_or_group, values)
            finally:
                key = label(entry_or_group)
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - start
        return wrapper

    executor.run_dml = timed(executor.run_dml, lambda entry: entry.operator.replace("DML_OPERATOR_", ""))
    executor.run_partition = timed(executor.run_partition, lambda group: "CPU fallback")
    runs = {}
    try:
        for _ in range(repeat):
            spent.clear()
            start = time.perf_counter()
            session.run(None, feeds)
            total = time.perf_counter() - start
            for key, seconds in [*spent.items(), ("other (planning, bookkeeping)", total - sum(spent.values())), ("total", total)]:
                runs.setdefault(key, []).append(seconds * 1e3)
    finally:
        del executor.run_dml, executor.run_partition
    return {key: statistics.median(values) for key, values in runs.items()}


def bench_node(name: str, model: onnx.ModelProto, repeat: int, arithmetic: str, threads: int, engine: str) -> dict:
    from onnx.reference import ReferenceEvaluator

    feeds = random_inputs(model, seed=0)
    ort_session = cpu_session(model, threads=threads, spinning=False)
    dml_session = dml_ep.InferenceSession(model, arithmetic=arithmetic, engine=engine)
    runners = {"ort": lambda: ort_session.run(None, feeds), "dml_ep": lambda: dml_session.run(None, feeds)}
    try:  # onnx's evaluator has no com.microsoft ops
        reference = ReferenceEvaluator(model)
        reference.run(None, feeds)
        runners["reference"] = lambda: reference.run(None, feeds)
    except Exception:  # noqa: BLE001  whatever it raises for an op it lacks
        pass
    row = {"model": name, **summarize(time_interleaved(runners, repeat))}
    if "reference_ms" in row:
        row["reference_speedup"] = row["reference_ms"] / row["dml_ep_ms"]
    return row


def format_table(rows: list[dict]) -> str:
    def cell(value, fmt):
        return "-" if value is None else format(value, fmt)

    lines = [f"{'model':34s} {'ort ms':>9s} {'dml_ep ms':>10s} {'ratio':>7s} {'ratio IQR':>13s} {'us/DML op':>10s} "
             f"{'ort MB':>7s} {'dml_ep MB':>10s} {'threads':>8s} {'refeval ms':>11s} {'x faster':>9s}"]
    for row in rows:
        iqr = "{:.2f}-{:.2f}".format(*row["ratio_iqr"])
        threads = "-" if row.get("ort_threads") is None else f"{row['ort_threads']}/{row['dml_ep_threads']}"
        lines.append(
            f"{row['model']:34s} {row['ort_ms']:9.2f} {row['dml_ep_ms']:10.2f} {row['ratio']:7.2f} {iqr:>13s} "
            f"{cell(row.get('dml_ep_us_per_dml_node'), '10.0f'):>10s} "
            f"{cell(row.get('ort_peak_mb'), '7.0f'):>7s} {cell(row.get('dml_ep_peak_mb'), '10.0f'):>10s} {threads:>8s} "
            f"{cell(row.get('reference_ms'), '11.1f'):>11s} {cell(row.get('reference_speedup'), '9.1f'):>9s}"
        )
    for row in rows:
        if "profile_ms" in row:
            parts = ", ".join(f"{key} {ms:.2f}" for key, ms in row["profile_ms"].items())
            lines.append(f"profile {row['model']} (ms per run): {parts}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--arithmetic", default="onnxruntime", choices=dml_ep.ARITHMETICS)
    parser.add_argument("--engine", default=default_engine(), choices=ENGINES, help="dml_ep's integer engine (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="onnxruntime intra-op threads")
    parser.add_argument("--profile", action="store_true", help="also show where dml_ep's time goes in each model")
    parser.add_argument("--no-nodes", action="store_true", help="skip the single-node benchmarks")
    parser.add_argument("--llm", action="store_true", help="the models are onnxruntime-genai builder decoders (model.onnx or its "
                        "folder, with genai_config.json): time an 8-token prompt pass and one decode step after it")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for path in [] if args.llm else args.models or default_models():
        rows.append(bench_model(path, args.repeat, args.arithmetic, args.threads, args.engine, args.profile))
        print(f"  {path.stem}: done", file=sys.stderr)
    for label, (path, feeds) in (case for path in args.models if args.llm for case in builder_llm_cases(path).items()):
        rows.append(bench_model(path, args.repeat, args.arithmetic, args.threads, args.engine, args.profile, feeds, label))
        print(f"  {label}: done", file=sys.stderr)
    if not args.models:
        for label, (path, feeds) in llm_cases(ROOT / ".cache" / "models").items():
            rows.append(bench_model(path, args.repeat, args.arithmetic, args.threads, args.engine, args.profile, feeds, label))
            print(f"  {label}: done", file=sys.stderr)
    if not args.no_nodes:
        for name, model in single_node_models().items():
            rows.append(bench_node(name, model, args.repeat, args.arithmetic, args.threads, args.engine))
    print(f"host: {host_kind()}")
    print(f"arithmetic={args.arithmetic}, engine={args.engine}, onnxruntime intra-op threads={args.threads}, repeats={args.repeat}")
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
