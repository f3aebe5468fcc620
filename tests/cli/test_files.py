"""The dml-ep command's files and edges: where reports and outputs go, where feeds and external
data come from, what it refuses to read or allocate, its one-line errors, and its metadata."""

import contextlib
import importlib.metadata
import json
import os
import platform
import signal
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

import dml_ep
from dml_ep.cli import commands as cli
from dml_ep.core.errors import FeedError, ModelError
from dml_ep.core.graph import load_model
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.numerics.kernels import compiled
from dml_ep.runtime.inputs import load_array, random_inputs
from cli_runs import POSIX, one_line_error, run_cli, unary_model

MODELS = Path(__file__).resolve().parents[2] / "models"
DML_EP = [sys.executable, "-m", "dml_ep"]  # the CLI as it runs on any OS


def external_tensor(array, name, location):
    """A TensorProto whose data is said to be in the file ``location``, holding no data itself."""
    tensor = numpy_helper.from_array(array, name)
    set_external_data(tensor, location)
    tensor.ClearField("raw_data")
    return tensor


# --- output files --------------------------------------------------------------------------


@pytest.mark.host_sensitive
def test_json_dash_is_stdout(capsys, tmp_path, monkeypatch):
    """With ``--json -`` stdout holds the JSON alone (the table moves to stderr), and no file named ``-``."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", "-")
    assert status == 0
    assert json.loads(out)["summary"]["dml"]["nodes"] == 7
    assert "estimated MACs" in err
    status, out, _ = run_cli(capsys, "compare", MODELS / "mlp.onnx", "--reference", "ort-exact", "--quiet", "--json", "-")
    assert status == 0 and json.loads(out)["ok"] is True
    assert list(tmp_path.iterdir()) == []


@POSIX
def test_json_to_a_fifo_is_written_in_place(capsys, tmp_path):
    """A FIFO (as /dev/stdout or /dev/null would be) is opened and written, not renamed over."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        status, _, err = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", fifo)
        assert status == 0, err
        received = reader.communicate(timeout=30)[0]
    finally:
        reader.kill()
        reader.wait()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(received)["model"] == str(MODELS / "mlp.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["fifo"]


def test_run_gives_outputs_whose_file_names_collide_distinct_files(capsys, tmp_path):
    """``o/1`` and ``o_1`` both sanitize to ``o_1``, ``Y`` and ``y`` collide on a case-insensitive
    file system: the later ones get a numeric suffix, in output order, and the table says which."""
    model = unary_model(tmp_path / "m.onnx", [("Identity", "o/1"), ("Neg", "o_1"), ("Relu", "Y"), ("Abs", "y")])
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    status, out, _ = run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert status == 0
    expected = {"o_1.npy": x, "o_1_2.npy": -x, "Y.npy": np.maximum(x, 0), "y_2.npy": np.abs(x)}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(expected)
    for file, array in expected.items():
        np.testing.assert_array_equal(np.load(tmp_path / "out" / file), array)
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:]}
    assert rows == {"o/1": "o_1.npy", "o_1": "o_1_2.npy", "Y": "Y.npy", "y": "y_2.npy"}


def save_then_sigterm(file, arr):
    """np.save that writes part of the file (export gives a path, run an open file), then receives
    SIGTERM (as from ``kill``)."""
    with contextlib.nullcontext(file) if hasattr(file, "write") else open(file, "wb") as f:
        f.write(b"partial")
        os.kill(os.getpid(), signal.SIGTERM)


