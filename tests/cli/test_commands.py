"""The dml-ep command: inspect, run and compare, their inputs, outputs, errors and exit statuses."""

import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.cli.arguments import EXAMPLES
from dml_ep.cli.commands import main
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.ort.reference import cpu_session
from dml_ep.reports.text import Progress
from dml_ep.runtime.executor import Executor
from dml_ep.runtime.inputs import load_directory, random_inputs
from onnx_builders import qlinear_matmul

MODELS = Path(__file__).resolve().parents[2] / "models"
SHIPPED = ["small_cnn", "mlp", "transformer_block", "transformer_block.dynamic"]
DML_EP = [sys.executable, "-m", "dml_ep"]  # the CLI as it runs on any OS


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def inspect_rows(capsys, tmp_path, *options):
    status, _, _ = run_cli(capsys, "inspect", MODELS / "small_cnn.onnx", "--json", tmp_path / "plan.json", *options)
    assert status == 0
    return json.loads((tmp_path / "plan.json").read_text())


def test_inspect_maps_qlinear_conv_and_add(capsys, tmp_path):
    plan = inspect_rows(capsys, tmp_path)
    ops = {r["op_type"]: set() for r in plan["nodes"]}
    for r in plan["nodes"]:
        ops[r["op_type"]].add(r["runs_on"])
    assert ops["QLinearConv"] == {"DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION"}
    assert ops["QLinearAdd"] == {"DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD"}
    status, out, _ = run_cli(capsys, "inspect", MODELS / "small_cnn.onnx", "--nodes")
    assert status == 0 and out.count("DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION") == 1 + 7  # the summary's row, then each node's


def test_inspect_shows_descs(capsys, tmp_path):
    """The stem conv of small_cnn: 16 filters of 3x3x3 int8 (432 bytes), per-channel scales {1,16,1,1},
    symmetric weights (all zero points 0: a broadcast scalar, strides 0, 4 bytes), pads of 1."""
    status, out, _ = run_cli(capsys, "inspect", MODELS / "small_cnn.onnx", "--descs")
    stem = out.split("\nstem_quant: DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION\n", 1)[1].split("\n\n", 1)[0]
    fields = dict(line.split(None, 1) for line in stem.splitlines())
    assert fields["FilterTensor"] == "INT8 {16,3,3,3}, 432 bytes, OWNED_BY_DML"
    assert fields["FilterScaleTensor"] == "FLOAT32 {1,16,1,1}, 64 bytes"
    assert fields["FilterZeroPointTensor"] == "INT8 {1,16,1,1} strides {0,0,0,0}, 4 bytes"
    assert fields["StartPadding"] == fields["EndPadding"] == "[1, 1]"
    assert list(fields)[:3] == ["InputTensor", "InputScaleTensor", "InputZeroPointTensor"]
    plan = inspect_rows(capsys, tmp_path)
    conv = next(r for r in plan["nodes"] if r["node"] == "stem_quant")
    assert conv["desc"]["Desc"]["FilterTensor"]["TotalTensorSizeInBytes"] == 432
    assert not [r for r in plan["nodes"] if "reason" in r]  # every node of small_cnn runs on DirectML


def test_inspect_at_feature_level_2_1_falls_back_for_qlinear_add(capsys, tmp_path):
    plan = inspect_rows(capsys, tmp_path, "--feature-level", "2_1")
    adds = [r for r in plan["nodes"] if r["op_type"] == "QLinearAdd"]
    assert len(adds) == 3
    assert all(r["runs_on"].startswith("fallback") and "DML_FEATURE_LEVEL_4_0" in r["runs_on"] for r in adds)


def test_inspect_counts_macs(capsys, tmp_path):
    status, out, _ = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", tmp_path / "plan.json")
    summary = json.loads((tmp_path / "plan.json").read_text())["summary"]
    # batch 1: matmuls 64x128, 128x128, 128x10; bias adds of 128 and 128 elements, one MAC each.
    # and its QuantizeLinear / DequantizeLinear at the ends, no MACs
    assert summary["dml"] == {"nodes": 7, "operators": 7, "macs": 64 * 128 + 128 * 128 + 128 * 10 + 128 + 128, "macs_percent": 100.0}
    assert summary["fallback"] == {"nodes": 0, "macs": 0}
    assert "26,112 on DirectML" in out


