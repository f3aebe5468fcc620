"""What every JSON report of ``dml-ep`` says about how it was made, so that two reports that differ
can be told apart by their versions, CPU or inputs rather than by guesswork.

``schema_version`` numbers the layout of the reports; it goes up when a key is removed or changes
meaning, not when one is added. Version 2 (1 had each model's ``atol``, now ``tolerance``):

- every report: ``$schema``, the id of its JSON Schema (:data:`SCHEMA_IDS`; both are in
  ``dml_ep/reports/schemas/reports.schema.json``, which docs/json_reports.md describes); ``schema_version``;
  ``versions`` of dml_ep, onnxruntime, onnx, numpy and python; ``cpu``: ``machine``, ``flags``
  (the host's CPU flags) and ``saturates_u8s8`` (whether onnxruntime's uint8 x int8 GEMMs saturate
  pairs of products on this CPU);
- ``inspect``: ``model``, ``input_shapes`` (those given with ``--shape``), ``assumed`` (symbolic
  dimensions taken as 1), ``pending`` (nodes whose shapes only a run tells), ``nodes`` and ``summary``;
- ``compare``: ``seed``, ``ok``, ``models`` (one ``ModelReport`` each, with ``inputs``: each
  input's file, or ``"random (seed N)"``) and ``errors``.
"""

from __future__ import annotations

import platform

import numpy as np
import onnx
import onnxruntime

from ..numerics.arithmetic import cpu_flags, host_saturates_u8s8
from ..numerics.kernels import compiled
from ..version import __version__

SCHEMA_VERSION = 2
SCHEMA_IDS = {command: f"https://github.com/dml-ep/dml_ep/schemas/{command}_report.schema.json" for command in ("inspect", "compare")}


def versions() -> dict[str, str]:
    """dml_ep's version, and those of what decides its results."""
    return {"dml_ep": __version__, "onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "kernels": compiled.summary()}


def host_kind() -> str:
    """The host as its results depend on it, on one line: the x86-64 level the CPU runs (by CPUID),
    whether it has VNNI, whether onnxruntime's uint8 x int8 GEMMs saturate, and which kernel build runs."""
    flags = cpu_flags()
    machine = platform.machine()
    baseline = "x86-64 (baseline)" if machine.lower() in ("x86_64", "amd64") else machine
    level = compiled.SUPPORTED[0].replace("_", "-") if compiled.SUPPORTED else baseline
    vnni = "VNNI" if flags & {"avx512_vnni", "avx_vnni"} else "no VNNI"
    saturation = "saturate" if host_saturates_u8s8() else "are exact"
    return f"{level} ({vnni}); onnxruntime's uint8 x int8 GEMMs {saturation}; {compiled.summary()}"


def report_meta(command: str, **fields) -> dict:
    """The keys every report of ``command`` (inspect, compare) starts with, then ``fields``."""
    cpu = {"machine": platform.machine(), "flags": sorted(cpu_flags()), "saturates_u8s8": host_saturates_u8s8()}
    return {"$schema": SCHEMA_IDS[command], "schema_version": SCHEMA_VERSION, "versions": versions(), "cpu": cpu, **fields}