@POSIX
def test_sigterm_while_writing_outputs_leaves_nothing_partial(capsys, tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(np, "save", save_then_sigterm)
    status, out, err = run_cli(capsys, "run", MODELS / "mlp.onnx", "--output-dir", tmp_path / "out")
    assert (status, err) == (143, "dml-ep: terminated\n")
    assert list((tmp_path / "out").iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the command's only


@POSIX
def test_sigterm_while_exporting_leaves_no_staging_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(np, "save", save_then_sigterm)
    status, _, err = run_cli(capsys, "export", MODELS / "small_cnn.onnx", "--dxdispatch", tmp_path / "cnn.dxd")
    assert (status, err) == (143, "dml-ep: terminated\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["inspect", "compare"])
def test_a_report_is_never_written_over_an_input(capsys, tmp_path, command):
    """``compare M --json M`` would replace the model with the report: refused, by any name of it."""
    model = tmp_path / "m.onnx"
    model.write_bytes((MODELS / "mlp.onnx").read_bytes())
    names = [model, tmp_path / "." / "m.onnx"]
    if os.name == "posix":  # Windows lets only administrators make symbolic links
        os.symlink(model, tmp_path / "link.onnx")
        names.append(tmp_path / "link.onnx")
    for report in names:
        status, _, err = run_cli(capsys, command, model, "--json", report)
        assert status == 2 and one_line_error(err) and "is an input of this command" in err
        assert model.read_bytes() == (MODELS / "mlp.onnx").read_bytes()


@pytest.mark.host_sensitive
def test_saved_outputs_are_never_written_over_the_inputs_read(capsys, tmp_path):
    np.save(tmp_path / "input.npy", np.ones((1, 64), np.float32))
    feeds = tmp_path / "in.json"
    # ort-exact: all-ones inputs saturate onnxruntime's u8s8 pairs on AVX2 hosts without VNNI
    assert run_cli(capsys, "compare", MODELS / "mlp.onnx", "--input", f"input={tmp_path / 'input.npy'}", "--save-inputs", feeds,
                   "--reference", "ort-exact")[0] == 0
    before = feeds.read_bytes()
    for option in ("--save-outputs", "--save-inputs", "--json"):
        status, _, err = run_cli(capsys, "compare", MODELS / "mlp.onnx", "--load-inputs", feeds, option, feeds)
        assert status == 2 and "is an input of this command" in err
    assert feeds.read_bytes() == before
    # run: an output file that is an --input file
    model = unary_model(tmp_path / "m.onnx", [("Neg", "y")])
    np.save(tmp_path / "y.npy", np.ones(3, np.float32))
    status, _, err = run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'y.npy'}", "--output-dir", tmp_path)
    assert status == 2 and "y.npy: it is an input of this command" in err
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.ones(3, np.float32))


@POSIX
def test_a_symlinked_report_is_written_through(capsys, tmp_path):
    """As editors and cp do: the link's target gets the report, and the link stays a link."""
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "target.json").chmod(0o640)
    os.symlink(tmp_path / "target.json", tmp_path / "link.json")
    status, _, _ = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", tmp_path / "link.json")
    assert status == 0
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "target.json").read_text())["model"] == str(MODELS / "mlp.onnx")
    assert stat.S_IMODE((tmp_path / "target.json").stat().st_mode) == 0o640  # a replaced file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]


@POSIX
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_and_folders_written_get_the_users_umask(capsys, tmp_path, umask):
    previous = os.umask(umask)
    try:
        assert run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--json", tmp_path / "r.json")[0] == 0
        assert run_cli(capsys, "run", MODELS / "mlp.onnx", "--output-dir", tmp_path / "out")[0] == 0
        assert run_cli(capsys, "export", MODELS / "mlp.onnx", "--dxdispatch", tmp_path / "mlp.dxd")[0] == 0
    finally:
        os.umask(previous)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "r.json") == 0o666 & ~umask
    assert {mode(p) for p in (tmp_path / "out").iterdir()} == {0o666 & ~umask}
    export = tmp_path / "mlp.dxd"
    assert mode(export) == 0o777 & ~umask and mode(export / "resources") == 0o777 & ~umask
    assert mode(export / "model.json") == 0o666 & ~umask


# --- reading feeds and models --------------------------------------------------------------


def test_pb_feed_external_data_is_read_beside_the_pb_file(tmp_path, monkeypatch):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "feeds").mkdir()
    (tmp_path / "feeds" / "x.bin").write_bytes(array.tobytes())
    (tmp_path / "feeds" / "x.pb").write_bytes(external_tensor(array, "x", "x.bin").SerializeToString())
    monkeypatch.chdir(tmp_path)
    name, loaded = load_array(str(tmp_path / "feeds" / "x.pb"))
    assert name == "x"
    np.testing.assert_array_equal(loaded, array)