def test_inspect_macs_move_with_nodes_between_feature_levels(capsys, tmp_path):
    low = inspect_rows(capsys, tmp_path, "--feature-level", "2_1")["summary"]
    high = inspect_rows(capsys, tmp_path, "--feature-level", "6_4")["summary"]
    assert low["fallback"]["macs"] > 0 and high["fallback"]["macs"] == 0  # the QLinearAdds moved
    assert low["dml"]["macs"] + low["fallback"]["macs"] == high["dml"]["macs"] + high["fallback"]["macs"]


def test_inspect_checks_the_json_path_first(capsys, tmp_path):
    target = tmp_path / "missing" / "plan.json"
    status, out, err = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", target)
    assert status == 2 and out == ""
    assert err == f"dml-ep: error: cannot write {target}: no such directory {target.parent}\n"


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("options", [["--reference", "ort-exact"], ["--arithmetic", "onnxruntime", "--reference", "ort"]])
def test_compare_shipped_models_exit_0(capsys, name, options):
    status, out, _ = run_cli(capsys, "compare", MODELS / f"{name}.onnx", *options)
    assert status == 0, out
    assert "result: OK" in out
    # DirectML's MatMulIntegerToFloat rounds its float output once, onnxruntime three times, and its MVN2 (LayerNormalization)
    # is the formula rounded once, onnxruntime's a float32 loop: within tolerance, not bit for bit, in the directml arithmetic
    if not (name.startswith("transformer_block") and "--arithmetic" not in options):
        assert "100%" in out


