"""Hostile input on inspect, run, compare and export (sweep's is tests/test_sweep*.py): files that
would run code, names that would end a page's script or a file system's name, outputs that would
replace each other or an input, repeated options, and bad input that must read as bad input (exit
2, one line), never as dml_ep's crash (3), before any work and with nothing left behind."""

import argparse
import base64
import errno
import io
import json
import os
import pickle
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.cli import commands as cli
from dml_ep.interop.polygraphy_json import inputs_json, run_results_json
from cli_runs import POSIX, one_line_error, run_cli, unary_model

MODELS = Path(__file__).resolve().parents[2] / "models"
MLP = MODELS / "mlp.onnx"


# --- files that would run code ----------------------------------------------------------------


class _Touch:
    """Unpickled, it creates ``path``: the proof that loading a file ran code."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _pickled_payloads(marker: Path) -> dict[str, bytes]:
    """What Polygraphy's JSON may carry in an ndarray's base64, each unpickling to a file at ``marker``."""
    objects = io.BytesIO()
    np.save(objects, np.array([_Touch(marker)], dtype=object), allow_pickle=True)
    archive = io.BytesIO()
    np.savez(archive, x=np.array([_Touch(marker)], dtype=object))
    return {"npy-object-array": objects.getvalue(), "npz": archive.getvalue(), "bare-pickle": pickle.dumps(_Touch(marker))}


def _hostile(array_bytes: bytes) -> dict:
    return {"array": base64.b64encode(array_bytes).decode(), "polygraphy_class": "ndarray"}


@pytest.mark.parametrize("payload", ["npy-object-array", "npz", "bare-pickle"])
@pytest.mark.parametrize("command, option", [("run", "--load-inputs"), ("compare", "--load-inputs"),
                                             ("run", "--load-outputs"), ("compare", "--load-outputs")])
def test_polygraphy_json_never_unpickles(capsys, tmp_path, command, option, payload):
    """Polygraphy's JSON holds np.save's bytes, which may be a pickle (an object array, an .npz, or
    Polygraphy's own pickled classes): loading one would run any code. Refused, in one line."""
    marker = tmp_path / "ran"
    hostile = _hostile(_pickled_payloads(marker)[payload])
    feeds = tmp_path / "in.json"
    if option == "--load-inputs":
        feeds.write_text(json.dumps([{"input": hostile}]))
        argv = [option, feeds]
    else:
        feeds.write_text(inputs_json([{"input": np.zeros((1, 64), np.float32)}]))
        outputs = json.loads(run_results_json({"onnxrt-runner-N0": [{"output": np.zeros((1, 10), np.float32)}]}))
        outputs["lst"][0][1][0]["outputs"]["output"]["values"] = hostile
        (tmp_path / "out.json").write_text(json.dumps(outputs))
        argv = ["--load-inputs", feeds, option, tmp_path / "out.json"]
    status, _, err = run_cli(capsys, command, MLP, *argv)
    assert status == 2 and one_line_error(err), err
    assert not marker.exists()


@pytest.mark.parametrize("how", ["--input", "--input-dir"])
def test_npy_inputs_never_unpickle(capsys, tmp_path, how):
    """The same bytes as an .npy input file."""
    marker = tmp_path / "ran"
    folder = tmp_path / "inputs"
    folder.mkdir()
    (folder / "input.npy").write_bytes(_pickled_payloads(marker)["npy-object-array"])
    argv = ["--input", f"input={folder / 'input.npy'}"] if how == "--input" else ["--input-dir", folder]
    status, _, err = run_cli(capsys, "run", MLP, *argv)
    assert status == 2 and one_line_error(err), err
    assert not marker.exists()


# --- names that would end a page's script -----------------------------------------------------

SCRIPT = "</script><script>document.title='ran'</script><!--<script>"


@pytest.mark.host_sensitive  # compare runs the host's onnxruntime
def test_compare_page_escapes_what_the_model_names(capsys, tmp_path):
    """compare --html, with a node and a graph output named like markup: their text never ends the
    page's data block (inspect's page, in a browser: tests/reports/test_html.py's
    test_the_page_fetches_nothing_and_escapes_what_the_model_names)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], [SCRIPT], name=SCRIPT)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(SCRIPT, TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    status, _, err = run_cli(capsys, "compare", tmp_path / "m.onnx", "--quiet", "--html", tmp_path / "r.html")
    assert status == 0, err
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert SCRIPT not in text and "<!--<script>" not in text
    assert text.count("</script>") == text.count("<script")


# --- bad input is exit 2, in one line ----------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "compare"])
def test_input_data_without_iterations_is_an_input_error(capsys, tmp_path, command):
    """Polygraphy's input data ``[]``: no feed dict, so no run (run crashed with an IndexError)."""
    (tmp_path / "e.json").write_text("[]")
    status, _, err = run_cli(capsys, command, MLP, "--load-inputs", tmp_path / "e.json")
    assert status == 2 and one_line_error(err), err
    assert "no iterations" in err


@pytest.mark.parametrize("command", ["run", "compare"])
def test_run_results_without_runners_are_an_input_error(capsys, tmp_path, command):
    """RunResults of no runner: said so, not "name one" of none."""
    (tmp_path / "in.json").write_text(inputs_json([{"input": np.zeros((1, 64), np.float32)}]))
    (tmp_path / "out.json").write_text(run_results_json({}))
    status, _, err = run_cli(capsys, command, MLP, "--load-inputs", tmp_path / "in.json", "--load-outputs", tmp_path / "out.json")
    assert status == 2 and one_line_error(err), err
    assert "holds no runner's outputs" in err and "name one" not in err


def _without_data_model(path: Path, where: str) -> Path:
    """x + c, c a [2, 3] float tensor with dims and no data: an initializer, a Constant, or a
    Constant in an If branch."""
    empty = onnx.TensorProto(name="c", data_type=TensorProto.FLOAT, dims=[2, 3])
    value = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    add = helper.make_node("Add", ["x", "c"], ["y"])
    if where == "initializer":
        graph = helper.make_graph([add], "g", [x], [value], [empty])
    elif where == "Constant":
        graph = helper.make_graph([helper.make_node("Constant", [], ["c"], value=empty), add], "g", [x], [value])
    else:
        then = helper.make_graph([helper.make_node("Constant", [], ["c"], value=empty), add], "then", [], [value])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "else", [], [value])
        graph = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)], "g",
                                  [x, helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [value])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("where", ["initializer", "Constant", "Constant in a branch"])
