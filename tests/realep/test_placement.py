"""Where the real DML EP runs nodes dml_ep plans: its kernel table (exact since-versions, type
constraints, per release), its data-type check and GetCpuPreferredNodes, one test per reason class.
Every expectation is read off onnxruntime's sources (OperatorRegistration.cpp, kernel_registry.cc,
ExecutionProvider.cpp, fallback_cpu_capability.cc), not from dml_ep's output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.core.graph import ValueInfo, node_io
from dml_ep.operators.nodes import DmlNode, FallbackNode
from dml_ep.operators.registration import REGISTRATIONS
from dml_ep.planning.planner import plan_model
from dml_ep.realep import kernel_registry
from dml_ep.realep.kernel_registry import kernels
from dml_ep.realep.placement import CPU_CLASSES, CPU_OUTPUT_OPS, ON_DML_CPU_OUTPUT, REASON_CLASSES, place_nodes
from dml_ep.reports import node_table

F, I64, F16 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.FLOAT16
info = helper.make_tensor_value_info
ROOT = Path(__file__).resolve().parents[2]


def model_of(nodes, inputs, outputs, initializers=(), opset=19):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])


def entries_by_output(model, **options):
    return {e.node.output[0]: e for e in plan_model(model, **options).entries}


def constant_of_shape(opset):
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], value=numpy_helper.from_array(np.array([1], np.int32)))
    return model_of([node], [info("shape", I64, [2])], [info("y", TensorProto.INT32, None)], opset=opset)


def test_a_since_version_the_dml_ep_does_not_register_runs_on_the_cpu():
    """ConstantOfShape-20: the DML EP registers 9 and 21 (REG_INFO(9, ...), REG_INFO(21, ...)), and an
    open-ended kernel matches only its own since-version (kernel_registry.cc VerifyVersion)."""
    entry = entries_by_output(constant_of_shape(20))["y"]
    assert isinstance(entry, FallbackNode) and entry.kind == "no-kernel-at-version"
    assert entry.reason.startswith("ConstantOfShape-20: the DML EP of onnxruntime 1.24 registers ConstantOfShape 9, 21, not 20")
    assert entry.reason.endswith("on the CPU in the real EP too")
    # on DirectML (FILL_VALUE_CONSTANT), planned when a run gives its shape input (a required CPU input)
    assert entries_by_output(constant_of_shape(21))["y"].kind == "planned-when-run"


def test_an_op_the_dml_ep_has_no_kernel_for_runs_on_the_cpu():
    node = helper.make_node("Inverse", ["x"], ["y"], domain="com.microsoft")
    entry = entries_by_output(model_of([node], [info("x", F, [2, 2])], [info("y", F, [2, 2])]))["y"]
    assert isinstance(entry, FallbackNode) and entry.kind == "no-kernel"
    assert entry.reason.startswith("com.microsoft::Inverse: the DML EP of onnxruntime 1.24 registers no kernel for it")


def test_a_type_the_kernel_does_not_take_runs_on_the_cpu():
    """Relu-14's kernel takes T in float16, float, int8, int16, int32 (REG_INFO(14, Relu, typeNameListDefault,
    supportedTypeListFloat16to32SignedInts8to32)): int64, which ONNX's Relu-14 takes, is not among them."""
    node = helper.make_node("Relu", ["x"], ["y"])
    entry = entries_by_output(model_of([node], [info("x", I64, [2])], [info("y", I64, [2])]))["y"]
    assert isinstance(entry, FallbackNode) and entry.kind == "types"
    assert "takes T in (float, float16, int16, int32, int8), not int64 ('x')" in entry.reason


@pytest.mark.parametrize("release, placed", [("1.18", "no-kernel-at-version"), ("1.19", "DML_OPERATOR_REDUCE")])
def test_the_kernel_table_is_the_release_s(release, placed):
    """ReduceMin-20 is registered from 1.19 (main before the 1.19 -> 1.20 bump has REG_INFO(20, ReduceMin)):
    on the CPU before, on DirectML's REDUCE (which dml_ep models) from then."""
    node = helper.make_node("ReduceMin", ["x"], ["y"], keepdims=0)
    model = model_of([node], [info("x", F, [2, 3])], [info("y", F, None)], opset=20)
    entry = entries_by_output(model, qdq_rules=release)["y"]
    assert (entry.kind if isinstance(entry, FallbackNode) else entry.operator) == placed