@pytest.mark.host_sensitive
def test_compare_as_installed_command_with_glob_and_summary():
    result = subprocess.run([*DML_EP, "compare", str(MODELS / "*.onnx"), "--reference", "ort-exact"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shipped = len(list(MODELS.glob("*.onnx")))
    assert "summary:" in result.stdout and result.stdout.count(" ok") == shipped
    assert f"[{shipped}/{shipped}]" in result.stderr


@pytest.mark.host_sensitive
def test_compare_per_node_names_the_broken_node(capsys, tmp_path, monkeypatch):
    original = Executor.run_dml

    def off_by_one(self, entry, values):
        result = original(self, entry, values)
        return result ^ np.uint8(1) if entry.node.name == "block2.pw_quant" else result

    monkeypatch.setattr(Executor, "run_dml", off_by_one)
    status, out, _ = run_cli(capsys, "compare", MODELS / "small_cnn.onnx", "--per-node", "--reference", "ort-exact", "--json", tmp_path / "r.json")
    assert status == 1
    assert "first node differing in isolation: block2.pw_quant (QLinearConv)" in out
    report = json.loads((tmp_path / "r.json").read_text())["models"][0]
    assert not report["ok"] and report["first_divergent"]["node"] == "block2.pw_quant"
    assert report["first_divergent"]["cause"] == "other"
    assert report["first_divergent"]["desc"]["Type"] == "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION"
    assert report["cause_counts"] == {"other": 1}


@pytest.mark.host_sensitive
def test_run_writes_outputs_equal_to_onnxruntime(capsys, tmp_path):
    status, out, _ = run_cli(capsys, "run", MODELS / "small_cnn.onnx", "--seed", 3, "--output-dir", tmp_path / "out")
    assert status == 0 and "output" in out and "[1, 10]" in out and "float32" in out
    model = onnx.load(MODELS / "small_cnn.onnx")
    expected = cpu_session(model, "ort-exact").run(None, random_inputs(model, seed=3))[0]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output.npy"), expected)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["output.npy"]


def two_output_model(path):
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y1"]), onnx.helper.make_node("Identity", ["x"], ["y2"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("y1", "y2")],
    )
    onnx.save(onnx.helper.make_model(graph), path)


@pytest.mark.parametrize("failing", ["save", "replace"])
def test_run_writes_all_outputs_or_none(capsys, tmp_path, monkeypatch, failing):
    """The second of two outputs fails while being written, or while being renamed into place."""
    two_output_model(tmp_path / "m.onnx")
    module, name = (np, "save") if failing == "save" else (os, "replace")
    original, calls = getattr(module, name), []

    def second_fails(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, second_fails)
    status, _, err = run_cli(capsys, "run", tmp_path / "m.onnx", "--output-dir", tmp_path / "out")
    assert status == 2 and "No space left on device" in err and str(tmp_path / "out" / "y2.npy") in err
    assert list((tmp_path / "out").iterdir()) == []
    monkeypatch.undo()
    assert run_cli(capsys, "run", tmp_path / "m.onnx", "--output-dir", tmp_path / "out")[0] == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["y1.npy", "y2.npy"]


def test_run_checks_the_output_dir_first(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    status, out, err = run_cli(capsys, "run", MODELS / "mlp.onnx", "--output-dir", tmp_path / "file" / "out")
    assert status == 2 and out == ""
    assert f"cannot write {tmp_path / 'file' / 'out'}: {tmp_path / 'file'} is not a directory" in err


def test_run_failure_writes_nothing(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float64))
    status, _, err = run_cli(capsys, "run", MODELS / "small_cnn.onnx", "--input", f"input={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert status == 2 and "element type float64" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", "missing.onnx"], "missing.onnx: no such file"),
        (["inspect", str(MODELS / "mlp.onnx"), "--feature-level", "9_9"], "unknown DirectML feature level"),
        (["compare", str(MODELS / "mlp.onnx"), "--input", "nope=x.npy"], "no model input named 'nope'"),
        (["compare", str(MODELS / "mlp.onnx"), "--input", "input=missing.npy"], "missing.npy: no such file"),
        (["compare", str(MODELS / "mlp.onnx"), "--reference", "gpu"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_errors_exit_2_with_one_line(argv, message):
    result = subprocess.run([*DML_EP, *argv], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("dml-ep: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.host_sensitive
def test_input_dir_of_npy_files(capsys, tmp_path):
    np.save(tmp_path / "input.npy", np.full((1, 64), 0.5, np.float32))
    assert load_directory(str(tmp_path), ["input"])[0]["input"][0, 0] == np.float32(0.5)
    status, _, _ = run_cli(capsys, "compare", MODELS / "mlp.onnx", "--input-dir", tmp_path, "--reference", "ort-exact")
    assert status == 0
    np.save(tmp_path / "typo.npy", np.zeros(1, np.float32))
    status, _, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", "--input-dir", tmp_path)
    assert status == 2 and "no model input named 'typo'" in err


def test_input_dir_of_tensor_protos_by_name_and_position(tmp_path):
    first, second = np.arange(4, dtype=np.uint8), np.ones(2, np.float32)
    named, unnamed = tmp_path / "named", tmp_path / "unnamed"
    for directory, names in ((named, ("b", "a")), (unnamed, ("", ""))):
        directory.mkdir()
        for index, (array, name) in enumerate(zip((first, second), names)):
            (directory / f"input_{index}.pb").write_bytes(numpy_helper.from_array(array, name).SerializeToString())
        (directory / "output_0.pb").write_bytes(numpy_helper.from_array(second, "y").SerializeToString())
    feeds, files = load_directory(str(named), ["a", "b"])
    assert files == {"b": str(named / "input_0.pb"), "a": str(named / "input_1.pb")}
    np.testing.assert_array_equal(feeds["b"], first)
    np.testing.assert_array_equal(feeds["a"], second)
    feeds = load_directory(str(unnamed), ["a", "b"])[0]
    np.testing.assert_array_equal(feeds["a"], first)
    np.testing.assert_array_equal(feeds["b"], second)


def test_random_inputs_span_each_integer_range():
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["q"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("q", onnx.TensorProto.INT8, ["batch", 4096])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT8, ["batch", 4096])],
    ))
    q = random_inputs(model, seed=1)["q"]
    assert q.shape == (1, 4096) and q.dtype == np.int8 and (q.min(), q.max()) == (-128, 127)
    np.testing.assert_array_equal(q, random_inputs(model, seed=1)["q"])


@pytest.mark.host_sensitive
def test_compare_goes_on_after_a_model_that_fails(capsys):
    status, out, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", "missing.onnx", "--reference", "ort-exact")
    assert status == 2
    assert "missing.onnx: no such file" in err and "[2/2]" in err
    summary = out.split("summary:")[1]
    assert "mlp.onnx" in summary and " ok" in summary and "error: missing.onnx: no such file" in summary


def saturating_matmul(tmp_path):
    """tests/numerics/test_u8s8.py's hand-computed case: K = 2, a = 255, b = 127; exact 200, saturated 101."""
    scale = np.float32(200 / 64770)
    model, feeds = qlinear_matmul(np.full((1, 2), 255, np.uint8), np.float32(1), np.uint8(0), np.full((2, 1), 127, np.int8),
                                  np.float32(1), np.int8(0), np.float32(1 / scale), np.uint8(0))
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "a.npy", feeds["in0"])
    return [tmp_path / "m.onnx", "--input", f"in0={tmp_path / 'a.npy'}", "--arithmetic", "onnxruntime"]


