"""Generate dml_ep/real_ep_data/dml_kernels.json: the real DML EP's kernel table, per onnxruntime release.

Reads, at each release's commit of an onnxruntime git repository (a clone of microsoft/onnxruntime, or
any fork with main's history):

- onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/OperatorRegistration.cpp: the
  rows of ``operatorRegistrationInformationTable`` (op, domain, the opset whose since-version the row
  takes, type-name and supported-type lists, graph support, required constant CPU inputs, support
  query), the SupportedTensorDataTypes flags and which of them ``RegisterDmlOperators`` turns into
  kernel types, the ONNX_OPERATOR_KERNEL_CLASS_NAME kernels (sequence, optional, If) and the
  DFT/STFT/GridSample kernels registered by hand;
- onnxruntime/core/providers/dml/OperatorAuthorHelper/OperatorVersions.h: the since-version each
  ``REG_INFO(opset, Op)`` stands for (``OnnxOperatorSet7::sc_sinceVer_Conv`` is 1).

Rows inside ``#if DML_TARGET_VERSION >= ...`` are kept: onnxruntime's DML build defines
DML_TARGET_VERSION_USE_LATEST (cmake/onnxruntime_providers_dml.cmake). A release is main's last commit
before main's VERSION_NUMBER moved past it (the release branch is cut there; the patch releases
cherry-pick fixes, none of which touched the registration table of 1.17-1.24).

The formal parameters each row's type constraints bind to come from the schemas of the onnxruntime
installed (``get_all_operator_schema``: ONNX's, and its own contrib ones). Run: ``python scripts/dml_kernel_table.py ONNXRUNTIME_GIT_DIR [--check]``;
--check compares with the checked-in table and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

VERSION_BUMPS = {  # the commit on main that moved VERSION_NUMBER past each release
    "1.17": "bd9d8fb2a",  # [ORT 1.17.0 release] Bump up version to 1.18.0 (#19170)
    "1.18": "b2481e360",  # Bump up version in main from 1.18.0 to 1.19.0 (#20489)
    "1.19": "134f47743",  # bumps up version in main from 1.19 -> 1.20 (#21588)
    "1.20": "e5c2e5084",  # bumps up version in main from 1.20 -> 1.21 (#22482)
    "1.21": "7864192c9",  # Bump version from 1.21 to 1.22 (#23787)
    "1.22": "6c8cb6a6d",  # bump version from 1.22 to 1.23 (#24506)
    "1.23": "bb7c295a7",  # Update the version number in the main branch to 1.24 (#26256)
    "1.24": "62e8ba933",  # Bump version to 1.25.0 (#27048)
}
DML = "onnxruntime/core/providers/dml"
REGISTRATION = f"{DML}/DmlExecutionProvider/src/Operators/OperatorRegistration.cpp"
VERSIONS = f"{DML}/OperatorAuthorHelper/OperatorVersions.h"
ABI_REGISTRY = f"{DML}/DmlExecutionProvider/src/AbiCustomRegistry.cpp"  # the kernels whose outputs or inputs it puts in CPU memory by name
HAND_REGISTERED = {  # file -> the kernels it registers by hand: (op, domain, since-versions, constraints)
    f"{DML}/DmlExecutionProvider/src/Operators/DmlDFT.h": "DFT",
    f"{DML}/DmlExecutionProvider/src/Operators/DmlSTFT.h": "STFT",
    f"{DML}/DmlExecutionProvider/src/Operators/DmlGridSample.h": "GridSample",
}
OUTPUT = Path(__file__).resolve().parent.parent / "dml_ep" / "realep" / "data" / "dml_kernels.json"
DOMAINS = {"kOnnxDomain": "", "kMSDomain": "com.microsoft", "kMSDmlDomain": "com.microsoft.dml"}
MACRO_DOMAIN = {"REG_INFO": "", "REG_INFO_DYNAMIC_OUTPUTS": "", "REG_INFO_VER": "", "REG_INFO_COPY": "",
                "REG_INFO_MS": "com.microsoft", "REG_INFO_MS_ALIAS": "com.microsoft", "REG_INFO_MSDML": "com.microsoft.dml"}
# SupportedTensorDataTypes flag -> the ONNX type RegisterDmlOperators makes of it (its "if (bool(supportedTypes & ...))")
FLAG_TYPES = {"Float32": "float", "UInt4": "uint4", "Int4": "int4", "UInt8": "uint8", "Int8": "int8", "UInt16": "uint16",
              "Int16": "int16", "Int32": "int32", "Int64": "int64", "String": "string", "Bool": "bool",
              "Float16": "float16", "Float64": "double", "UInt32": "uint32", "UInt64": "uint64"}
FLAG_TYPES.update({f"Sequence{flag}": f"seq(tensor({name}))" for flag, name in FLAG_TYPES.items()})  # onnxruntime's type strings


def git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def release_commit(repo: Path, bump: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", f"{bump}~1"], check=True,
                          capture_output=True, text=True).stdout.strip()


def without_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def split_arguments(text: str) -> list[str]:
    """Top-level comma-separated arguments of a macro call."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def since_versions(header: str) -> dict[str, dict[str, int]]:
    """OperatorVersions.h: namespace -> op -> since-version."""
    namespaces: dict[str, dict[str, int]] = {}
    for match in re.finditer(r"namespace ((?:Onnx|Msft)OperatorSet\d+)\s*\{(.*?)\}", without_comments(header), flags=re.S):
        namespaces[match.group(1)] = {op: int(v) for op, v in re.findall(r"sc_sinceVer_(\w+)\s*=\s*(\d+)", match.group(2))}
    return namespaces


