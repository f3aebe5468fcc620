"""``dml-ep sweep`` and :func:`dml_ep.sweep.run.sweep`: tasks as the cross product of models and
settings, each report what ``compare --json`` gives; a database that resumes, retries failed tasks
on request and survives a kill; the embedded Dask cluster, a worker killed mid-sweep, a hung task
past its timeout, and a scheduler with workers started as separate processes.

The tasks that must last (to be killed or timed out) run a float Loop of a set number of MatMuls:
onnxruntime runs it on both sides, a known time per iteration, 10^9 of them a hang."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.cli.commands import main
from dml_ep.core.errors import DmlEpError
from dml_ep.passes import DEFAULT_RELEASE
from dml_ep.sweep.db import SweepDatabase
from dml_ep.sweep.run import sweep
from dml_ep.sweep.tasks import SweepTask, failed_row, sweep_tasks

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
SHIPPED = [MODELS / "mlp.onnx", MODELS / "small_cnn.qdq.onnx", MODELS / "transformer_block.dynamic.onnx"]
DML_EP = [sys.executable, "-m", "dml_ep"]
psutil = pytest.importorskip("psutil")  # distributed's dependency: the sweep extra's
HANG = 300  # seconds after which a wait is a hang: no test here waits on a timing, a busy machine may be slow
TASK_TIMEOUT = 15.0  # seconds: the hung task's


def loop_model(path: Path, iterations: int) -> Path:
    """A float model of ``iterations`` MatMul + Tanh in a Loop (about 4 us each on both sides)."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_in", "w"], ["y"]), helper.make_node("Tanh", ["y"], ["x_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [1, 64])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "cond", "x"], ["out"], body=body)], "loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(np.array(iterations, np.int64), "trips"), numpy_helper.from_array(np.array(True), "cond"),
         numpy_helper.from_array(np.eye(64, dtype=np.float32) * 0.5, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def compare_json(tmp_path: Path, model: Path, *options: str) -> dict:
    """``dml-ep compare --json``'s report, the reference of a sweep's."""
    out = tmp_path / "compare.json"
    assert main(["compare", str(model), "--quiet", "--json", str(out), *options]) in (0, 1)
    return json.loads(out.read_text())


def test_tasks_are_the_cross_product_each_keyed_by_what_changes_its_report(tmp_path):
    tasks = sweep_tasks([str(m) for m in SHIPPED[:2]] + [str(SHIPPED[0])], ("directml", "onnxruntime"), (DEFAULT_RELEASE, None),
                        ("6_4",))
    assert len(tasks) == 2 * 2 * 2 and len({t.key for t in tasks}) == 8  # the model given twice is one model
    assert {(Path(t.model).name, t.arithmetic, t.ort_release) for t in tasks} == {
        (m.name, a, r) for m in SHIPPED[:2] for a in ("directml", "onnxruntime") for r in (DEFAULT_RELEASE, None)}
    task = SweepTask(str(SHIPPED[0]))
    assert SweepTask(str(SHIPPED[0]), seed=1).key != task.key
    assert SweepTask(str(SHIPPED[0]), engine="numpy", html="x.html").key == task.key  # neither changes the report
    spelled = sweep_tasks([str(SHIPPED[0])], feature_levels=("FL_4_0", "DML_FEATURE_LEVEL_4_0", "4.0"))
    assert [t.feature_level for t in spelled] == ["4_0"]  # one level, whatever its spelling
    plans = sweep_tasks([str(SHIPPED[0])], ("directml", "onnxruntime"), plan_only=True)
    assert len(plans) == 1  # a plan has no arithmetic


@pytest.mark.host_sensitive
def test_each_row_holds_compare_json_report_and_its_summary(tmp_path):
    rows = sweep([str(m) for m in SHIPPED], ("directml", "onnxruntime"), db=str(tmp_path / "s.db"), sequential=True)
    assert len(rows) == 6
    for row in rows:
        expected = compare_json(tmp_path, Path(row["model"]), "--arithmetic", row["arithmetic"])
        assert row["report"]["models"] == expected["models"] and row["report"]["ok"] == expected["ok"]
        outputs = expected["models"][0]["outputs"]
        equal, elements = sum(o["equal"] for o in outputs), sum(o["elements"] for o in outputs)
        assert row["exact_percent"] == pytest.approx(100 * equal / elements)
        assert row["max_diff"] == max(o["max_diff"] for o in outputs)
        assert row["status"] == ("ok" if expected["ok"] else "mismatch")
        assert row["dml_macs_percent"] == expected["models"][0]["plan"]["dml"]["macs_percent"]
        assert row["attempts"] == 1 and row["seconds"] > 0 and row["versions"]["onnxruntime"]


def test_a_plan_only_sweep_holds_inspect_json_report(tmp_path):
    rows = sweep([str(SHIPPED[1])], feature_levels=("4_0", "6_4"), plan_only=True, db=str(tmp_path / "s.db"), sequential=True)
    for row in rows:
        out = tmp_path / f"{row['feature_level']}.json"
        assert main(["inspect", str(SHIPPED[1]), "--quiet", "--feature-level", row["feature_level"], "--json", str(out)]) == 0
        assert row["status"] == "planned" and row["report"]["nodes"] == json.loads(out.read_text())["nodes"]
    assert [row["feature_level"] for row in rows] == ["4_0", "6_4"]


@pytest.mark.host_sensitive
def test_a_rerun_skips_finished_tasks_and_retries_failed_ones_only_when_asked(tmp_path, capsys):
    # ort-exact: "ok" on every host (plain "ort" saturates mlp's uint8 x int8 pairs on AVX2 without VNNI)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    db = str(tmp_path / "s.db")
    first = sweep([str(SHIPPED[0]), str(bad)], db=db, sequential=True, reference="ort-exact")
    assert [r["status"] for r in first] == ["ok", "failed"] and "bad.onnx" in first[1]["reason"]
    again = sweep([str(SHIPPED[0]), str(bad)], db=db, sequential=True, reference="ort-exact")
    assert [(r["finished"], r["attempts"]) for r in again] == [(r["finished"], 1) for r in first]
    retried = sweep([str(SHIPPED[0]), str(bad)], db=db, sequential=True, reference="ort-exact", rerun_failed=True)
    assert [r["attempts"] for r in retried] == [1, 2] and retried[0]["finished"] == first[0]["finished"]
    more = sweep([str(SHIPPED[0])], ("directml", "onnxruntime"), db=db, sequential=True, reference="ort-exact")
    assert [r["attempts"] for r in more] == [1, 1] and more[0]["finished"] == first[0]["finished"]


def test_a_file_that_is_not_a_sweep_database_is_refused_and_left_as_it_is(tmp_path):
    for content in (b"some notes", None):
        path = tmp_path / "other.db"
        if content is None:  # someone else's SQLite database
            path.unlink()
            with sqlite3.connect(path) as connection:
                connection.execute("CREATE TABLE t (x)")
        else:
            path.write_bytes(content)
        before = path.read_bytes()
        with pytest.raises(DmlEpError, match="not a dml-ep sweep database"):
            sweep([str(SHIPPED[0])], db=str(path), sequential=True)
        assert path.read_bytes() == before


def test_a_sequential_sweep_has_no_timeout_to_offer(tmp_path):
    """A task in the sweep's own process cannot be stopped where onnxruntime hangs (no Python runs to take a signal)."""
    with pytest.raises(DmlEpError, match="--sequential"):
        sweep([str(SHIPPED[0])], db=str(tmp_path / "s.db"), sequential=True, timeout=1.0)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.host_sensitive
def test_the_cli_sweeps_lists_the_rows_and_says_failed_tasks_in_its_status(tmp_path, capsys):
    # ort-exact: "ok" on every host (plain "ort" saturates mlp's uint8 x int8 pairs on AVX2 without VNNI)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    db = tmp_path / "s.db"
    assert main(["sweep", str(SHIPPED[0]), "--sequential", "--quiet", "--reference", "ort-exact", "--db", str(db), "--arithmetic", "directml", "onnxruntime",
                 "--ort-release", DEFAULT_RELEASE, "none"]) == 0
    out = capsys.readouterr().out
    assert "4 task(s): 4 ok" in out and f"database: {db}" in out
    assert main(["sweep", str(SHIPPED[0]), str(bad), "--sequential", "--quiet", "--reference", "ort-exact", "--db", str(db)]) == 2
    out = capsys.readouterr().out
    assert "2 task(s): 1 ok, 1 failed" in out and "bad.onnx" in out
    assert main(["report", str(db)]) == 0
    assert "5 task(s): 4 ok, 1 failed" in capsys.readouterr().out


def test_the_cli_says_in_one_line_what_is_wrong(tmp_path):
    def cli(*argv):
        return subprocess.run([*DML_EP, *map(str, argv)], capture_output=True, text=True, cwd=tmp_path)

    missing = cli("report", tmp_path / "none.db")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such sweep database" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    level = cli("sweep", SHIPPED[0], "--sequential", "--feature-level", "9_9")
    assert level.returncode == 2 and level.stderr.startswith("dml-ep: error: ") and level.stderr.count("\n") == 1
    timeout = cli("sweep", SHIPPED[0], "--timeout", "0")
    assert timeout.returncode == 2 and "above 0" in timeout.stderr
    without_dask = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['distributed'] = None; from dml_ep.__main__ import main; "
         "sys.exit(main(sys.argv[1:]))", "sweep", str(SHIPPED[0]), "--db", str(tmp_path / "d.db")],
        capture_output=True, text=True)
    assert without_dask.returncode == 2 and "pip install 'dml_ep[sweep]'" in without_dask.stderr
    assert "--sequential" in without_dask.stderr and without_dask.stderr.count("\n") == 1


# --- on Dask ---------------------------------------------------------------------------------


class _Future:
    """A Dask future's face as _DaskRun sees it: a key, a status, a result."""

    def __init__(self, key: str, statuses: list[str], row: dict):
        self.key, self.statuses, self.row = key, statuses, row

    @property
    def status(self) -> str:
        return self.statuses[0]

    def result(self) -> dict:
        self.statuses[:] = ["finished"]  # as Dask's does, it waits for the task to be done again
        return self.row

    def exception(self):
        return None

    def cancel(self):
        pass


def test_a_result_lost_with_its_worker_after_its_task_ended_is_waited_for_not_failed(tmp_path):
    """Issue 58's failure under load: a worker killed after its task ended, before the sweep took the
    result: as_completed had yielded the future, whose result was lost ("lost", then "pending" while
    Dask computes it again). It was recorded as failed ("Dask: NoneType: None")."""
    from dml_ep.sweep.run import SweepProgress, _DaskRun

    task = SweepTask(str(SHIPPED[0]))
    ok_row = {**failed_row(task, "not run"), "status": "ok", "reason": None}
    future = _Future(f"dml-ep-sweep-{task.key}", ["lost", "pending", "finished"], ok_row)

    class Completed:
        def __init__(self, futures):
            self.queue = list(futures)

        def next_batch(self, block=False):
            batch, self.queue = self.queue, []
            return batch

        def add(self, added):
            added.statuses.pop(0)  # Dask computes it again
            self.queue.append(added)

    class Client:
        def subscribe_topic(self, topic, handler):
            pass

        def submit(self, function, submitted, key, pure):
            return future

        def nthreads(self):
            return {"worker": 1}

    distributed = type("distributed", (), {"as_completed": Completed, "KilledWorker": type("KilledWorker", (Exception,), {})})
    recorded: list[dict] = []
    _DaskRun(distributed, Client(), [task], recorded.append, None, SweepProgress(1, 0, enabled=False)).run()
    assert [row["status"] for row in recorded] == ["ok"]


@pytest.mark.host_sensitive
@pytest.mark.native_children  # Dask's worker processes run on the real CPU under qemu-user
def test_an_embedded_cluster_gives_the_rows_of_a_sequential_sweep(tmp_path):
    models = [str(m) for m in SHIPPED]
    sequential = sweep(models, ("directml", "onnxruntime"), db=str(tmp_path / "a.db"), sequential=True)
    clustered = sweep(models, ("directml", "onnxruntime"), db=str(tmp_path / "b.db"), workers=2)
    assert [r["key"] for r in clustered] == [r["key"] for r in sequential]
    assert [r["report"]["models"] for r in clustered] == [r["report"]["models"] for r in sequential]
    assert len({r["pid"] for r in clustered}) == 2 and os.getpid() not in {r["pid"] for r in clustered}


@pytest.mark.host_sensitive
@pytest.mark.native_children
def test_a_hung_task_fails_past_its_timeout_and_its_worker_is_restarted(tmp_path):
    hung = loop_model(tmp_path / "hung.onnx", 10**9)  # about an hour
    started = time.monotonic()
    # a timeout that the shipped models' tasks (about a second each) stay under on a busy machine too
    rows = sweep([str(hung), *map(str, SHIPPED)], db=str(tmp_path / "s.db"), workers=2, timeout=TASK_TIMEOUT)
    assert time.monotonic() - started < HANG
    assert rows[0]["status"] == "failed" and rows[0]["reason"].startswith(f"timed out after {TASK_TIMEOUT:g} s on worker tcp://")
    assert [r["status"] for r in rows[1:]] == ["ok"] * 3


def _sweep_process(tmp_path: Path, models: list[Path], db: Path) -> subprocess.Popen:
    return subprocess.Popen([*DML_EP, "sweep", *map(str, models), "--db", str(db), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def _rows_done(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as connection:
            return connection.execute("SELECT count(*) FROM tasks").fetchone()[0]
    except sqlite3.OperationalError:  # not made yet
        return 0


def _wait_for_rows(db: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG
    while _rows_done(db) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sweep made no rows"
        time.sleep(0.1)


def _workers(process: subprocess.Popen, count: int) -> list:
    """The ``count`` Dask worker processes of a ``dml-ep sweep`` (multiprocessing's spawned
    children), once they are all there: on a busy machine a worker may still be starting, or
    restarting, when the first rows are written, and a child may end while it is looked at."""
    deadline = time.monotonic() + HANG
    while True:
        workers = []
        for child in psutil.Process(process.pid).children(recursive=True):
            try:
                command = " ".join(child.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone (a zombie too) since listed
                continue
            if "spawn_main" in command and "resource_tracker" not in command and child.status() != psutil.STATUS_ZOMBIE:
                workers.append(child)
        if len(workers) == count:
            return workers
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"the sweep has {len(workers)} worker(s), not {count}"
        time.sleep(0.1)


@pytest.mark.host_sensitive
@pytest.mark.native_children
def test_a_worker_killed_mid_sweep_loses_nothing_and_a_rerun_redoes_nothing(tmp_path):
    models = [loop_model(tmp_path / f"loop{i}.onnx", 250_000 + i) for i in range(10)]  # about 1 s each
    db = tmp_path / "s.db"
    process = _sweep_process(tmp_path, models, db)
    try:
        _wait_for_rows(db, 1, process)
        _workers(process, 2)[0].send_signal(signal.SIGKILL)
        out, err = process.communicate(timeout=HANG)
    finally:
        process.kill()
    assert process.returncode == 0, err
    with SweepDatabase(str(db)) as database:
        rows = database.rows()
    assert len(rows) == 10 and {r["status"] for r in rows} == {"ok"}  # its task ran again on a worker restarted
    rerun = subprocess.run([*DML_EP, "sweep", *map(str, models), "--db", str(db), "--workers", "2"], capture_output=True, text=True)
    assert rerun.returncode == 0 and "10 task(s) done before, in the database: skipped" in rerun.stderr
    with SweepDatabase(str(db)) as database:
        assert [(r["key"], r["finished"], r["attempts"]) for r in database.rows()] == [(r["key"], r["finished"], 1) for r in rows]


@pytest.mark.host_sensitive
@pytest.mark.native_children
def test_a_sweep_killed_mid_way_resumes_without_redoing_finished_tasks(tmp_path):
    models = [loop_model(tmp_path / f"loop{i}.onnx", 250_000 + i) for i in range(8)]
    db = tmp_path / "s.db"
    process = _sweep_process(tmp_path, models, db)
    try:
        _wait_for_rows(db, 2, process)
        workers = _workers(process, 2)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
        for worker in workers:
            if worker.is_running():
                worker.kill()
    with SweepDatabase(str(db)) as database:
        before = database.rows()
    assert 2 <= len(before) < 8 and {r["status"] for r in before} == {"ok"}
    rows = sweep([str(m) for m in models], db=str(db), workers=2)
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    kept = {r["key"]: (r["finished"], r["attempts"]) for r in rows}
    assert all(kept[r["key"]] == (r["finished"], 1) for r in before)


@pytest.mark.host_sensitive
@pytest.mark.native_children
def test_a_scheduler_and_workers_started_apart_give_the_rows_of_the_embedded_cluster(tmp_path):
    scheduler_file = tmp_path / "scheduler.json"
    started = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + HANG
        while not scheduler_file.exists() or not scheduler_file.read_text():
            assert time.monotonic() < deadline and started[0].poll() is None, "the scheduler did not start"
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for _ in range(2):
            started.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                             "--no-dashboard", "--host", "127.0.0.1"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        models = [str(m) for m in SHIPPED]
        remote = sweep(models, ("directml", "onnxruntime"), db=str(tmp_path / "remote.db"), scheduler=address)
        embedded = sweep(models, ("directml", "onnxruntime"), db=str(tmp_path / "embedded.db"), workers=2)
        assert len({r["pid"] for r in remote} - {os.getpid()}) == 2
        fields = ("key", "status", "exact_percent", "max_diff", "causes", "dml_macs_percent")
        assert [[r[f] for f in fields] for r in remote] == [[r[f] for f in fields] for r in embedded]
        assert [r["report"]["models"] for r in remote] == [r["report"]["models"] for r in embedded]
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