@pytest.mark.parametrize("location", ["../secret.bin", "{tmp}/secret.bin"])
def test_pb_feed_external_data_stays_in_its_folder(tmp_path, monkeypatch, location):
    array = np.arange(4, dtype=np.float32)
    (tmp_path / "secret.bin").write_bytes(array.tobytes())
    (tmp_path / "feeds").mkdir()
    pb = tmp_path / "feeds" / "x.pb"
    pb.write_bytes(external_tensor(array, "x", location.format(tmp=tmp_path)).SerializeToString())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FeedError, match="x.pb"):
        load_array(str(pb))


def external_data_model(folder: Path, location: str = "w.bin") -> Path:
    """``y = x + w``, w = [0, 1, 2, 3] stored in the file ``location`` (relative to ``folder``)."""
    weights = np.arange(4, dtype=np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / location).write_bytes(weights.tobytes())
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [external_tensor(weights, "w", location)],
    )
    path = folder / "m.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


def test_model_external_data_needs_the_models_path(tmp_path, monkeypatch):
    """Given as bytes (or a ModelProto whose data is not loaded), external data has no folder to be
    read from: refused, even when the current directory happens to hold the file."""
    path = external_data_model(tmp_path / "m")
    np.testing.assert_array_equal(
        numpy_helper.to_array(load_model(str(path)).graph.initializer[0]), np.arange(4, dtype=np.float32))
    monkeypatch.chdir(tmp_path / "m")
    for model in (path.read_bytes(), onnx.load(path, load_external_data=False)):
        with pytest.raises(ModelError, match=r"tensor 'w' is stored as external data \('w.bin'\), which needs the model's path"):
            load_model(model)


@pytest.mark.parametrize("location", ["../w.bin", "{tmp}/m/w.bin"])
def test_model_external_data_stays_in_the_models_folder(tmp_path, location):
    path = external_data_model(tmp_path / "m")
    (tmp_path / "w.bin").write_bytes((tmp_path / "m" / "w.bin").read_bytes())
    model = onnx.load(path, load_external_data=False)
    model.graph.initializer[0].external_data[0].value = location.format(tmp=tmp_path)
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match="external data cannot be loaded"):
        load_model(str(path))


@POSIX
@pytest.mark.parametrize("location", ["../w.bin", "sub/../../w.bin", "{tmp}/w.bin", "link.bin", "linked_dir/w.bin"])
def test_external_data_outside_the_folder_is_refused_by_every_command(capsys, tmp_path, location):
    """Every path that reads weights refuses a location leaving the model's folder, as onnxruntime
    does: a relative path out, an absolute one, a symbolic link to a file or a folder out."""
    path = external_data_model(tmp_path / "m")
    (tmp_path / "w.bin").write_bytes(np.full(4, 1234.5, np.float32).tobytes())  # outside: never to be read
    (tmp_path / "m" / "link.bin").symlink_to(tmp_path / "w.bin")
    (tmp_path / "m" / "linked_dir").symlink_to(tmp_path)
    (tmp_path / "m" / "sub").mkdir()
    model = onnx.load(path, load_external_data=False)
    model.graph.initializer[0].external_data[0].value = location.format(tmp=tmp_path)
    path.write_bytes(model.SerializeToString())
    for argv in (["inspect"], ["inspect", "--save-rewritten", tmp_path / "r.onnx"], ["run"], ["compare"],
                 ["export", "--dxdispatch", tmp_path / "dxd"]):
        status, out, err = run_cli(capsys, argv[0], path, *argv[1:])
        assert status == 2 and "external data cannot be loaded" in err and err.count("\n") == 1, (argv, err)
        assert "1234.5" not in out
    assert not (tmp_path / "r.onnx").exists() and not (tmp_path / "dxd").exists()
    with pytest.raises(ModelError, match="external data cannot be loaded"):
        dml_ep.InferenceSession(str(path))


