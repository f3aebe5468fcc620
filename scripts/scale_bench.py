"""Scale benchmark: dml_ep against onnxruntime CPU on generated graphs of 1,000 to 10,000 nodes.

    python scripts/scale_bench.py [--sizes 1000,2000,5000,10000] [--kinds KIND,...] [--timeout S]
                                  [--plan] [--repeat R] [--json FILE]

bench.py times real models, whose few hundred nodes hide costs that grow with the node count:
4,000 chained fallback nodes took 417 s, and 10,000 independent ones made 10,003 threads (an
onnxruntime session and thread pool each). This script builds tiny-tensor graphs of N nodes, so
that the time is all per-node overhead, of four kinds:

  fallback-chain  N float Softplus/Softsign/Elu in a chain, [1,16]: all on onnxruntime's CPU fallback
  fallback-wide   N of them each reading the graph input and each a graph output
  dml-chain       N float Adds of a constant in a chain: all ELEMENT_WISE_ADD1 on DirectML
  shared-dq       one weight DequantizeLinear shared by N/3 QDQ Conv groups (DQ -> Conv -> Q) in a
                  chain, 1x4x4x4 with a 1x1 conv, as quantize_static writes a shared weight; each
                  group is one QUANTIZED_LINEAR_CONVOLUTION after EnsureUniqueDQForNodeUnit

A small instance of each kind is planned first, to check that it still runs where its name says.
Each (kind, N, runtime) runs in a fresh child process that creates the session (onnxruntime with
its defaults and CPUExecutionProvider; dml_ep.InferenceSession) and runs it once; ``--repeat``
children each (5, the runtimes taking turns: one 0.02 s run is noise, and on a 2-core virtual
machine eight turns of one cell gave ratios from 1.8x to 5.4x around a median of 2.6x). The table gives the
medians of that wall time (imports excluded), the median of the turns' dml_ep / onnxruntime ratios
(each turn's pair runs back to back: a virtual machine's speed drifts by 2x within minutes, and a
ratio of medians could pair a fast onnxruntime turn with a slow dml_ep one), dml_ep's
microseconds per node, each child's peak RSS and its thread count after the run. Peak RSS is the child's VmHWM, not
ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child would report this (larger)
process's peak. A child that fails or passes ``--timeout`` is reported with its error's last line;
once a runtime times out on a kind, its larger sizes are skipped. ``--plan`` adds a child that only
plans (dml_ep.planning.planner.plan_model, as ``dml-ep inspect`` does). The last line checks the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import dml_ep

KINDS = ("fallback-chain", "fallback-wide", "dml-chain", "shared-dq")
SIZES = (1000, 2000, 5000, 10000)
TARGETS = "time per node flat from 1,000 to 10,000 nodes, within 3x of onnxruntime's session creation + run; peak RSS within 1.5x"
FLAT, TIME_RATIO, RSS_RATIO = 1.5, 3.0, 1.5
FALLBACK_OPS = ("Softplus", "Softsign", "Elu")  # on DirectML in the real EP, not modelled by dml_ep


def _model(nodes, shape, outputs, initializers=()) -> onnx.ModelProto:
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    graph = helper.make_graph(nodes, "scale", [value("x")], [value(name) for name in outputs], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def fallback_chain(n: int) -> onnx.ModelProto:
    names = ["x", *(f"t{i}" for i in range(n))]
    nodes = [helper.make_node(FALLBACK_OPS[i % 3], [names[i]], [names[i + 1]]) for i in range(n)]
    return _model(nodes, [1, 16], [names[-1]])


def fallback_wide(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node(FALLBACK_OPS[i % 3], ["x"], [f"y{i}"]) for i in range(n)]
    return _model(nodes, [1, 16], [f"y{i}" for i in range(n)])


def dml_chain(n: int) -> onnx.ModelProto:
    names = ["x", *(f"t{i}" for i in range(n))]
    nodes = [helper.make_node("Add", [names[i], "c"], [names[i + 1]]) for i in range(n)]
    return _model(nodes, [1, 16], [names[-1]], [numpy_helper.from_array(np.full((1, 16), 0.01, np.float32), "c")])


def shared_dq(n: int) -> onnx.ModelProto:
    """(n - 3) // 3 groups, plus the weight DQ, the first Q and the last DQ: about n nodes."""
    groups = max(1, (n - 3) // 3)
    weights = np.random.default_rng(0).integers(-127, 128, (4, 4, 1, 1)).astype(np.int8)
    initializers = [numpy_helper.from_array(array, name) for name, array in [
        ("w_q", weights), ("w_s", np.float32(0.01)), ("w_z", np.int8(0)), ("a_s", np.float32(0.05)), ("a_z", np.uint8(128))]]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"]),
             helper.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["q0"])]
    for i in range(groups):
        nodes += [helper.make_node("DequantizeLinear", [f"q{i}", "a_s", "a_z"], [f"d{i}"]),
                  helper.make_node("Conv", [f"d{i}", "w"], [f"c{i}"]),
                  helper.make_node("QuantizeLinear", [f"c{i}", "a_s", "a_z"], [f"q{i + 1}"])]
    nodes.append(helper.make_node("DequantizeLinear", [f"q{groups}", "a_s", "a_z"], ["y"]))
    return _model(nodes, [1, 4, 4, 4], ["y"], initializers)