def flag_values(source: str) -> dict[str, set[str]]:
    """SupportedTensorDataTypes: each flag name -> the ONNX types it turns into kernel types."""
    body = re.search(r"enum class SupportedTensorDataTypes[^{]*\{(.*?)\};", source, flags=re.S).group(1)
    registered = set(re.findall(r"^\s*if \(bool\(supportedTypes & SupportedTensorDataTypes::(\w+)\s*\)\)\s*edgeDescs\.push_back\((?:Tensor|Sequence)EdgeDesc",
                                without_comments(source), flags=re.M))
    flags: dict[str, set[str]] = {}
    for name, value in re.findall(r"(\w+)\s*=\s*([^,]+(?:\|[^,]+)*),", without_comments(body)):
        value = value.strip()
        if re.fullmatch(r"1(LLU)?\s*<<\s*\d+|0", value):
            flags[name] = {FLAG_TYPES[name]} if name in registered and name in FLAG_TYPES else set()
        elif "static_cast" in value:
            flags[name] = {FLAG_TYPES[n] for n in registered if n in FLAG_TYPES}
        else:
            flags[name] = set().union(*(flags[part.strip()] for part in value.split("|")))
    return flags


def constant_lists(source: str, flags: dict[str, set[str]]):
    """The typeNameList* and supportedTypeList* arrays, by name."""
    names, types = {}, {}
    text = without_comments(source)
    for name, body in re.findall(r"constexpr static std::array<const char\*, \d+> (\w+)\s*=\s*\{([^}]*)\};", text):
        names[name] = re.findall(r'"(\w+)"', body)
    for name, body in re.findall(r"constexpr static std::array<SupportedTensorDataTypes, \d+> (\w+)\s*=\s*(\{[^;]*\}|\w+);", text):
        if body.startswith("{"):
            entries = split_arguments(body.strip("{} \n"))
            types[name] = [sorted(set().union(*(flags[f.strip().removeprefix("SupportedTensorDataTypes::")]
                                                 for f in entry.split("|")))) for entry in entries if entry]
        else:
            types[name] = types[body]
    return names, types


def memory_by_name(abi_registry: str) -> dict[str, dict[str, list[int]]]:
    """AbiCustomRegistry.cpp's ``if (name == "Shape") builder.OutputMemoryType(..., 0)``: op -> CPU inputs and outputs."""
    found: dict[str, dict[str, list[int]]] = {}
    for op, kind, index in re.findall(r'name == "(\w+)"\)\s*\{\s*builder\.(Input|Output)MemoryType\(::OrtMemType::OrtMemTypeCPU\w*,\s*(\d+)\)',
                                      abi_registry):
        found.setdefault(op, {"cpu_inputs": [], "cpu_outputs": []})[f"cpu_{kind.lower()}s"].append(int(index))
    return found


def table_rows(source: str, versions: dict[str, dict[str, int]], memory: dict) -> list[dict]:
    names_lists, type_lists = constant_lists(source, flag_values(source))
    table = re.search(r"operatorRegistrationInformationTable\[\]\s*=\s*\{(.*?)\n\};", without_comments(source), flags=re.S).group(1)
    rows = []
    for macro, body in re.findall(r"\{\s*(REG_INFO\w*)\((.*?)\)\s*\},", table, flags=re.S):
        args = split_arguments(body)
        if macro == "REG_INFO_MS_ALIAS":
            del args[2]  # the aliases
        opset, op, type_names, supported, graph = (args + ["DmlGraphSupport::Supported"])[:5]  # Memcpy* leave it 0
        by_name = memory.get(op, {})
        cpu_inputs = [int(i) for i in re.findall(r"\d+", args[5])] if len(args) > 5 else []
        query = args[7] if len(args) > 7 and args[7] not in ("nullptr", "") else None
        domain = MACRO_DOMAIN[macro]
        namespace = ("OnnxOperatorSet" if domain == "" else "MsftOperatorSet") + opset.strip()
        constraints = dict(zip(names_lists[type_names], type_lists[supported]))
        rows.append({"domain": domain, "op": op, "since": versions[namespace][op], "types": constraints,
                     "cpu_inputs": sorted(set(cpu_inputs + by_name.get("cpu_inputs", []))),
                     "cpu_outputs": by_name.get("cpu_outputs", []), "query": query, "graph": graph.strip() == "DmlGraphSupport::Supported"})
    return rows