@pytest.mark.host_sensitive
@pytest.mark.parametrize(
    "switch, run_saturates, compare_saturates",
    # auto: `run` follows this CPU; `compare` follows its reference, and ort-exact never saturates.
    [("on", True, True), ("off", False, False), ("auto", host_saturates_u8s8(), False)],
)
def test_u8s8_saturation_switch(capsys, tmp_path, switch, run_saturates, compare_saturates):
    model = saturating_matmul(tmp_path)
    status, out, _ = run_cli(capsys, "run", *model, "--u8s8-saturation", switch, "--output-dir", tmp_path / "out")
    assert status == 0 and np.load(tmp_path / "out" / "y.npy").item() == (101 if run_saturates else 200)
    status, out, _ = run_cli(capsys, "compare", *model, "--u8s8-saturation", switch, "--reference", "ort-exact")
    assert status == (1 if compare_saturates else 0), out
    assert ("causes (nodes differing in isolation): u8s8 saturation 1" in out) == compare_saturates


@pytest.mark.host_sensitive
def test_compare_progress(capsys, monkeypatch):
    monkeypatch.setattr(Progress, "INTERVAL", 0.0)
    status, _, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", "--per-node", "--reference", "ort-exact")
    assert status == 0
    prefix = f"{MODELS / 'mlp.onnx'}: "
    assert err.startswith(f"{prefix}loading...\n{prefix}running dml_ep...\n{prefix}running onnxruntime...\n")
    assert f"{prefix}comparing node 1/" in err and "\r" not in err
    assert run_cli(capsys, "compare", MODELS / "mlp.onnx", "--per-node", "--reference", "ort-exact", "--quiet")[2] == ""


def test_progress_on_a_terminal_draws_a_bar_with_the_time_left_and_erases_it(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    progress = Progress("m.onnx")
    progress("running dml_ep")
    progress("comparing node", 2, 9)
    progress("comparing node", 5, 9)
    progress.clear()
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", sys.stderr.getvalue())
    assert "m.onnx: comparing node" in drawn and "5/9" in drawn and "0:00:0" in drawn  # rich's time left
    assert sys.stderr.getvalue().endswith("\x1b[2K")  # erased, for the report to take its place


def test_progress_in_a_log_says_the_time_left(capsys, monkeypatch):
    monkeypatch.setattr(Progress, "INTERVAL", 0.0)
    progress = Progress("m.onnx")
    progress("comparing node", 0, 9)
    progress.stage_started -= 10  # 10 s for the first 5 nodes
    progress("comparing node", 5, 9)
    assert capsys.readouterr().err.splitlines()[-1] == "m.onnx: comparing node 5/9, about 8 s left..."


@pytest.mark.host_sensitive
@pytest.mark.parametrize("command", [["inspect"], ["inspect", "--input-dir", "{data}"], ["run"], ["compare", "--reference", "ort-exact"],
                                     ["export", "--dxdispatch", "{out}"]], ids=lambda c: " ".join(c[:2]))
def test_a_command_loads_and_checks_the_model_once(command, monkeypatch, capsys, tmp_path):
    """cli, compare, the export and the session share one loaded model (graph.Loaded): a large
    model is read, decoded and checked once per command."""
    from dml_ep.core import graph

    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "input.npy", random_inputs(onnx.load(MODELS / "mlp.onnx"), 0)["input"])
    checked = []
    original = graph.check_model
    monkeypatch.setattr(graph, "check_model", lambda proto: checked.append(proto.graph.name) or original(proto))
    argv = [part.format(data=data, out=tmp_path / "dx") for part in command]
    assert main([argv[0], str(MODELS / "mlp.onnx"), *argv[1:]]) == 0
    assert len(checked) == 1