BUILDERS = {"fallback-chain": fallback_chain, "fallback-wide": fallback_wide, "dml-chain": dml_chain, "shared-dq": shared_dq}


def check_kind(kind: str) -> None:
    """Plan a small instance and stop if the kind no longer runs where its name says."""
    model = BUILDERS[kind](15)
    plan = dml_ep.InferenceSession(model).plan
    operators = [getattr(entry, "operator", "fallback").replace("DML_OPERATOR_", "") for entry in plan.entries]
    convs = sum(node.op_type == "Conv" for node in model.graph.node)
    expected = {"fallback-chain": {"fallback"}, "fallback-wide": {"fallback"}, "dml-chain": {"ELEMENT_WISE_ADD1"}}
    if (operators.count("QUANTIZED_LINEAR_CONVOLUTION") != convs) if kind == "shared-dq" else (set(operators) != expected[kind]):
        raise SystemExit(f"{kind}: dml_ep's plan is no longer what this kind measures: {', '.join(sorted(set(operators)))}")


_CHILD = """
import json, os, sys, time
import numpy as np
runtime, path, shape = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3].split(",")]
if runtime == "ort":
    import onnxruntime
else:
    import dml_ep
    from dml_ep.core.graph import load_model
    from dml_ep.planning.planner import plan_model
feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
start = time.perf_counter()
if runtime == "plan":
    plan_model(load_model(path))
    created = time.perf_counter()
else:
    session = (onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]) if runtime == "ort"
               else dml_ep.InferenceSession(path))
    created = time.perf_counter()
    session.run(None, feeds)
end = time.perf_counter()
threads = len(os.listdir("/proc/self/task"))
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"create_s": created - start, "run_s": end - created, "total_s": end - start,
                  "peak_mb": peak_kb / 1024, "threads": threads}))
"""


