"""What each onnxruntime release does to a graph before the DML EP runs it, as far as dml_ep models it.

A release selects the QDQ selector-action rules (``passes.qdq_rules.RULE_SETS``) and the Level-2
fusions that changed for DML nodes between releases (read from onnxruntime's history,
docs/dml_ep_mapping.md):

- MatMulIntegerToFloatFusion runs for DML nodes from 1.18 (27b1dc91a, "[DML]
  MatrixMultiplyIntegerToFloat", which changed its provider list from CPU to CPU and DML);
- from 1.21 it leaves a DynamicQuantizeLinear -> MatMulInteger whose A and B take more than
  4 GiB as floats to DirectML's MatMulInteger (f16036b6f, ``CheckMatMulLargeTensors``).

A release also selects the real DML EP's kernel table (``kernel_registry``; the table names the
releases it holds): 1.18 and 1.19 register different kernels (ReduceMin-20, DFT), so "1.18-1.19"
became "1.18" and "1.19"; 1.21 to 1.24 register the same ones.

The names of release ranges that only the QDQ rules told apart before ("1.20-1.23",
"1.17-1.19", "1.18-1.19") remain accepted; they mean the newest release of their range.

A module of the foundations, outside ``passes``: the command line's parser offers the releases
without importing the passes (and numpy and onnx with them).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Release:
    """One onnxruntime release (or a range that behaves alike) as dml_ep models it."""

    qdq_rules: str  # the key of its QDQ rule set in passes.qdq_rules.RULE_SETS
    matmul_integer_to_float_for_dml: bool  # MatMulIntegerToFloatFusion includes DML nodes
    large_matmul_stays_integer: bool  # ... except a DynamicQuantizeLinear-fed one over 4 GiB as floats
    kernels: str  # the release whose DML EP kernel table applies (a release of realep/data/dml_kernels.json)


RELEASES = {
    "1.24+": Release("1.24+", True, True, "1.24"),
    "1.21-1.23": Release("1.20-1.23", True, True, "1.23"),
    "1.20": Release("1.20-1.23", True, False, "1.20"),
    "1.19": Release("1.17-1.19", True, False, "1.19"),
    "1.18": Release("1.17-1.19", True, False, "1.18"),
    "1.17": Release("1.17-1.19", False, False, "1.17"),
}
RELEASE_NAMES = tuple(RELEASES)  # what help and errors list: each release once
# Older names of ranges, still taken (scripts use them), never listed: "1.20-1.23" ran as 1.23 though 1.20 differs
RELEASES["1.20-1.23"] = RELEASES["1.21-1.23"]
RELEASES["1.18-1.19"] = RELEASES["1.17-1.19"] = RELEASES["1.19"]
DEFAULT_RELEASE = "1.24+"