def test_a_value_directml_has_no_data_type_for_runs_on_the_cpu():
    """DoesNodeContainSupportedDataTypes: TryGetTensorDataType fails for an optional value (If-16's
    kernel, registered by ONNX_OPERATOR_KERNEL_EX, takes it; the data-type check does not)."""
    branch = helper.make_graph([helper.make_node("Optional", ["x"], ["o"])], "b", [],
                               [helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    values = {"c": ValueInfo("c", np.dtype(bool), (), "tensor(bool)"), "x": ValueInfo("x", np.dtype(np.float32), (2,), "tensor(float)"),
              "y": ValueInfo("y", None, None, "optional(tensor(float))")}
    placement, = place_nodes([node], [node_io(node)], values, {}, {"c", "x"}, {"": 16}, "1.24")
    assert placement.kind == "data-type"
    assert placement.reason == "ai.onnx::If: 'y' is optional(tensor(float)), which DirectML has no data type for (DoesNodeContainSupportedDataTypes)"


def shape_subgraph(middle_type=F):
    """x -> Shape -> Gather(0) -> Cast(middle_type) -> Cast(int64) -> Add(1) -> Range(0, ., 1), which no
    rewrite folds (the batch size is symbolic)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Cast", ["n"], ["m"], to=middle_type),
             helper.make_node("Cast", ["m"], ["k"], to=I64),
             helper.make_node("Add", ["k", "one"], ["p"]),
             helper.make_node("Range", ["zero", "p", "one"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one")]
    return model_of(nodes, [info("x", F, ["batch", 4])], [info("y", I64, None)], inits)


def test_shape_computations_are_cpu_preferred():
    """GetCpuPreferredNodes: Shape's output is in CPU memory (AbiCustomRegistry: OutputMemoryType for
    "Shape"); each consumer whose other inputs are small initializers or graph inputs goes to the CPU,
    and its outputs become CPU tensors in turn. Range reads its inputs as CPU inputs
    (requiredConstantCpuInputs(0, 1, 2)), so it stays; Shape itself consumes no CPU tensor. The Add is
    an op dml_ep models (ELEMENT_WISE_ADD of int64), on the CPU here as in the real EP."""
    entries = entries_by_output(shape_subgraph())
    preferred = {name for name, e in entries.items() if isinstance(e, FallbackNode) and e.kind == "cpu-preferred"}
    assert preferred == {"n", "m", "k", "p"}
    assert "CPU-preferred (GetCpuPreferredNodes): computes from Shape 's' on the CPU" in entries["n"].reason
    assert entries["s"].kind == "cpu-output"


def test_shape_is_the_dml_eps_own_cpu_output_kernel_counted_as_modelled():
    """Shape runs on the DML EP's own kernel (Shape.cpp), which writes int64 dims to CPU memory and builds
    no DirectML operator: its own class, coloured as modelled, the values onnxruntime's CPU Shape gives."""
    entries = entries_by_output(shape_subgraph())
    shape = entries["s"]
    assert isinstance(shape, FallbackNode) and shape.kind == "cpu-output" and shape.reason.endswith(ON_DML_CPU_OUTPUT)
    assert node_table.placement(shape) == "modelled"
    assert "cpu-output" not in CPU_CLASSES and "no DirectML operator" in REASON_CLASSES["cpu-output"]


def test_the_cpu_output_ops_are_the_kernel_tables():
    """CPU_OUTPUT_OPS: the ai.onnx rows with CPU outputs that join no DirectML graph (SequenceLength's sequences aside)."""
    table = {(row.domain, row.op) for rows in kernels("1.24").values() for row in rows if row.cpu_outputs and not row.graph}
    assert table - {("", "SequenceLength")} == {("", op) for op in CPU_OUTPUT_OPS}


def test_a_float16_input_stops_cpu_preference():
    """Inputs of type float16 keep a node off the CPU: the Cast to float16 goes to the CPU, the Cast
    reading its float16 output does not, nor anything after it."""
    entries = entries_by_output(shape_subgraph(F16))
    preferred = {name for name, e in entries.items() if isinstance(e, FallbackNode) and e.kind == "cpu-preferred"}
    assert preferred == {"n", "m"}


def test_a_modelled_node_the_real_ep_prefers_on_the_cpu_runs_with_onnxruntime_s_arithmetic():
    """A DynamicQuantizeLinear computing from a shape (Shape -> Cast(float) -> DQL) is a node dml_ep
    models; the real EP runs it on the CPU, so dml_ep does too."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["f"], to=F),
             helper.make_node("DynamicQuantizeLinear", ["f"], ["q", "scale", "zp"])]
    model = model_of(nodes, [info("x", F, ["batch", 4])], [info("q", TensorProto.UINT8, None)])
    entries = entries_by_output(model)
    assert entries["q"].kind == "cpu-preferred" and entries["f"].kind == "cpu-preferred"
    without_shape = model_of(nodes[2:], [info("f", F, [2])], [info("q", TensorProto.UINT8, None)])
    assert isinstance(entries_by_output(without_shape)["q"], DmlNode)


def test_every_modelled_row_is_a_registered_kernel():
    """The registration rows dml_ep models take since-versions and constant CPU inputs the real EP's
    table has (default release)."""
    table = kernel_registry.kernels("1.24")
    for (domain, op), row in REGISTRATIONS.items():
        if domain == "com.microsoft.dml" and (domain, op) not in table:
            continue  # a part of a DirectML graph dml_ep splits a node into (DmlJoin...), no ONNX node of the real EP's
        registered = {k.since: k for k in table[(domain, op)]}
        assert set(row.versions) <= set(registered), op
        newest = max(row.versions)  # a row's constant CPU inputs are its newest version's (older ones lack the inputs)
        assert set(row.constant_cpu_inputs) <= set(registered[newest].cpu_inputs), op


def test_the_table_s_since_versions_are_schema_since_versions():
    """A parse slip in OperatorVersions.h would give a since-version no schema has; every ai.onnx row
    of the registration table (rows with type constraints) is one of ONNX's, or 1 (onnxruntime's own
    ai.onnx ops, LayerNormalization-1...). The kernels defined with ONNX_OPERATOR_KERNEL_EX take their
    versions literally (If-7, which no node matches: If's are 1, 11, 13...); the table registers
    Scatter at OnnxOperatorSet13's since-version, 13, which no schema has either."""
    for (domain, op), rows in kernel_registry.kernels("1.24").items():
        if domain != "" or not onnx.defs.has(op):
            continue
        versions = {s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == ""}
        for row in rows:
            assert not row.types or row.since in versions | {1} or (op, row.since) == ("Scatter", 13), (op, row.since)


ORT_SOURCES = os.environ.get("DML_EP_ONNXRUNTIME_SOURCES")  # a git directory with onnxruntime main's history


@pytest.mark.onnxruntime_sources
def test_the_table_regenerates_from_onnxruntime_s_sources():
    """scripts/dml_kernel_table.py --check: the checked-in table is what onnxruntime's sources give."""
    if not ORT_SOURCES:
        pytest.fail("set DML_EP_ONNXRUNTIME_SOURCES to an onnxruntime git directory (see docs/dml_ep_mapping.md, 'The real EP's kernel table')")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "dml_kernel_table.py"), ORT_SOURCES, "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_table_names_its_sources():
    source = json.loads((ROOT / "dml_ep" / "realep" / "data" / "dml_kernels.json").read_text())["source"]
    assert list(source["releases"]) == ["1.17", "1.18", "1.19", "1.20", "1.21", "1.22", "1.23", "1.24"]
    assert all(len(commit) == 40 for commit in source["releases"].values())


