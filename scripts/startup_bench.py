"""Start-up benchmark: ``dml-ep`` as a whole process against onnxruntime's, in the same run.

    python scripts/startup_bench.py [--repeat R] [--chain N] [--outputs N] [--json FILE]

Each row times whole processes, interpreter start to exit, as a user meets them:

  --version, --help   ``dml-ep --version`` and ``dml-ep --help``, against ``python -c "import onnxruntime"``
  one node            ``dml-ep run one.onnx`` against a python -c that imports onnxruntime, makes its
                      InferenceSession (CPUExecutionProvider) and runs it once on the same input
  chain               the same on a chain of N Add/Relu/Mul nodes (float32 [1,64]; 4,000 by default)
  outputs             the same on a model of N outputs (10,000 by default), each its own Add, Relu or Mul
                      of the input: time, and peak RSS

Each child is started by a small Python of its own that reports the child's wall time and peak RSS
(``RUSAGE_CHILDREN``: a child's ru_maxrss starts at its parent's, so the parent must be small). The
runtimes take turns, ``--repeat`` times (5 by default); a row gives the medians and the median of the
turns' ratios (each turn's pair runs back to back: a shared machine's speed drifts). The children run
with a bytecode cache (``PYTHONPYCACHEPREFIX``, a temporary folder, warmed first), as an installed
package has one: an editable install under ``PYTHONDONTWRITEBYTECODE`` would compile dml_ep's modules at
every start. The last lines check the targets of issue 58, item 10.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGETS = {"--version": 0.3, "--help": 0.3}  # seconds
CHAIN_RATIO, ONE_NODE_RATIO, RSS_RATIO = 3.0, 1.5, 1.5

_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

_ORT_RUN = """
import sys
import numpy as np
import onnxruntime
session = onnxruntime.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
session.run(None, {"x": np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)})
"""

_MODELS = """
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPS = ("Add", "Relu", "Mul")


def model(nodes, outputs):
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 64])
    constant = numpy_helper.from_array(np.full((1, 64), 0.5, np.float32), "c")
    graph = helper.make_graph(nodes, "startup", [value("x")], [value(name) for name in outputs], [constant])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def node(index, source, output):
    op = OPS[index % 3]
    return helper.make_node(op, [source] + ([] if op == "Relu" else ["c"]), [output])


folder, chain, outputs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["x", *(f"t{i}" for i in range(chain))]
onnx.save(model([node(0, "x", "t0")], ["t0"]), f"{folder}/one.onnx")
onnx.save(model([node(i, names[i], names[i + 1]) for i in range(chain)], [names[-1]]), f"{folder}/chain.onnx")
onnx.save(model([node(i, "x", f"y{i}") for i in range(outputs)], [f"y{i}" for i in range(outputs)]), f"{folder}/outputs.onnx")
"""


def measure(command: list[str], env: dict) -> tuple[float, float]:
    """A whole process's wall time (s) and peak RSS (MiB), through a small Python that starts it."""
    result = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, env=env, check=True)
    seconds, kib = result.stdout.split()
    return float(seconds), int(kib) / 1024


def turns(pair: dict[str, list[str]], env: dict, repeat: int) -> dict[str, list[tuple[float, float]]]:
    """Each command of ``pair`` run ``repeat`` times, taking turns."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in pair}
    for _ in range(repeat):
        for name, command in pair.items():
            runs[name].append(measure(command, env))
    return runs


def row(label: str, runs: dict[str, list[tuple[float, float]]]) -> dict:
    """Medians of each side, and the median of the turns' dml_ep / onnxruntime ratios."""
    (ort_name, ort), (dml_name, dml) = runs.items()
    return {"row": label, ort_name: statistics.median(t for t, _ in ort), dml_name: statistics.median(t for t, _ in dml),
            "ratio": statistics.median(d / o for (d, _), (o, _) in zip(dml, ort)),
            "ort_mb": statistics.median(m for _, m in ort), "dml_mb": statistics.median(m for _, m in dml),
            "rss_ratio": statistics.median(d / o for (_, d), (_, o) in zip(dml, ort))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chain", type=int, default=4000)
    parser.add_argument("--outputs", type=int, default=10000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dml_ep_startup_") as folder:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = os.path.join(folder, "pycache")
        subprocess.run([sys.executable, "-c", _MODELS, folder, str(args.chain), str(args.outputs)], check=True, env=env)
        dml = [sys.executable, "-m", "dml_ep"]
        ort = [sys.executable, "-c", _ORT_RUN]
        import_ort = [sys.executable, "-c", "import onnxruntime"]
        for warm in ([*dml, "run", f"{folder}/one.onnx"], [*ort, f"{folder}/one.onnx"]):  # the bytecode cache
            measure(warm, env)
        rows = [row("--version", turns({"ort": import_ort, "dml_ep": [*dml, "--version"]}, env, args.repeat)),
                row("--help", turns({"ort": import_ort, "dml_ep": [*dml, "--help"]}, env, args.repeat))]
        for name, label in (("one", "one node"), ("chain", f"chain of {args.chain:,}"), ("outputs", f"{args.outputs:,} outputs")):
            path = f"{folder}/{name}.onnx"
            rows.append(row(label, turns({"ort": [*ort, path], "dml_ep": [*dml, "run", path]}, env, args.repeat)))
    print(f"{'':18} {'onnxruntime':>12} {'dml-ep':>8} {'ratio':>6}   {'onnxruntime':>12} {'dml-ep':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['row']:18} {r['ort']:10.2f} s {r['dml_ep']:6.2f} s {r['ratio']:5.2f}x   {r['ort_mb']:9.0f} MiB {r['dml_mb']:5.0f} MiB"
              f" {r['rss_ratio']:5.2f}x")
    print("(--version and --help against python -c 'import onnxruntime'; the runs against onnxruntime's import, session and run)")
    checks = [*(f"{name} {rows[i]['dml_ep']:.2f} s < {limit:g} s: {'ok' if rows[i]['dml_ep'] < limit else 'FAIL'}"
                for i, (name, limit) in enumerate(TARGETS.items())),
              f"one node {rows[2]['ratio']:.2f}x <= {ONE_NODE_RATIO:g}x: {'ok' if rows[2]['ratio'] <= ONE_NODE_RATIO else 'FAIL'}",
              f"chain {rows[3]['ratio']:.2f}x <= {CHAIN_RATIO:g}x: {'ok' if rows[3]['ratio'] <= CHAIN_RATIO else 'FAIL'}",
              f"outputs peak RSS {rows[4]['rss_ratio']:.2f}x <= {RSS_RATIO:g}x: {'ok' if rows[4]['rss_ratio'] <= RSS_RATIO else 'FAIL'}"]
    print("\n".join(checks))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