@pytest.mark.parametrize("command", ["inspect", "run", "compare"])
def test_a_tensor_with_dims_and_no_data_is_a_model_error(capsys, tmp_path, command, where):
    """As onnxruntime refuses the model, dml_ep says it is the model's (a Constant's crashed: "cannot
    reshape array of size 0")."""
    model = _without_data_model(tmp_path / "m.onnx", where)
    status, _, err = run_cli(capsys, command, model, *(["--val-range", "cond=1,1"] if "branch" in where else []))
    assert status == 2 and one_line_error(err), err
    assert "'c'" in err or "tensor name: c)" in err  # in a branch, onnxruntime's words


# --- export: refused before any work, or done ---------------------------------------------------


@pytest.fixture
def no_model_read(monkeypatch):
    """Reading a model fails the test: what is refused must be refused before."""
    def read(path):
        raise AssertionError(f"{path} read: the refusal came after the work")
    monkeypatch.setattr("dml_ep.core.graph._read_model_file", read)


@POSIX
def test_export_writes_through_a_link_to_an_empty_folder(capsys, tmp_path):
    """A symbolic link to an empty folder is written through, as a file's link is (the export ran
    the whole model, then failed on renaming over the link)."""
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "link")
    status, _, err = run_cli(capsys, "export", MLP, "--dxdispatch", tmp_path / "link")
    assert status == 0, err
    assert (tmp_path / "link").is_symlink() and (tmp_path / "target" / "model.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"]


