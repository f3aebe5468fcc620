"""Model Explorer's node data (``--model-explorer DIR``): it names only nodes of the graph Model
Explorer's ONNX adapter makes of the model, in that graph, and Model Explorer's own package reads
it: the builder's dataclasses rebuild each file, and the ``model-explorer`` command this writes
serves the model and the files to its web app."""

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import dacite
import numpy as np
import onnx
import pytest
from model_explorer import node_data_builder
from model_explorer.extension_manager import ExtensionManager
from onnx import TensorProto, helper, numpy_helper

from dml_ep.cli import commands as cli
from dml_ep.conformance.compare import compare_model
from dml_ep.core.graph import load_model
from dml_ep.planning.planner import plan_model
from dml_ep.realep.placement import PLACEMENTS
from dml_ep.reports import model_explorer
from dml_ep.reports.node_table import plan_rows
from dml_ep.reports.report import node_label
from dml_ep.runtime.inputs import random_inputs

MODELS = Path(__file__).resolve().parents[2] / "models"
SHIPPED = sorted(MODELS.glob("*.onnx"))
IO_NODES = ("Input", "Output", "Initializer", "InitializedInput")  # the adapter's nodes for values, not the model's nodes


def adapter_graphs(path) -> dict[str, list[dict]]:
    """The graphs Model Explorer shows of the model, by id: its ONNX adapter run as its server runs
    it for the web app (the extension manager's ``convert`` command)."""
    manager = ExtensionManager([model_explorer.ADAPTER])
    manager.load_extensions()
    converted = manager.run_cmd({"extensionId": "onnx_adapter", "cmdId": "convert", "modelPath": str(path), "settings": {},
                                 "deleteAfterConversion": False})
    return {graph["id"]: graph["nodes"] for graph in converted["graphs"]}


def model_nodes(graphs: dict[str, list[dict]]) -> tuple[str, list[str]]:
    """The main graph's id (the adapter's first) and the ids of its nodes that are the model's."""
    graph_id, nodes = next(iter(graphs.items()))
    return graph_id, [node["id"] for node in nodes if node["label"] not in IO_NODES]


def read_node_data(path) -> dict[str, node_data_builder.GraphNodeData]:
    """A node data file as Model Explorer's web app takes it (JSON, which has no NaN or infinity;
    graph id -> GraphNodeData), into the builder's dataclasses (with dacite, as Model Explorer
    reads its own JSON), which must write it back the same."""
    text = Path(path).read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{path}: {name} is not JSON"))
    graphs = {graph_id: dacite.from_dict(node_data_builder.GraphNodeData, graph, config=dacite.Config(strict=True, check_types=False))
              for graph_id, graph in data.items()}
    assert json.loads(node_data_builder.ModelNodeData(graphsData=graphs).to_json_string()) == data
    for graph in graphs.values():  # values the web app shows: numbers, or text with its own colour
        assert all(isinstance(r, node_data_builder.NodeDataResult) for r in graph.results.values())
        assert all(type(r.value) in (int, float) or type(r.value) is str and r.bgColor for r in graph.results.values())
    return graphs


def expected_placements(model: onnx.ModelProto, plan) -> dict[str, str]:
    """Each node's placement from ``plan_rows``, by node label: those of the rows made from it."""
    found: dict[str, set[str]] = {}
    for row in plan_rows(plan):
        for label in row["from"]:
            found.setdefault(label, set()).add(row["placement"])
    return {label: " + ".join(p for p in PLACEMENTS if p in places) for label, places in found.items()}