def measure(runtime: str, path: Path, shape: list[int], timeout: float) -> dict:
    """Seconds, peak RSS (MiB) and threads of one fresh child; or {"error": its last line}."""
    command = [sys.executable, "-c", _CHILD, runtime, str(path), ",".join(map(str, shape))]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s", "timeout": True}
    if result.returncode:
        return {"error": (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_kind(kind: str, sizes: list[int], directory: Path, timeout: float, plan: bool, repeat: int) -> list[dict]:
    runtimes = ("ort", "dml_ep", "plan") if plan else ("ort", "dml_ep")
    timed_out: dict[str, int] = {}
    rows = []
    for n in sizes:
        model = BUILDERS[kind](n)
        path = directory / f"{kind}-{n}.onnx"
        onnx.save(model, path)
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        row = {"kind": kind, "n": n, "nodes": len(model.graph.node)}
        runs: dict[str, list[dict]] = {runtime: [] for runtime in runtimes}
        for _ in range(repeat):  # the runtimes take turns, so that a slow spell of the machine hits both
            for runtime in runtimes:
                if runtime in timed_out:
                    row[runtime] = {"error": f"skipped (timed out at N={timed_out[runtime]})"}
                    continue
                if "error" in row.get(runtime, {}):
                    continue
                result = measure(runtime, path, shape, timeout)
                if "error" in result:
                    row[runtime] = result
                    timed_out.update({runtime: n} if result.get("timeout") else {})
                else:
                    runs[runtime].append(result)
                print(f"  {kind} N={n} {runtime}: {result.get('error') or format(result['total_s'], '.2f') + ' s'}", file=sys.stderr)
        for runtime, results in runs.items():
            if runtime not in row:
                row[runtime] = {key: np.median([r[key] for r in results]).item() for key in results[0]}
        ort, dml = row["ort"], row["dml_ep"]
        if "error" not in ort and "error" not in dml:  # each turn's dml_ep child against the onnxruntime child just before it
            row["ratio"] = np.median([d["total_s"] / o["total_s"] for o, d in zip(runs["ort"], runs["dml_ep"])]).item()
            row["rss_ratio"] = dml["peak_mb"] / ort["peak_mb"]
        if "error" not in dml:
            row["dml_ep_us_per_node"] = dml["total_s"] * 1e6 / row["nodes"]
        rows.append(row)
    return rows


def verdict(rows: list[dict]) -> tuple[bool, list[str]]:
    """PASS if every size ran, us/node at the largest N is at most 1.5x that at the smallest, and
    every size is within 3x of onnxruntime's time and 1.5x of its peak RSS; else the failed targets."""
    failed = []
    if any("ratio" not in row for row in rows):
        failed.append("some sizes failed")
    per_node = [row.get("dml_ep_us_per_node") for row in rows]
    if len(rows) > 1 and (None in (per_node[0], per_node[-1]) or per_node[-1] > FLAT * per_node[0]):
        failed.append("not flat")
    if any(row.get("ratio", 0) > TIME_RATIO for row in rows):
        failed.append(f"time > {TIME_RATIO:g}x")
    if any(row.get("rss_ratio", 0) > RSS_RATIO for row in rows):
        failed.append(f"RSS > {RSS_RATIO:g}x")
    return not failed, failed


def format_table(kind: str, rows: list[dict], plan: bool) -> str:
    def cell(value, fmt, width):
        return f"{'-':>{width}s}" if value is None else format(value, f"{width}{fmt}")

    def seconds(result, width):
        if "error" not in result:
            return cell(result["total_s"], ".2f", width)
        word = "timeout" if result.get("timeout") else result["error"].split()[0] if result["error"].startswith("skipped") else "failed"
        return f"{word:>{width}s}"

    lines = [kind, f"{'nodes':>7s} {'ort s':>8s} {'dml_ep s':>9s} {'ratio':>7s} {'us/node':>8s} {'ort MB':>7s} "
             f"{'dml_ep MB':>10s} {'RSS ratio':>10s} {'threads ort/dml_ep':>19s}" + (f" {'plan s':>8s}" if plan else "")]
    for row in rows:
        ort, dml = row["ort"], row["dml_ep"]
        threads = f"{ort.get('threads', '-')}/{dml.get('threads', '-')}"
        lines.append(
            f"{row['nodes']:7d} {seconds(ort, 8)} {seconds(dml, 9)} {cell(row.get('ratio'), '.2f', 7)} "
            f"{cell(row.get('dml_ep_us_per_node'), '.0f', 8)} {cell(ort.get('peak_mb'), '.0f', 7)} "
            f"{cell(dml.get('peak_mb'), '.0f', 10)} {cell(row.get('rss_ratio'), '.2f', 10)} {threads:>19s}"
            + (f" {seconds(row['plan'], 8)}" if plan else ""))
    for row in rows:
        for runtime in ("ort", "dml_ep", "plan"):
            if "error" in row.get(runtime, {}):
                lines.append(f"  N={row['n']} {runtime}: {row[runtime]['error']}")
    return "\n".join(lines)


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "unknown CPU")
    return (f"machine: {cpu}, {os.cpu_count()} cores, onnxruntime {onnxruntime.__version__}, numpy {np.__version__}, "
            f"Python {sys.version.split()[0]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="node counts, comma-separated (default: %(default)s)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="graph kinds, comma-separated (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per child process (default: %(default)s)")
    parser.add_argument("--plan", action="store_true", help="also time dml_ep's planning alone")
    parser.add_argument("--repeat", type=int, default=5, help="fresh children per cell; the table gives their medians (default: %(default)s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    kinds = args.kinds.split(",")
    if unknown := [kind for kind in kinds if kind not in KINDS]:
        parser.error(f"unknown kind {', '.join(unknown)} (choose from {', '.join(KINDS)})")
    for kind in kinds:
        check_kind(kind)
    results = {}
    with tempfile.TemporaryDirectory(prefix="scale_bench-") as directory:
        for kind in kinds:
            results[kind] = bench_kind(kind, sizes, Path(directory), args.timeout, args.plan, args.repeat)
    print(machine())
    for kind, rows in results.items():
        print(format_table(kind, rows, args.plan))
    verdicts = {kind: verdict(rows) for kind, rows in results.items()}
    parts = [f"{kind} {'PASS' if passed else 'FAIL (' + ', '.join(failed) + ')'}" for kind, (passed, failed) in verdicts.items()]
    print(f"targets: {TARGETS}: {'; '.join(parts)}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results,
                                         "verdicts": {kind: {"pass": p, "failed": f} for kind, (p, f) in verdicts.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
