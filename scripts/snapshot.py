"""Every CLI product on a set of models, as one digest per product: run it before and after a change
that should not change behaviour (a restructuring), then diff the two files.

    python scripts/snapshot.py OUT.json [MODEL[:SHAPES] ...]

Each model (default: the shipped ones) goes through ``inspect`` (text, ``--nodes``, ``--descs``,
``--json``, ``--save-rewritten``), ``compare`` (``--per-node``, ``--json``, ``--html``, both
arithmetics), ``run`` (``--output-dir``, ``--save-outputs``) and ``export --dxdispatch``; stdout,
stderr, exit status and every file written are recorded by SHA-256. Timings are the one part of a
product that varies from run to run: lines and JSON fields holding them are masked first.
SHAPES is ``name=d0,d1;name2=...`` for a model with symbolic sizes."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(str(p) for p in (ROOT / "models").rglob("*.onnx"))
TIMING = re.compile(rb"\d+(\.\d+)?\s*(ms|s|\xc2\xb5s|us)\b|\"(seconds|elapsed|time|duration)[a-z_]*\": [0-9.e+-]+")


def commands(model: str, shapes: list[str], out: Path) -> dict[str, list[str]]:
    """The products of one model: name -> dml-ep's arguments (files written under ``out``)."""
    shape = [a for s in shapes for a in ("--shape", s)]
    base = [model, *shape]
    return {
        "inspect": ["inspect", *base],
        "inspect-nodes": ["inspect", *base, "--nodes", "--descs", "--quiet"],
        "inspect-json": ["inspect", *base, "--quiet", "--json", str(out / "plan.json"),
                         "--save-rewritten", str(out / "rewritten.onnx"), "--html", str(out / "plan.html")],
        "compare": ["compare", *base, "--reference", "ort-exact", "--per-node", "--quiet",
                    "--json", str(out / "compare.json"), "--html", str(out / "compare.html")],
        "compare-ort": ["compare", *base, "--reference", "ort", "--arithmetic", "onnxruntime", "--quiet"],
        "run": ["run", *base, "--output-dir", str(out / "outputs"), "--save-outputs", str(out / "outputs.json")],
        "export": ["export", *base, "--dxdispatch", str(out / "dxdispatch")],
    }


def digest(data: bytes) -> str:
    return hashlib.sha256(TIMING.sub(b"<t>", data)).hexdigest()[:16]


def products(model: str, shapes: list[str]) -> dict[str, object]:
    result: dict[str, object] = {}
    for name, args in commands(model, shapes, Path("OUT")).items():
        with tempfile.TemporaryDirectory() as tmp:
            args = [a.replace("OUT", tmp) if a.startswith("OUT") else a for a in args]
            done = subprocess.run([sys.executable, "-m", "dml_ep", *args], capture_output=True, cwd=tmp,
                                  env={**os.environ, "COLUMNS": "160"}, timeout=1800)
            files = {str(p.relative_to(tmp)): digest(p.read_bytes().replace(tmp.encode(), b"OUT"))
                     for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
            result[name] = {"status": done.returncode,
                            "stdout": digest(done.stdout.replace(tmp.encode(), b"OUT")),
                            "stderr": digest(done.stderr.replace(tmp.encode(), b"OUT")), "files": files}
        print(model, name, done.returncode, file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", metavar="OUT.json", help="the digests to write (a new file)")
    parser.add_argument("models", nargs="*", metavar="MODEL[:SHAPES]", help="default: the shipped models")
    args = parser.parse_args()
    if Path(args.out).exists():
        parser.error(f"{args.out} exists: give a new file")
    out, models = args.out, args.models
    snapshot = {}
    for spec in models or SHIPPED:
        model, _, shapes = spec.partition(":")
        snapshot[Path(model).name] = products(str(Path(model).resolve()), [s for s in shapes.split(";") if s])
    Path(out).write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