@pytest.mark.host_sensitive
def test_control_characters_in_names_are_escaped_in_the_terminal(capsys, tmp_path):
    """A node or output named with an escape sequence, a carriage return or a newline would rewrite
    what the terminal shows (a fake "result: OK" line): printed escaped."""
    hostile = "y\x1b[31m\r  result: OK\n\x07"
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], [hostile], name=hostile)], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                                   [onnx.helper.make_tensor_value_info(hostile, onnx.TensorProto.FLOAT, [2])])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    for argv in (["inspect", "--nodes"], ["run"], ["compare", "--per-node"]):
        status, out, err = run_cli(capsys, argv[0], tmp_path / "m.onnx", *argv[1:])
        assert status == 0, err
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", out) and "\\x1b[31m\\x0d  result: OK\\x0a\\x07" in out, out


@pytest.mark.host_sensitive  # CI also runs it under an emulated Haswell, whose onnxruntime saturates
def test_a_mismatch_from_this_hosts_onnxruntime_says_what_to_try(capsys, tmp_path):
    """DirectML's exact product against this host's onnxruntime: a mismatch only where onnxruntime
    saturates, then the result names it and suggests the two ways out, each of which passes."""
    model = saturating_matmul(tmp_path)[:3]  # dml_ep in DirectML's arithmetic
    saturates = host_saturates_u8s8()
    status, out, _ = run_cli(capsys, "compare", *model)
    assert status == (1 if saturates else 0), out
    assert ("hint: the first cause is this host's onnxruntime" in out) == saturates, out
    for way_out in (["--reference", "ort-exact"], ["--arithmetic", "onnxruntime"]):
        assert run_cli(capsys, "compare", *model, *way_out)[0] == 0


@pytest.mark.host_sensitive
def test_the_hint_follows_the_first_cause_and_the_reference(tmp_path):
    """On any host: dml_ep made to saturate against exact products has u8s8 saturation as first
    cause; the hint is given only when the reference is the host's onnxruntime ("ort")."""
    from dml_ep.conformance.compare import compare_model
    from dml_ep.reports.text import format_report

    model = saturating_matmul(tmp_path)
    report = compare_model(str(model[0]), {"in0": np.load(tmp_path / "a.npy")}, reference="ort-exact", arithmetic="onnxruntime",
                           u8s8_saturation=True)
    assert report.cause_counts == {"u8s8 saturation": 1}
    assert "hint:" not in format_report(report, per_node=False)
    report.reference = "ort"
    assert "--reference ort-exact compares with exact products" in format_report(report, per_node=False)


@pytest.mark.host_sensitive
def test_a_model_with_nothing_quantized_gets_a_note(capsys, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "float", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "float.onnx")
    status, out, _ = run_cli(capsys, "compare", tmp_path / "float.onnx", "--reference", "ort-exact")
    assert status == 0 and "note: the model has no quantized node" in out
    assert "note:" not in run_cli(capsys, "compare", MODELS / "small_cnn.qdq.onnx", "--reference", "ort-exact")[1]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("command", list(EXAMPLES))
def test_the_examples_in_help_run(command, capsys, tmp_path, monkeypatch):
    """Each command's --help ends with its examples, and each runs, in order, on a shipped model."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert capsys.readouterr().out.rstrip().endswith(EXAMPLES[command].splitlines()[-1].strip())
    monkeypatch.chdir(tmp_path)
    if command == "report":  # of a sweep's database, ort-exact: all ok on every host
        assert main(["sweep", str(MODELS / "mlp.onnx"), "--sequential", "--quiet", "--reference", "ort-exact", "--db", "sweep.db"]) == 0
    for line in EXAMPLES[command].splitlines()[1:]:
        argv = [str(MODELS / "mlp.onnx") if word == "model.onnx" else word for word in shlex.split(re.split(r"\s{3,}", line.strip())[0])]
        assert argv[0] == "dml-ep"
        status, out, err = run_cli(capsys, *argv[1:])
        if command == "sweep":  # the default reference, onnxruntime as deployed: where its uint8 x int8 pairs saturate,
            # mlp's directml task mismatches (1); a plan compares nothing
            assert status == (1 if host_saturates_u8s8() and "--plan-only" not in argv else 0), line + out + err
        else:
            assert status in ((0, 1) if command == "compare" else (0,)), line + out + err


def test_inspect_progress(capsys, monkeypatch):
    monkeypatch.setattr(Progress, "INTERVAL", 0.0)
    status, _, err = run_cli(capsys, "inspect", MODELS / "mlp.onnx")
    prefix = f"{MODELS / 'mlp.onnx'}: "
    assert status == 0 and err == f"{prefix}loading...\n{prefix}applying onnxruntime's rewrites...\n{prefix}planning...\n"
    assert run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--quiet")[2] == ""