@POSIX
def test_load_model_refuses_what_is_not_a_regular_file(tmp_path):
    with pytest.raises(ModelError, match="^/dev/null: not a regular file"):
        load_model("/dev/null")
    os.mkfifo(tmp_path / "fifo")  # opening it to read would wait for a writer forever
    with pytest.raises(ModelError, match="fifo: not a regular file"):
        load_model(str(tmp_path / "fifo"))


@POSIX
def test_inspect_dev_zero_is_one_line_error():
    """/dev/zero never ends: refused at once, not read until memory runs out."""
    result = subprocess.run([*DML_EP, "inspect", "/dev/zero"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert one_line_error(result.stderr) and "/dev/zero: not a regular file" in result.stderr


def test_load_model_refuses_more_than_protobufs_limit(tmp_path):
    big = tmp_path / "big.onnx"
    with open(big, "wb") as f:
        f.truncate(2**31)  # sparse: one byte over protobuf's limit of 2^31 - 1, and no disk used
    with pytest.raises(ModelError, match="larger than protobuf's limit"):
        load_model(str(big))



@pytest.mark.host_sensitive
@pytest.mark.parametrize("command", ["inspect", "run", "compare"])
def test_names_that_are_not_utf8(capsys, tmp_path, command):
    """A node name that is not UTF-8 runs as onnxruntime runs it (it was an internal error in the
    QDQ rewrites); a graph output's is refused, as onnxruntime's Python API cannot fetch it."""
    model = onnx.load(MODELS / "small_cnn.qdq.onnx")
    model.graph.node[0].name = "@@notutf8"
    (tmp_path / "node.onnx").write_bytes(model.SerializeToString().replace(b"@@notutf8", b"\xff\xfenotutf8"))
    exact = ["--reference", "ort-exact"] if command == "compare" else []  # the same on hosts that saturate u8s8
    status, _, err = run_cli(capsys, command, tmp_path / "node.onnx", *exact)
    assert status == 0, err
    model = onnx.load(MODELS / "mlp.onnx")
    model.graph.node[-1].output[0] = model.graph.output[0].name = "@@notutf8"
    (tmp_path / "output.onnx").write_bytes(model.SerializeToString().replace(b"@@notutf8", b"\xff\xfenotutf8"))
    status, out, err = run_cli(capsys, command, tmp_path / "output.onnx")
    assert status == 2 and out == "" and one_line_error(err), err
    assert "graph output 0: name b'\\xff\\xfenotutf8' is not UTF-8 (ONNX strings are UTF-8)" in err


# --- onnxruntime's logs, Ctrl-C ------------------------------------------------------------


def test_onnxruntime_logs_nothing_above_the_one_error_line(tmp_path):
    """A GatherElements left to onnxruntime (not modelled) fails on its random int64 index: onnxruntime
    would log the failure itself (a coloured line) before dml-ep's own error line."""
    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["x", "i"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph), tmp_path / "gather.onnx")
    result = subprocess.run([*DML_EP, "run", tmp_path / "gather.onnx", "--val-range", "i=4,4"], capture_output=True, text=True)
    assert result.returncode == 2
    assert one_line_error(result.stderr) and "GatherElements op: Out of range value in index tensor" in result.stderr, result.stderr


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_inspect", interrupted)
    try:
        status, out, err = run_cli(capsys, "inspect", MODELS / "mlp.onnx")
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped cli.main")
    assert (status, out, err) == (130, "", "dml-ep: interrupted\n")


# --- typed errors --------------------------------------------------------------------------


def test_negative_seed_is_a_usage_error(capsys):
    status, out, err = run_cli(capsys, "run", MODELS / "mlp.onnx", "--seed", -1)
    assert status == 2 and out == "" and one_line_error(err) and "--seed" in err


def test_random_inputs_refuse_a_huge_shape_before_allocating(capsys, tmp_path):
    """10^6 x 10^6 float32 is 3.6 TiB: refused with the input's name, not a MemoryError."""
    model = unary_model(tmp_path / "m.onnx", [("Identity", "y")], shape=(10**6, 10**6))
    with pytest.raises(FeedError, match=r"input 'x': .*3,725\.3 GiB"):
        random_inputs(onnx.load(model))
    status, _, err = run_cli(capsys, "run", model)
    assert status == 2 and one_line_error(err) and "input 'x'" in err


@pytest.mark.parametrize("dtype, peak_ratio", [
    (TensorProto.FLOAT, 1.5),    # drawn as float32: no float64 array of twice the size first
    (TensorProto.FLOAT16, 3.5),  # a float32 draw (2x), then the cast (1x)
])
def test_random_float_inputs_are_drawn_in_their_own_type(tmp_path, dtype, peak_ratio):
    model = onnx.load(unary_model(tmp_path / "m.onnx", [("Identity", "y")], shape=(1024, 1024), dtype=dtype))
    tracemalloc.start()
    try:
        x = random_inputs(model)["x"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert x.dtype == helper.tensor_dtype_to_np_dtype(dtype)
    sample = x.astype(np.float64)
    assert abs(sample.mean()) < 0.01 and abs(sample.std() - 1) < 0.01  # still standard normal
    assert peak < peak_ratio * x.nbytes


# --- --shape -------------------------------------------------------------------------------


@pytest.mark.host_sensitive
def test_shape_sets_the_shape_of_random_inputs(capsys, tmp_path):
    model = unary_model(tmp_path / "m.onnx", [("Identity", "y")], shape=("batch", 4))
    assert random_inputs(onnx.load(model), 0, {"x": (3, 4)})["x"].shape == (3, 4)
    status, _, err = run_cli(capsys, "run", model, "--shape", "x=3,4", "--output-dir", tmp_path / "out")
    assert status == 0, err
    assert np.load(tmp_path / "out" / "y.npy").shape == (3, 4)
    status, out, _ = run_cli(capsys, "compare", model, "--shape", "x=5,4", "--quiet")
    assert status == 0 and "[5, 4]" in out


def test_inspect_plans_for_the_given_shape(capsys, tmp_path):
    """mlp's MACs at batch 1 are 26,112 (see tests/cli/test_commands.py); at batch 4, four times that."""
    status, _, _ = run_cli(capsys, "inspect", MODELS / "mlp.onnx", "--shape", "input=4,64", "--json", tmp_path / "plan.json")
    assert status == 0
    assert json.loads((tmp_path / "plan.json").read_text())["summary"]["dml"]["macs"] == 4 * 26_112


@pytest.mark.parametrize("shape, message", [
    ("nope=1,64", "no model input named 'nope'"),
    ("input=64", "rank 1"),
    ("input=1,0", "dimension 1 is 0"),  # 0 parses (an empty KV cache is a valid input); this model declares 64
    ("input=1,x", "non-negative integer"),
    ("input=1.5,64", "non-negative integer"),
    ("input", "NAME=D0,D1,..."),
    ("input=2,32", "dimension 1 is 32"),
])
def test_bad_shapes_are_usage_errors(capsys, shape, message):
    for command in ("inspect", "run", "compare"):
        status, out, err = run_cli(capsys, command, MODELS / "mlp.onnx", "--shape", shape)
        assert status == 2 and out == "" and one_line_error(err) and message in err, (command, err)


# --- the command line ----------------------------------------------------------------------


def test_version(capsys):
    status, out, _ = run_cli(capsys, "--version")
    assert status == 0
    assert out == (f"dml-ep {importlib.metadata.version('dml_ep')} "
                   f"(onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}; {compiled.summary()})\n")


@pytest.mark.parametrize("argv", [["--debug", "inspect", "missing.onnx"], ["inspect", "missing.onnx", "--debug"]])
def test_debug_before_or_after_the_command(argv, capsys):
    """The traceback, then the one-line error, and the exit status of the error (not Python's 1)."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "ModelError" in err
    last = err.splitlines()[-1]
    assert last.startswith("dml-ep: error: ") and "missing.onnx: no such file" in last


def test_help_lists_the_exit_statuses(capsys):
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0
    epilog = out.split("exit status:", 1)[1]
    for code in ("0", "1", "2", "3", "130", "143"):
        assert f"\n  {code} " in epilog


# --- JSON metadata -------------------------------------------------------------------------


@pytest.mark.host_sensitive
def test_json_reports_say_where_and_from_what_they_were_made(capsys, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "b")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph), tmp_path / "add.onnx")
    np.save(tmp_path / "a.npy", np.ones(2, np.float32))
    versions = {"dml_ep": importlib.metadata.version("dml_ep"), "onnxruntime": ort.__version__, "onnx": onnx.__version__,
                "numpy": np.__version__, "python": platform.python_version(), "kernels": compiled.summary()}

    status, _, _ = run_cli(capsys, "compare", tmp_path / "add.onnx", "--input", f"a={tmp_path / 'a.npy'}", "--seed", 5,
                           "--json", tmp_path / "compare.json")
    assert status == 0
    report = json.loads((tmp_path / "compare.json").read_text())
    assert report["schema_version"] == 2 and report["versions"] == versions and report["seed"] == 5
    assert report["cpu"]["saturates_u8s8"] == host_saturates_u8s8()
    assert report["models"][0]["inputs"] == {"a": str(tmp_path / "a.npy"), "b": "random (seed 5)"}

    status, _, _ = run_cli(capsys, "inspect", tmp_path / "add.onnx", "--json", tmp_path / "plan.json")
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["schema_version"] == 2 and plan["versions"] == versions
    assert plan["cpu"] == report["cpu"]


def test_shapes_assumed_that_onnxruntime_refuses_say_so(capsys, tmp_path):
    """Reshape to [-1, 2] of an input of symbolic size n is valid for even n; inspect without
    --shape takes n as 1, which onnxruntime's inference refuses: not "the model is invalid" (a real
    YOLOv8 detector met this), but the assumption, and what to give."""
    graph = onnx.helper.make_graph([onnx.helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n"])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                                   [numpy_helper.from_array(np.array([-1, 2], np.int64), "shape")])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    status, out, err = run_cli(capsys, "inspect", tmp_path / "m.onnx")
    assert status == 2 and out == ""
    assert err.startswith("dml-ep: error: onnxruntime's shape inference refuses the symbolic dimensions taken as n=1 "
                          "(give the input shapes you run with): Reshape node:")
    assert run_cli(capsys, "inspect", tmp_path / "m.onnx", "--shape", "x=4")[0] == 0


def branch_model(tmp_path) -> Path:
    """If c: y = x; else y = Reshape(Reshape(x, [-1, 2]), [-1]), valid only for even sizes of x (a
    silero-vad model has such a branch for its other sample rate)."""
    shape = lambda name, values: numpy_helper.from_array(np.array(values, np.int64), name)  # noqa: E731
    whole = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                   [onnx.helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    pairs = onnx.helper.make_graph([onnx.helper.make_node("Reshape", ["x", "pairs"], ["p"]), onnx.helper.make_node("Reshape", ["p", "flat"], ["e"])],
                                   "else", [], [onnx.helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
                                   [shape("pairs", [-1, 2]), shape("flat", [-1])])
    graph = onnx.helper.make_graph([onnx.helper.make_node("If", ["c"], ["y"], then_branch=whole, else_branch=pairs)], "g",
                                   [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                                    onnx.helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                                   [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "branch.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.host_sensitive
def test_shapes_onnxruntime_refuses_in_a_branch_plan_what_it_can(capsys, tmp_path):
    """Given x=[3], onnxruntime's inference fails in the else branch, which a run with c true never
    enters: the model is valid and runs (onnxruntime says so), so inspect plans it and says where
    the shapes were refused, instead of "the model is invalid" (silero-vad 6.2.3 met this)."""
    path = branch_model(tmp_path)
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
    np.save(tmp_path / "c.npy", np.array(True))
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": np.arange(3, dtype=np.float32), "c": np.array(True)})
    status, out, err = run_cli(capsys, "inspect", path, "--shape", "x=3")
    assert (status, err) == (0, "")
    assert "onnxruntime's shape inference refuses these input shapes inside a subgraph" in out and "Reshape" in out
    assert max(map(len, out.splitlines())) <= 160
    status, out, err = run_cli(capsys, "inspect", path, "--shape", "x=3", "--json", tmp_path / "plan.json")
    assert status == 0 and "Reshape" in json.loads((tmp_path / "plan.json").read_text())["refused"]
    assert run_cli(capsys, "inspect", path, "--shape", "x=4")[0] == 0  # even: nothing refused
    assert "refuses" not in capsys.readouterr().out
    status, out, err = run_cli(capsys, "compare", path, "--input", f"x={tmp_path / 'x.npy'}", "--input", f"c={tmp_path / 'c.npy'}")
    assert (status, err) == (0, "")
    session = dml_ep.InferenceSession(path)
    np.testing.assert_array_equal(session.run(None, {"x": np.arange(3, dtype=np.float32), "c": np.array(True)})[0], expected[0])


def test_input_shapes_onnxruntime_refuses_are_named_as_the_shapes(capsys, tmp_path):
    """Reshape to [-1, 2] of x=[3]: onnxruntime loads the model as given, and refuses these shapes
    outside any subgraph, so no run can take them: an error that names the shapes, not the model."""
    graph = onnx.helper.make_graph([onnx.helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n"])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                                   [numpy_helper.from_array(np.array([-1, 2], np.int64), "shape")])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    status, out, err = run_cli(capsys, "inspect", tmp_path / "m.onnx", "--shape", "x=3")
    assert status == 2 and out == ""
    assert err.startswith("dml-ep: error: onnxruntime's shape inference refuses the input shapes x=[3]: Reshape node:"), err


def int4_model(tmp_path, graph_input: bool) -> Path:
    """DequantizeLinear-21 of int4 codes: an initializer that is also a graph output, or a graph input."""
    codes = onnx.helper.make_tensor("w", onnx.TensorProto.INT4, [3], [-7, 2, -8])
    inputs = [onnx.helper.make_tensor_value_info("w", onnx.TensorProto.INT4, [3])] if graph_input else []
    outputs = [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])]
    if not graph_input:
        outputs.append(onnx.helper.make_tensor_value_info("w", onnx.TensorProto.INT4, [3]))
    graph = onnx.helper.make_graph([onnx.helper.make_node("DequantizeLinear", ["w", "s"], ["y"])], "int4", inputs, outputs,
                                   ([] if graph_input else [codes]) + [numpy_helper.from_array(np.float32(0.5), "s")])
    path = tmp_path / "int4.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)]), path)
    return path


def test_an_int4_output_is_saved_as_int8_values(capsys, tmp_path):
    """np.save wrote int4 (ml_dtypes) as raw bytes, |V1, which np.load gives back as no numbers."""
    status, out, err = run_cli(capsys, "run", int4_model(tmp_path, graph_input=False), "--output-dir", tmp_path / "out")
    assert status == 0, err
    assert "int4 (saved as int8)" in out
    saved = np.load(tmp_path / "out" / "w.npy")
    assert saved.dtype == np.int8 and saved.tolist() == [-7, 2, -8]


def test_an_int4_input_given_with_input_is_taken_or_refused_in_one_line(capsys, tmp_path):
    """--input of an int4 input got "cannot make random values of type int4; give it with --input"
    though given; now it is read, and where onnxruntime's run() must take it (a CPU fallback node),
    refused in one line naming why."""
    path = int4_model(tmp_path, graph_input=True)
    onnx.save_tensor(onnx.helper.make_tensor("w", onnx.TensorProto.INT4, [3], [-7, 2, -8]), str(tmp_path / "w.pb"))
    status, out, err = run_cli(capsys, "run", path, "--input", f"w={tmp_path / 'w.pb'}")
    assert status == 2 and err.count("\n") == 1, err
    assert "'w' is int4, which onnxruntime's Python run() cannot take" in err