@pytest.mark.parametrize("destination", ["link to a folder not empty", "name too long", "a file", "in no folder"])
def test_export_refuses_its_folder_before_any_work(capsys, tmp_path, no_model_read, destination):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("mine")
    (tmp_path / "file").write_text("mine")
    if destination == "link to a folder not empty":
        if os.name != "posix":
            pytest.skip("unprivileged symbolic links are POSIX")
        os.symlink(tmp_path / "full", tmp_path / "link")
    folder = {"link to a folder not empty": tmp_path / "link", "name too long": tmp_path / ("d" * 256),
              "a file": tmp_path / "file", "in no folder": tmp_path / "missing" / "d"}[destination]
    status, _, err = run_cli(capsys, "export", MLP, "--dxdispatch", folder)
    assert status == 2 and one_line_error(err), err
    assert (tmp_path / "full" / "mine.txt").read_text() == "mine" and (tmp_path / "file").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["full", "file", *(["link"] if "link" in destination else [])])


def _renamed(model: onnx.ModelProto, old: str, new: str) -> onnx.ModelProto:
    for tensor in [*model.graph.initializer, *model.graph.input, *model.graph.output]:
        if tensor.name == old:
            tensor.name = new
    for node in model.graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    return model


def test_export_gives_long_names_files_that_fit(capsys, tmp_path):
    """ONNX names have no length limit, file names 255 bytes: a 300-character weight name (and one
    of 300 three-byte characters), two sharing their first 200, each get a file of their own, cut
    and told apart by a digest, which model.json names and which holds the weight."""
    model = onnx.load(MLP)
    names = {"fc1.weight_quantized": "w" * 300, "fc2.weight_quantized": "w" * 200 + "v" * 100, "fc3.weight_quantized": "\u20ac" * 300}
    weights = {new: numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == old)) for old, new in names.items()}
    for old, new in names.items():
        _renamed(model, old, new)
    onnx.save(model, tmp_path / "long.onnx")
    status, _, err = run_cli(capsys, "export", tmp_path / "long.onnx", "--dxdispatch", tmp_path / "d")
    assert status == 0, err
    resources = json.loads((tmp_path / "d" / "model.json").read_text())["resources"]
    files = [resources[name]["initialValues"]["sourcePath"] for name in weights]
    assert len(set(files)) == 3 and all(len(os.fsencode(Path(f).name)) <= 255 for f in files)
    for name, file in zip(weights, files):
        np.testing.assert_array_equal(np.load(tmp_path / "d" / file), weights[name])


def test_run_gives_a_long_output_name_a_file_that_fits(capsys, tmp_path):
    name = "y" * 300
    model = unary_model(tmp_path / "m.onnx", [("Neg", name)])
    np.save(tmp_path / "x.npy", np.array([1.0, -2.0, 3.0], np.float32))
    status, out, err = run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert status == 0, err
    (file,) = (tmp_path / "out").iterdir()
    assert len(file.name) <= 255 and file.name in out
    np.testing.assert_array_equal(np.load(file), np.array([-1.0, 2.0, -3.0], np.float32))


@POSIX
def test_an_export_through_a_link_that_fails_midway_leaves_nothing(capsys, tmp_path, monkeypatch):
    """The disk fills while the export writes: nothing of it is left, and the link and its empty
    folder are as they were (SIGTERM midway: tests/cli/test_files.py's
    test_sigterm_while_exporting_leaves_no_staging_folder)."""
    def save_then_fail(file, arr):
        file.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "link")
    monkeypatch.setattr(np, "save", save_then_fail)
    status, _, err = run_cli(capsys, "export", MLP, "--dxdispatch", tmp_path / "link")
    assert status == 2 and one_line_error(err) and "No space left" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"] and list((tmp_path / "target").iterdir()) == []


# --- outputs that would replace each other, or an input ----------------------------------------