def check_written(directory, path, model: onnx.ModelProto, plan, names: list[str]) -> dict[str, dict]:
    """Every file names only nodes of the adapter's main graph, in that graph; placements are those
    of plan_rows, and MACs add up to the plan's. The results, by file name."""
    graphs = adapter_graphs(path)
    graph_id, adapter_ids = model_nodes(graphs)
    assert model_explorer.model_node_ids(model) == (graph_id, adapter_ids)
    label_of = dict(zip(adapter_ids, (node_label(n) for n in model.graph.node)))
    assert sorted(os.listdir(directory)) == sorted(names)
    results = {}
    for name in names:
        graphs_data = read_node_data(Path(directory) / name)
        assert list(graphs_data) == [graph_id]
        results[name] = graphs_data[graph_id].results
        assert set(results[name]) <= set(adapter_ids), name
    expected = expected_placements(model, plan)
    assert {label_of[i]: r.value for i, r in results["placement.json"].items()} == expected
    assert set(results["macs.json"]) == set(results["placement.json"])
    rows = plan_rows(plan)
    assert sum(r.value for r in results["macs.json"].values()) == sum(row["macs"] for row in rows if row["from"])
    return results


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_inspect_node_data_of_each_shipped_model(tmp_path, path):
    model = load_model(path)
    plan = plan_model(model)
    names = model_explorer.write(str(tmp_path / "me"), model, plan)
    assert names == ["placement.json", "macs.json"]
    check_written(tmp_path / "me", path, model, plan, names)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_compare_node_data_of_each_shipped_model(tmp_path, path):
    """Against ort-exact: plain "ort" saturates u8s8 pairs on AVX2 hosts without VNNI."""
    model = load_model(path)
    report = compare_model(model, random_inputs(model, 0), reference="ort-exact", per_node=True)
    names = model_explorer.write(str(tmp_path / "me"), model, report.dml_plan, [report])
    results = check_written(tmp_path / "me", path, model, report.dml_plan, names)
    differences = [name for name in names if name.startswith("diff-")]
    assert differences and all(name[:-len(".json")].rsplit("-", 1)[1] in ("lsb", "abs") for name in differences)
    for name in differences:  # dml_ep matches onnxruntime on the shipped models: exact, or float rounding within tolerance
        assert all(r.bgColor in (model_explorer.EXACT, model_explorer.WITHIN) for r in results[name].values()), name
    assert set(results["diff-propagated-lsb.json"]) <= set(results["placement.json"])


def test_a_fused_group_shares_its_entry(tmp_path):
    """small_cnn.qdq.onnx: the DequantizeLinear, Conv and QuantizeLinear onnxruntime fuses into one
    QLinearConv all show it; its MACs are the Conv's alone."""
    path = MODELS / "small_cnn.qdq.onnx"
    model = load_model(path)
    plan = plan_model(model)
    results = check_written(tmp_path / "me", path, model, plan, model_explorer.write(str(tmp_path / "me"), model, plan))
    stem = next(row for row in plan_rows(plan) if row["node"] == "stem")
    group = [n for n in model.graph.node if node_label(n) in stem["from"]]
    assert {n.op_type for n in group} >= {"DequantizeLinear", "Conv", "QuantizeLinear"}
    assert {n.name: results["macs.json"][n.name].value for n in group} == {n.name: stem["macs"] if n.op_type == "Conv" else 0 for n in group}
    assert {results["placement.json"][n.name].value for n in group} == {"modelled"}