def kernel_class_rows(source: str) -> list[dict]:
    """Kernels defined with ONNX_OPERATOR_KERNEL_EX (sequences, optionals, If): CPU code on the DML EP;
    their type constraints are onnxruntime's own type lists, not checked here."""
    rows = []
    for op, domain, since, body in re.findall(r"ONNX_OPERATOR_KERNEL_EX\(\s*(\w+),\s*(\w+),\s*(\d+),\s*kDmlExecutionProvider,(.*?)\n\s*\w+\);",
                                              without_comments(source), flags=re.S):
        memory = {kind: [int(i) for i in re.findall(rf"\.{kind}MemoryType\(OrtMemTypeCPU\w*,\s*(\d+)\)", body)] for kind in ("Input", "Output")}
        rows.append({"domain": DOMAINS[domain], "op": op, "since": int(since), "types": {}, "cpu_inputs": memory["Input"],
                     "cpu_outputs": memory["Output"], "query": None, "graph": False})
    return rows


def hand_registered_rows(repo: Path, commit: str, source: str) -> list[dict]:
    """DFT, STFT and GridSample, registered by hand at the end of RegisterDmlOperators (types not checked here)."""
    rows = []
    for op, versions in (("DFT", re.findall(r"RegisterDFTKernel\(registry,\s*(\d+)\)", source)),
                         ("STFT", ["17"] if "RegisterSTFTKernel" in source else []),
                         ("GridSample", ["16"] if "RegisterGridSampleKernel" in source else [])):
        domain = ""
        if op == "GridSample":
            header = git_show(repo, commit, next(p for p, o in HAND_REGISTERED.items() if o == op))
            domain = "com.microsoft" if "kMSDomain" in header.split("RegisterGridSampleKernel")[1][:800] else ""
        rows += [{"domain": domain, "op": op, "since": int(v), "types": {}, "cpu_inputs": [], "cpu_outputs": [], "query": None, "graph": False}
                 for v in versions]
    return rows


def formal_parameters(domain: str, op: str, since: int, schemas: dict) -> dict | None:
    """The type string of each formal input and output of the schema the row's kernel serves
    (onnxruntime's schemas: ONNX's and its own, which include ai.onnx ops of its own such as
    LayerNormalization-1)."""
    schema = schemas.get((domain, op, since))
    if schema is None:
        return None
    return {"inputs": [p.typeStr for p in schema.inputs], "outputs": [p.typeStr for p in schema.outputs]}


def generate(repo: Path) -> dict:
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c  # the schemas onnxruntime matches kernels with

    schemas = {(s.domain, s.name, s.since_version): s for s in ort_c.get_all_operator_schema()}
    kernels: dict[tuple, dict] = {}
    commits = {}
    for release, bump in VERSION_BUMPS.items():
        commit = commits[release] = release_commit(repo, bump)
        source = git_show(repo, commit, REGISTRATION)
        versions = since_versions(git_show(repo, commit, VERSIONS))
        memory = memory_by_name(git_show(repo, commit, ABI_REGISTRY))
        for row in table_rows(source, versions, memory) + kernel_class_rows(source) + hand_registered_rows(repo, commit, source):
            key = json.dumps(row, sort_keys=True)
            releases = kernels.setdefault(key, {**row, "releases": []})["releases"]
            if release not in releases:  # a row may be listed twice (#if DML_TARGET_VERSION alternatives)
                releases.append(release)
    rows = sorted(kernels.values(), key=lambda r: (r["domain"], r["op"], r["since"], r["releases"][0]))
    params = {}
    for row in rows:
        found = formal_parameters(row["domain"], row["op"], row["since"], schemas)
        if found is not None:
            params[f"{row['domain'] or 'ai.onnx'}::{row['op']}::{row['since']}"] = found
    return {
        "source": {"repository": "microsoft/onnxruntime", "files": [REGISTRATION, VERSIONS, ABI_REGISTRY, *HAND_REGISTERED],
                   "releases": commits,
                   "generated_by": "scripts/dml_kernel_table.py"},
        "kernels": rows,
        "formal_parameters": params,
    }


def formatted(table: dict) -> str:
    """JSON with one kernel row per line, so a new release reads as a short diff."""
    lines = [json.dumps(row, sort_keys=True) for row in table["kernels"]]
    params = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(table["formal_parameters"].items())]
    return ("{\n" f' "source": {json.dumps(table["source"], sort_keys=True)},\n'
            ' "kernels": [\n  ' + ",\n  ".join(lines) + "\n ],\n"
            ' "formal_parameters": {\n  ' + ",\n  ".join(params) + "\n }\n}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="an onnxruntime git directory with main's history")
    parser.add_argument("--check", action="store_true", help="compare with the checked-in table instead of writing it")
    args = parser.parse_args(argv)
    table = formatted(generate(args.repo))
    if args.check:
        same = OUTPUT.read_text() == table
        print("the checked-in table is up to date" if same else f"{OUTPUT} differs from onnxruntime's sources")
        return 0 if same else 1
    OUTPUT.parent.mkdir(exist_ok=True)
    partial = OUTPUT.with_suffix(".partial")
    partial.write_text(table)
    partial.replace(OUTPUT)
    print(f"wrote {OUTPUT}: {len(json.loads(table)['kernels'])} kernel rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
