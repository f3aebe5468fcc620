"""The real DML EP's kernel registry, per onnxruntime release, matched as onnxruntime matches kernels.

The table (``data/dml_kernels.json``) is generated from onnxruntime's own sources by
``scripts/dml_kernel_table.py``: every row of the DML EP's registration (op, domain, since-version,
type constraints, required constant CPU inputs, outputs in CPU memory, support query), and the
releases that register it. A node finds a kernel as ``kernel_registry.cc`` finds one: the
since-version of the node's schema at the model's opset must equal a registered since-version (the
DML EP registers open-ended kernels only), and for each of the kernel's type constraints the first
present value bound to it must have one of its types.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx

from ..core.graph import ValueInfo, op_domain

TABLE = "data/dml_kernels.json"
DATA = Path(__file__).parent  # where TABLE and SINCE_VERSIONS are (importlib.resources took 2 ms to find them)


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One row of the DML EP's registration."""

    domain: str
    op: str
    since: int
    types: Mapping[str, frozenset[str]]  # type constraint -> onnxruntime type names ("float16", "seq(tensor(float))")
    cpu_inputs: tuple[int, ...]  # read from CPU memory (the required constant CPU inputs)
    cpu_outputs: tuple[int, ...]  # written to CPU memory (Shape's, Size's)
    query: str | None  # the support query's C++ name
    graph: bool  # fused into DirectML graphs (DmlGraphSupport::Supported)


@dataclasses.dataclass(frozen=True)
class KernelMatch:
    """A node's kernel, or why it has none: ``failure`` is "no-kernel", "no-kernel-at-version" or "types"."""

    kernel: Kernel | None
    failure: str = ""
    reason: str = ""


@functools.lru_cache(maxsize=1)
def _table_lines() -> tuple[dict[tuple[str, str], list[str]], dict[str, str]]:
    """The table's kernel rows by (domain, op), and its formal parameters by "domain::op::since",
    each the JSON text of its line (scripts/dml_kernel_table.py writes one a line, keys sorted): a
    session parses its own ops' only, where parsing the whole table cost it 3 ms and 4,000 objects
    for the cyclic collector to walk."""
    rows: dict[tuple[str, str], list[str]] = {}
    params: dict[str, str] = {}
    section = None
    for line in DATA.joinpath(TABLE).read_text().splitlines():
        line = line.strip().removesuffix(",")
        if line in ('"kernels": [', '"formal_parameters": {'):
            section = line
        elif section == '"kernels": [' and line.startswith("{"):
            key = _ROW_KEY.search(line)
            if key is None:  # not as scripts/dml_kernel_table.py writes it
                raise ValueError(f"{TABLE}: a kernel row without its domain and op: {line[:80]}")
            rows.setdefault((key["domain"], key["op"]), []).append(line)
        elif section == '"formal_parameters": {' and line.startswith('"'):
            name, _, value = line.partition(": ")
            params[json.loads(name)] = value
    return rows, params


_ROW_KEY = re.compile(r'"domain": "(?P<domain>[^"]*)", "graph": \w+, "op": "(?P<op>[^"]*)"')


def _formal_parameters(domain: str, op: str, since: int) -> dict | None:
    """The names of the type constraints bound to the inputs and outputs of an op's schema."""
    text = _table_lines()[1].get(f"{domain or 'ai.onnx'}::{op}::{since}")
    return None if text is None else json.loads(text)


@functools.lru_cache(maxsize=None)
def op_kernels(release: str, domain: str, op: str) -> list[Kernel]:
    """The kernels ``release`` registers for one op (domain "" for ai.onnx): made when a model has
    the op, as making all 433 rows' kernels cost a session 7 ms."""
    return [Kernel(row["domain"], row["op"], row["since"], {k: frozenset(v) for k, v in row["types"].items()},
                   tuple(row["cpu_inputs"]), tuple(row["cpu_outputs"]), row["query"], row["graph"])
            for row in map(json.loads, _table_lines()[0].get((domain, op), ())) if release in row["releases"]]


def kernels(release: str) -> dict[tuple[str, str], list[Kernel]]:
    """The kernels ``release`` registers, by (domain, op); domain "" for ai.onnx."""
    return {key: found for key in _table_lines()[0] if (found := op_kernels(release, *key))}