def _clashes(tmp_path: Path) -> list[tuple[str, list]]:
    """(command, argv) pairs whose outputs are one file by two names, or a file in a folder written whole."""
    a, dot_a, link = tmp_path / "a.json", f"{tmp_path}/./a.json", tmp_path / "link.json"
    if os.name == "posix":  # Windows lets only administrators make symbolic links
        os.symlink(a, link)
    (tmp_path / "empty").mkdir()
    cases = [
        ("inspect", ["--json", a, "--html", dot_a]),
        ("inspect", ["--json", a, "--save-rewritten", a]),
        ("inspect", ["--json", tmp_path / "empty" / "r.json", "--model-explorer", tmp_path / "empty"]),
        ("run", ["--save-outputs", a, "--save-inputs", dot_a]),
        ("compare", ["--json", a, "--save-outputs", dot_a]),
        ("compare", ["--html", a, "--save-inputs", a]),
        ("compare", ["--save-rewritten", tmp_path / "empty" / "m.onnx", "--model-explorer", tmp_path / "empty"]),
    ]
    if os.name == "posix":
        cases += [("inspect", ["--json", a, "--html", link]), ("compare", ["--json", link, "--save-inputs", a])]
    return cases


def test_no_two_outputs_are_one_file(capsys, tmp_path, no_model_read):
    """One would replace the other (or fill a folder that must be empty): refused before any work,
    in one line naming both, by any name of the file."""
    for command, argv in _clashes(tmp_path):
        status, _, err = run_cli(capsys, command, MLP, *argv)
        assert status == 2 and one_line_error(err), (command, argv, err)
        assert "both write" in err or "inside --model-explorer" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", *(["link.json"] if os.name == "posix" else [])]
    assert list((tmp_path / "empty").iterdir()) == []


def test_run_output_dir_files_clash_before_the_run(capsys, tmp_path, monkeypatch):
    """--output-dir's files are known once the model is read: checked then, before it runs."""
    def never(*args, **kwargs):
        raise AssertionError("the model ran")
    monkeypatch.setattr("dml_ep.runtime.session.InferenceSession.run", never)
    status, _, err = run_cli(capsys, "run", MLP, "--output-dir", tmp_path, "--save-inputs", tmp_path / "." / "output.npy")
    assert status == 2 and one_line_error(err) and "--save-inputs and --output-dir's output.npy both write" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--json", "--html", "--save-rewritten", "--save-outputs", "--save-inputs"])
@pytest.mark.parametrize("read", ["--load-inputs", "--load-outputs", "--input"])
def test_no_output_is_an_input(capsys, tmp_path, option, read):
    """Every file compare writes, against every kind of file it reads (the model: test_cli_files.py's
    test_a_report_is_never_written_over_an_input)."""
    feeds = tmp_path / "in.json"
    feeds.write_text(inputs_json([{"input": np.zeros((1, 64), np.float32)}]))
    saved = tmp_path / "out.json"
    saved.write_text(run_results_json({"onnxrt-runner-N0": [{"output": np.zeros((1, 10), np.float32)}]}))
    np.save(tmp_path / "x.npy", np.zeros((1, 64), np.float32))
    argv = {"--load-inputs": ["--load-inputs", feeds], "--load-outputs": ["--load-inputs", feeds, "--load-outputs", saved],
            "--input": ["--input", f"input={tmp_path / 'x.npy'}"]}[read]
    target = {"--load-inputs": feeds, "--load-outputs": saved, "--input": tmp_path / "x.npy"}[read]
    before = target.read_bytes()
    status, _, err = run_cli(capsys, "compare", MLP, *argv, option, tmp_path / "." / target.name)
    assert status == 2 and one_line_error(err) and "is an input of this command" in err, err
    assert target.read_bytes() == before


# --- repeated options ---------------------------------------------------------------------------

# Two values each for options whose values are not choices.
SAMPLES = {"shape": ["a:[1]", "b:[2,3]"], "atol": ["1e-3", "y:0.5"], "rtol": ["0.1", "y:0"], "onnx_outputs": ["mark", "all"],
           "feature_levels": ["4_0", "6_4"]}