def named_and_unnamed_model(path, second_name: str = "twice") -> onnx.ModelProto:
    """A graph with no name and an unnamed node: a QLinearAdd (modelled), a com.microsoft QLinearMul
    named "twice" (no DML kernel: the CPU), a second QLinearAdd named ``second_name`` (onnxruntime
    refuses a name used twice, Model Explorer shows it), and a float Sin after a DequantizeLinear
    (on DirectML in the real EP, not modelled)."""
    scale_zp = ["s", "z"]
    nodes = [
        helper.make_node("QLinearAdd", ["a", *scale_zp, "b", *scale_zp, *scale_zp], ["t"], domain="com.microsoft"),
        helper.make_node("QLinearMul", ["t", *scale_zp, "b", *scale_zp, *scale_zp], ["u"], name="twice", domain="com.microsoft"),
        helper.make_node("QLinearAdd", ["u", *scale_zp, "a", *scale_zp, *scale_zp], ["v"], name=second_name, domain="com.microsoft"),
        helper.make_node("DequantizeLinear", ["v", *scale_zp], ["f"], name="dq"),
        helper.make_node("Sin", ["f"], ["y"], name="sin"),
    ]
    graph = helper.make_graph(
        nodes, "", [helper.make_tensor_value_info(name, TensorProto.UINT8, [1, 8]) for name in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, path)
    return model


def test_ids_of_unnamed_and_repeated_nodes_are_the_adapters(tmp_path):
    model = named_and_unnamed_model(tmp_path / "names.onnx")
    graph_id, ids = model_explorer.model_node_ids(model)
    assert (graph_id, ids) == model_nodes(adapter_graphs(tmp_path / "names.onnx"))
    assert ids[:3] == ["node", "twice", "twice_1"]


def test_inspect_placements_of_a_model_with_fallbacks(capsys, tmp_path):
    """The node that falls back to the CPU, and the one the real EP runs on DirectML unmodelled,
    show where ``inspect`` says they run."""
    path = tmp_path / "names.onnx"
    model = named_and_unnamed_model(path, second_name="again")
    status = cli.main(["inspect", str(path), "--json", str(tmp_path / "plan.json"), "--model-explorer", str(tmp_path / "me")])
    capsys.readouterr()
    assert status == 0
    rows = json.loads((tmp_path / "plan.json").read_text())["nodes"]
    results = read_node_data(tmp_path / "me" / "placement.json")[""].results
    _, ids = model_explorer.model_node_ids(model)
    said = {label: row["placement"] for row in rows for label in row["from"]}
    assert {i: results[i].value for i in ids} == {i: said[node_label(n)] for i, n in zip(ids, model.graph.node)}
    assert [results[i].value for i in ids] == ["modelled", "cpu", "modelled", "modelled", "real-ep-dml"]
    assert [results[i].bgColor for i in ids] == [model_explorer.PLACEMENT_COLOURS[results[i].value] for i in ids]


@pytest.mark.host_sensitive
def test_compare_shows_the_node_that_differs_and_what_it_spreads_to(capsys, tmp_path, break_dml_node):
    """Against ort-exact, so that the broken node is the only difference on every host."""
    break_dml_node("fc1.matmul_quant")
    status = cli.main(["compare", str(MODELS / "mlp.onnx"), "--reference", "ort-exact", "--model-explorer", str(tmp_path / "me")])
    out = capsys.readouterr().out
    assert status == 1
    isolated = read_node_data(tmp_path / "me" / "diff-isolated-lsb.json")["mlp"].results
    propagated = read_node_data(tmp_path / "me" / "diff-propagated-lsb.json")["mlp"].results
    assert (isolated["fc1.matmul_quant"].value, isolated["fc1.matmul_quant"].bgColor) == (1, model_explorer.OUT)
    assert all((r.value, r.bgColor) == (0, model_explorer.EXACT) for name, r in isolated.items() if name != "fc1.matmul_quant")
    assert propagated["input_QuantizeLinear"].value == 0 and propagated["fc1.matmul_quant"].value >= 1
    assert f"--node_data_paths={tmp_path / 'me' / 'placement.json'}," in out


@pytest.mark.host_sensitive
def test_a_node_shows_its_largest_difference_over_all_comparisons(break_dml_node):
    """compare over several data sets (or Polygraphy iterations) shows the worst of them (against
    ort-exact, so that the broken node is the only difference on every host)."""
    model = load_model(MODELS / "mlp.onnx")
    exact = compare_model(model, random_inputs(model, 0), reference="ort-exact", per_node=True)
    break_dml_node("fc1.matmul_quant")
    off = compare_model(model, random_inputs(model, 1), reference="ort-exact", per_node=True)
    index = [n.name for n in model.graph.node].index("fc1.matmul_quant")
    for reports, expected in [([exact], model_explorer.Difference(0, True)), ([exact, off], model_explorer.Difference(1, False)),
                              ([off, exact], model_explorer.Difference(1, False))]:
        assert model_explorer.collect(model, exact.dml_plan, reports)[index].differences["isolated", "LSB"] == expected


def test_nan_is_the_worst_difference_and_non_finite_ones_are_text():
    """A node's largest difference is the worst of its comparisons; NaN (a value only one side has)
    is the worst of all, and is written as text, JSON having none."""
    worst = model_explorer.Difference(1.0, True).worse(model_explorer.Difference(float("nan"), False))
    assert np.isnan(worst.largest) and not worst.within_tolerance
    assert model_explorer.Difference(3.0, True).worse(model_explorer.Difference(2.0, True)) == model_explorer.Difference(3.0, True)
    result = model_explorer.difference_result(node_data_builder, model_explorer.Difference(float("inf"), False))
    assert (result.value, result.bgColor) == ("inf", model_explorer.OUT)
    result = model_explorer.difference_result(node_data_builder, model_explorer.Difference(2.5e-7, True))
    assert (result.value, result.bgColor) == (2.5e-7, model_explorer.WITHIN)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.host_sensitive
def test_the_printed_command_serves_the_model_and_its_node_data(capsys, tmp_path):
    """The command ``compare`` prints starts Model Explorer (here without a browser, on a free
    port): its server converts the model with the ONNX adapter and hands the web app each node data
    file, whose node ids are in the graph it converted."""
    status = cli.main(["compare", str(MODELS / "transformer_block.onnx"), "--reference", "ort-exact", "--model-explorer", str(tmp_path / "me")])
    out = capsys.readouterr().out
    assert status == 0
    command = shlex.split(out.strip().splitlines()[-1])
    assert command[0] == "model-explorer"
    port = free_port()
    executable = os.path.join(os.path.dirname(sys.executable), "model-explorer")  # the console script of this environment
    server = subprocess.Popen([executable, *command[1:], "--no_open_in_browser", "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    printed: list[str] = []
    threading.Thread(target=lambda: printed.extend(server.stdout), daemon=True).start()
    base = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + 120
        while not any("?data=" in line for line in printed):
            assert server.poll() is None and time.monotonic() < deadline, "".join(printed)
            time.sleep(0.2)
        assert urllib.request.urlopen(f"{base}/check_health").read() == b"model_explorer_ok"
        url = next(line.strip() for line in printed if "?data=" in line)
        data = json.loads(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["data"][0])  # what the web app opens
        request = urllib.request.Request(f"{base}/apipost/v1/send_command", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"extensionId": "onnx_adapter", "cmdId": "convert", "settings": {},
                                                          "modelPath": data["models"][0]["url"], "deleteAfterConversion": False}).encode())
        graphs = {g["id"]: {n["id"] for n in g["nodes"]} for g in json.load(urllib.request.urlopen(request))["graphs"]}
        # isolated abs: its float LayerNormalizations, on DirectML now, are compared in isolation too
        assert data["nodeData"] == [str(tmp_path / "me" / name) for name in
                                    ["placement.json", "macs.json", "diff-isolated-lsb.json", "diff-isolated-abs.json",
                                     "diff-propagated-lsb.json", "diff-propagated-abs.json"]]
        for path in data["nodeData"]:
            served = json.load(urllib.request.urlopen(f"{base}/api/v1/read_text_file?path={urllib.parse.quote(path)}"))
            content = json.loads(served["content"])
            assert list(content) == ["transformer_block"] and set(content["transformer_block"]["results"]) <= graphs["transformer_block"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_errors_are_one_line_before_any_work(capsys, tmp_path, monkeypatch):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    cases = [
        (["inspect", MODELS / "mlp.onnx", "--model-explorer", taken], "is a directory that is not empty"),
        (["compare", MODELS / "mlp.onnx", MODELS / "small_cnn.onnx", "--model-explorer", tmp_path / "me"], "shows one model"),
        (["compare", MODELS / "mlp.onnx", "--candidate", "ort", "--model-explorer", tmp_path / "me"], "drop --candidate ort"),
        (["inspect", MODELS / "mlp.onnx", "--model-explorer", tmp_path / "no" / "me"], "no such directory"),
    ]
    for argv, message in cases:
        status = cli.main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert status == 2 and err.startswith("dml-ep: error: ") and err.count("\n") == 1 and message in err, err
    assert os.listdir(taken) == ["notes.txt"] and not (tmp_path / "me").exists()
    monkeypatch.setitem(sys.modules, "model_explorer.node_data_builder", None)  # as if the extra were not installed
    status = cli.main(["inspect", str(MODELS / "mlp.onnx"), "--model-explorer", str(tmp_path / "me")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "pip install 'dml_ep[model-explorer]'" in err
    assert not (tmp_path / "me").exists()