@functools.lru_cache(maxsize=None)
def since_version(domain: str, op: str, opset: int) -> int:
    """The since-version of the schema a node of this op takes at ``opset``: ONNX's for ai.onnx; 1 for
    onnxruntime's own ops (its contrib ops, and the ai.onnx ops it defines at version 1 before ONNX
    had them, such as LayerNormalization below opset 17). Read from SINCE_VERSIONS up to the opset it
    was made at (released schemas never change), from onnx above it."""
    if domain != "":
        return 1
    known = _since_versions()
    if opset <= known["max_opset"]:
        return max((v for v in known["ops"].get(op, ()) if v <= opset), default=1)
    try:
        return onnx.defs.get_schema(op, opset, "").since_version
    except onnx.defs.SchemaError:
        return 1


SINCE_VERSIONS = "data/onnx_since_versions.json"  # scripts/onnx_since_versions.py: onnx's schema lookup costs 20 ms first


@functools.lru_cache(maxsize=1)
def _since_versions() -> dict:
    return json.loads(DATA.joinpath(SINCE_VERSIONS).read_text())


def type_name(info: ValueInfo | None) -> str | None:
    """A value's type as onnxruntime names it ("float16", "int4", "seq(tensor(float))"); None if unknown."""
    if info is None:
        return None
    if info.type:
        return info.type[len("tensor("):-1] if info.type.startswith("tensor(") else info.type
    if info.dtype is None:
        return None
    return _numpy_type_name(info.dtype)


@functools.lru_cache(maxsize=None)
def _numpy_type_name(dtype: np.dtype) -> str:
    return onnx.TensorProto.DataType.Name(onnx.helper.np_dtype_to_tensor_dtype(dtype)).lower()


def find_kernel(node: onnx.NodeProto, opset: int, input_types: tuple, output_types: tuple, release: str) -> KernelMatch:
    """The kernel ``release``'s DML EP runs ``node`` with (``input_types``, ``output_types``:
    onnxruntime type names of the node's values, None for an omitted or untyped one), or why it has
    none. Worked out once per op, opset and types of the node's values (:data:`_MATCHES`): a
    model's thousands of nodes have a few dozen such signatures."""
    key = (release, node.domain, node.op_type, opset, input_types, output_types)
    found = _MATCHES.get(key)
    if found is None:
        found = _MATCHES[key] = _match(op_domain(node.domain), node.op_type, opset, input_types, output_types,
                                       release)
    if isinstance(found, KernelMatch):
        return found
    name, since, constraint, allowed, side, index = found  # a type the kernels do not take: named by the node's value
    value, value_type = (node.input, input_types) if side == "inputs" else (node.output, output_types)
    return KernelMatch(None, "types", f"{name}-{since}: the DML kernel takes {constraint} in ({', '.join(sorted(allowed))}), "
                                      f"not {value_type[index]} ({value[index]!r})")


_MATCHES: dict[tuple, KernelMatch | tuple] = {}  # find_kernel's signatures -> _match


def _match(domain: str, op: str, opset: int, input_types: tuple, output_types: tuple, release: str) -> KernelMatch | tuple:
    """find_kernel for a signature: the match, or the last kernel's type mismatch (op name,
    since-version, and :func:`_first_mismatch`)."""
    name = f"{domain + '::' if domain else ''}{op}"
    rows = op_kernels(release, domain, op)
    if not rows:
        return KernelMatch(None, "no-kernel", f"{name}: the DML EP of onnxruntime {release} registers no kernel for it")
    since = since_version(domain, op, opset)
    at_version = [k for k in rows if k.since == since]
    if not at_version:
        registered = ", ".join(str(v) for v in sorted({k.since for k in rows}))
        return KernelMatch(None, "no-kernel-at-version",
                           f"{name}-{since}: the DML EP of onnxruntime {release} registers {op} {registered}, "
                           f"not {since} (a kernel matches only its own since-version)")
    params = _formal_parameters(domain, op, since)
    if params is None:
        return KernelMatch(at_version[0])
    mismatch: tuple = ()
    for kernel in at_version:
        found = _first_mismatch(kernel, params, input_types, output_types)
        if found is None:
            return KernelMatch(kernel)
        mismatch = found
    return (name, since, *mismatch)


def _first_mismatch(kernel: Kernel, params: dict, input_types: tuple, output_types: tuple) -> tuple | None:
    """The first constraint whose first present value has a type the kernel does not take:
    (constraint, its types, "inputs" or "outputs", the value's index); None if all are taken."""
    for constraint, allowed in kernel.types.items():
        bound = [(side, index, values) for side, values in (("inputs", input_types), ("outputs", output_types))
                 for index, type_str in enumerate(params[side]) if type_str == constraint]
        for side, index, values in bound:
            actual = values[index] if index < len(values) else None
            if actual is not None:
                if actual not in allowed:
                    return constraint, allowed, side, index
                break
    return None