def _multi_value_options():
    """(command, its parser, the option) of every option taking several values, found by walking
    dml-ep's parser."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [pytest.param(name, command, action, id=f"{name} {action.option_strings[0]}") for name, command in commands.choices.items()
            for action in command._actions if action.option_strings and action.nargs == "+"]


def _required(command: argparse.ArgumentParser) -> list[str]:
    """The arguments a command cannot parse without."""
    argv = []
    for action in command._actions:
        if not action.option_strings:
            argv.append("m.onnx")
        elif action.required:
            argv += [action.option_strings[0], "out"]
    return argv


def test_the_walk_finds_the_multi_value_options():
    found = {param.id for param in _multi_value_options()}
    assert {"sweep --arithmetic", "sweep --ort-release", "compare --atol", "run --input-shapes", "compare --onnx-outputs"} <= found


@pytest.mark.parametrize("name, command, action", _multi_value_options())
def test_a_repeated_multi_value_option_keeps_every_value(name, command, action):
    """``--arithmetic directml --arithmetic onnxruntime`` swept only onnxruntime (the last won), where
    ``--shape`` repeated adds: every option of several values adds, a value given replaces the
    default rather than adding to it, and the default stands, unchanged, when the option is absent."""
    values = list(action.choices)[:2] if action.choices else SAMPLES.get(action.dest)
    assert values and len(values) == 2, f"{name} {action.option_strings[0]}: give two sample values in SAMPLES"
    option, required = action.option_strings[0], _required(command)
    parser = cli.build_parser()

    def parsed(*argv):
        return getattr(parser.parse_args([name, *required, *argv]), action.dest)

    default = parsed()
    kept = list(default) if default is not None else None
    both = parsed(option, values[0], values[1])
    assert parsed(option, values[0], option, values[1]) == both and len(both) == 2
    assert parsed(option, values[0]) == both[:1]
    assert parsed() == kept  # the default, not changed by the parses that gave the option


# --- wrong words -------------------------------------------------------------------------------


@pytest.mark.host_sensitive  # compare runs the host's onnxruntime
def test_a_4bit_qdq_model_is_not_called_unquantized(capsys, tmp_path):
    """A MatMul's 64x32 weight quantized by onnxruntime's MatMulNBitsQuantizer (QDQ: an int4
    DequantizeLinear-21 -> MatMul, block 32) is quantized: compare's note that the model has no
    quantized node is for float models only (its test for "Quantize" missed Dequantize's small q)."""
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    weight = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])], [numpy_helper.from_array(weight, "w")])
    float_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.save(float_model, tmp_path / "float.onnx")
    quantizer = MatMulNBitsQuantizer(float_model, bits=4, block_size=32, is_symmetric=True, quant_format=QuantFormat.QDQ)
    quantizer.process()
    quantizer.model.save_model_to_file(str(tmp_path / "int4.onnx"), use_external_data_format=False)
    dq = next(n for n in onnx.load(tmp_path / "int4.onnx").graph.node if n.op_type == "DequantizeLinear")
    assert dq.op_type == "DequantizeLinear"
    status, out, _ = run_cli(capsys, "compare", tmp_path / "int4.onnx", "--quiet")
    assert status in (0, 1) and "no quantized node" not in out
    status, out, _ = run_cli(capsys, "compare", tmp_path / "float.onnx", "--quiet")
    assert status in (0, 1) and "no quantized node" in out


def test_run_names_the_saved_runner_whose_outputs_differ(capsys, tmp_path):
    """run --load-outputs against Polygraphy's onnxrt runner's outputs, of another shape and type:
    the verdict names that runner, not onnxruntime."""
    runner = "onnxrt-runner-N0-12/07/26-12:00:00"
    feeds = tmp_path / "in.json"
    feeds.write_text(inputs_json([{"input": np.zeros((1, 64), np.float32)}]))
    (tmp_path / "out.json").write_text(run_results_json({runner: [{"output": np.zeros((1, 5), np.float16)}]}))
    status, out, _ = run_cli(capsys, "run", MLP, "--load-inputs", feeds, "--load-outputs", tmp_path / "out.json")
    assert status == 1
    assert f"MISMATCH: dml_ep gives float32 [1, 10], {runner!r} float16 [1, 5]" in out and "onnxruntime" not in out