def test_the_table_read_line_by_line_is_the_table():
    """kernel_registry reads each op's rows and formal parameters from their own lines of the JSON
    table: every row and parameter, as the whole file parses."""
    table = json.loads((ROOT / "dml_ep" / "realep" / "data" / "dml_kernels.json").read_text())
    rows, params = kernel_registry._table_lines()
    assert {key: list(map(json.loads, lines)) for key, lines in rows.items()} == {
        key: [row for row in table["kernels"] if (row["domain"], row["op"]) == key] for key in {(r["domain"], r["op"]) for r in table["kernels"]}}
    assert {name: json.loads(text) for name, text in params.items()} == table["formal_parameters"]


def test_since_versions_are_onnx_s():
    """kernel_registry.since_version reads onnx's schema versions from a file (onnx builds every
    schema at its first lookup: 20 ms of a session); at every opset it holds, it answers as onnx."""
    known = json.loads((Path(kernel_registry.__file__).parent / kernel_registry.SINCE_VERSIONS).read_text())
    assert known["max_opset"] <= onnx.defs.onnx_opset_version()
    names = {schema.name for schema in onnx.defs.get_all_schemas_with_history() if schema.domain == ""}
    assert set(known["ops"]) == names
    for name in names:
        for opset in range(1, known["max_opset"] + 1):
            try:
                expected = onnx.defs.get_schema(name, opset, "").since_version
            except onnx.defs.SchemaError:
                expected = 1
            kernel_registry.since_version.cache_clear()
            assert kernel_registry.since_version("", name, opset) == expected, (name, opset)
