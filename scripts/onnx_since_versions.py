"""Write dml_ep/real_ep_data/onnx_since_versions.json: each ai.onnx op's schema versions, up to the
installed onnx's opset.

kernel_registry.since_version reads a node's since-version from it: onnx's own schema lookup costs
a process 20 ms the first time (it builds every schema), a tenth of a 1,000-node session. A
schema's versions never change once released, so the file holds for every opset up to its
``max_opset`` whatever onnx is installed; above it, onnx is asked. tests/test_kernel_registry.py
checks the file against the installed onnx.

    python scripts/onnx_since_versions.py
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx

OUT = Path(__file__).resolve().parent.parent / "dml_ep" / "realep" / "data" / "onnx_since_versions.json"


def since_versions() -> dict:
    ops: dict[str, list[int]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "":
            ops.setdefault(schema.name, []).append(schema.since_version)
    return {"max_opset": onnx.defs.onnx_opset_version(), "onnx": onnx.__version__,
            "ops": {name: sorted(set(versions)) for name, versions in sorted(ops.items())}}


if __name__ == "__main__":
    OUT.write_text(json.dumps(since_versions(), separators=(",", ":")) + "\n")
    print(f"wrote {OUT}")
