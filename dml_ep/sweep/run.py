"""``dml-ep sweep`` and :func:`sweep`: a sweep's tasks (:mod:`dml_ep.sweep.tasks`) run on Dask
distributed, by default an embedded ``LocalCluster`` of one single-threaded worker process per core,
or a running cluster's scheduler; or, with ``sequential``, one after another in this process
(the plain install, without Dask). Each result is written to the database as it comes
(:mod:`dml_ep.sweep.db`), so that a rerun skips what is done.

What a cluster adds and how it is met:

- a worker that dies (killed, out of memory) has its tasks run again on another one by Dask; one
  that died ``distributed.scheduler.allowed-failures`` times running the same task fails it, with
  that reason;
- ``timeout``: each task says on which worker it started (a Dask event); one running past the
  timeout fails, and its worker is restarted (by its nanny) to stop it (a task in this process,
  ``sequential``, could not be stopped where onnxruntime hangs: there is no timeout);
- progress: tasks done, failed, running, the rate and the time left, and the dashboard's link;
- the embedded cluster listens on the loopback interface only (its dashboard has no authentication),
  and a running one's scheduler must answer within :data:`CONNECT_TIMEOUT`, its handshake too.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import sys
import threading
import time
import warnings
from typing import Callable

import rich.console
import rich.progress

from ..core import files
from ..core.choices import DEFAULT_DB
from ..core.errors import DmlEpError, import_extra
from ..core.graph import one_line
from ..passes import DEFAULT_RELEASE
from ..planning.importer import DEFAULT_FEATURE_LEVEL
from ..reports.text import counts_text, table
from .db import SweepDatabase
from .tasks import STATUSES, SweepTask, failed_row, run_task, sweep_tasks

EVENT_TOPIC = "dml-ep-sweep-started"  # a task's start, from its worker: its key and the worker's address
AGAIN = ("lost", "pending")  # a future's states once its result is lost with its worker: not done, whatever as_completed said
CONNECT_TIMEOUT = 30.0  # seconds to reach a scheduler and have its answer
LOOPBACK = "127.0.0.1"  # where the embedded cluster listens


def sweep(models: list[str], arithmetics=("directml",), ort_releases=(DEFAULT_RELEASE,),
          feature_levels=(DEFAULT_FEATURE_LEVEL.label,), *, db: str = DEFAULT_DB, scheduler: str | None = None,
          workers: int | None = None, sequential: bool = False, timeout: float | None = None, rerun_failed: bool = False,
          html_dir: str | None = None, progress: bool = False, **options) -> list[dict]:
    """Run every model (files, directories, globs) under every arithmetic, onnxruntime release
    and feature level, and return the rows of the database ``db`` for these tasks
    (:func:`dml_ep.sweep.tasks.result_row`: settings, status, exact-match %, causes, MACs on
    DirectML, times, versions and the whole JSON report), those already there not run again
    (failed ones are, with ``rerun_failed``). ``options`` are compare's (``reference``, ``seed``,
    ``steps``, ``atol``, ``rtol``, ``shapes``, ``per_node``, ``plan_only`` for inspect's plan, ...:
    :class:`dml_ep.sweep.tasks.SweepTask`'s fields). ``scheduler``: a running Dask scheduler's
    address; else a LocalCluster of ``workers`` processes (default: one per core); ``sequential``:
    in this process, without Dask. ``progress``: on stderr."""
    if sequential and timeout:
        raise DmlEpError("--timeout stops a task by restarting its worker: a sweep in this process (--sequential) has none")
    files.check_distinct([(what, path) for what, path in (("the database", db), ("the tasks' pages' folder", html_dir)) if path])
    tasks = sweep_tasks(models, tuple(arithmetics), tuple(ort_releases), tuple(feature_levels), html_dir=html_dir, **options)
    if scheduler is not None and not sequential:
        check_scheduler(scheduler)  # before the database is made
    with SweepDatabase(db) as database:
        if html_dir:
            os.makedirs(html_dir, exist_ok=True)
        finished = database.finished(rerun_failed)
        todo = [task for task in tasks if task.key not in finished]
        shown = SweepProgress(len(todo), len(tasks) - len(todo), enabled=progress)
        try:
            if sequential:
                _run_here(todo, database.record, shown)
            else:
                _run_on_dask(todo, database.record, timeout, scheduler, workers, shown)
        finally:
            shown.close()
        return database.rows([task.key for task in tasks])


def _run_here(tasks: list[SweepTask], record: Callable[[dict], None], progress: SweepProgress) -> None:
    """One task after another in this process."""
    for task in tasks:
        progress.started()
        row = run_task(task)
        record(row)
        progress.finished(row)


def require_dask():
    """Dask distributed (the sweep extra), or the typed error that says how to install it."""
    return import_extra("distributed", "dml-ep sweep on a cluster (--sequential runs without)", "sweep")


def _run_on_dask(tasks: list[SweepTask], record: Callable[[dict], None], timeout: float | None, scheduler: str | None,
                 workers: int | None, progress: SweepProgress) -> None:
    """The tasks on Dask: an embedded LocalCluster, or the cluster of ``scheduler``."""
    distributed = require_dask()
    if not tasks:
        return
    cluster = local_cluster(workers) if scheduler is None else None
    try:
        client = distributed.Client(cluster if cluster is not None else scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        raise DmlEpError(f"cannot reach the Dask scheduler {scheduler}: {one_line(exc)}") from None
    try:
        progress.dashboard(client.dashboard_link)
        _DaskRun(distributed, client, tasks, record, timeout, progress).run()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def local_cluster(workers: int | None = None):
    """The embedded cluster: ``workers`` single-threaded worker processes (default: one per core),
    every listener (scheduler, workers, nannies, the dashboard) on the loopback interface only: the
    dashboard has no authentication, and nothing else needs to reach them."""
    distributed = require_dask()
    # the workers' logs silenced but for the critical: every task's end is recorded from its future, and a worker's heartbeat
    # cut short by the cluster closing logged a traceback on a slow (emulated) machine
    with warnings.catch_warnings():  # the dashboard's port taken (another cluster): it takes another, which progress shows
        warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
        return distributed.LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                                        silence_logs=logging.CRITICAL, host=LOOPBACK, dashboard_address=f"{LOOPBACK}:8787")


def check_scheduler(address: str, timeout: float | None = None) -> None:
    """Fail in one line, within ``timeout`` seconds (default :data:`CONNECT_TIMEOUT`), where
    ``address`` is not a Dask scheduler that answers: a bad address, nothing listening, or a
    listener that never answers (distributed's handshake has no time limit of its own: it would
    wait for ever). The handshake runs on a thread of its own, its event loop apart from any other."""
    limit = CONNECT_TIMEOUT if timeout is None else timeout
    distributed = require_dask()
    failed: list[Exception] = []

    async def handshake() -> None:
        comm = await distributed.comm.connect(address, timeout=limit)
        await comm.close()

    def attempt() -> None:
        try:
            asyncio.run(asyncio.wait_for(handshake(), limit))
        except Exception as exc:  # noqa: BLE001  any failure to reach it is said, in one line
            failed.append(exc)

    thread = threading.Thread(target=attempt, name="dml-ep-scheduler-check", daemon=True)
    thread.start()
    thread.join(limit + 5)
    if thread.is_alive() or failed:
        reason = one_line(failed[0]) if failed and str(failed[0]) else f"no answer within {limit:g} s"
        raise DmlEpError(f"cannot reach the Dask scheduler {address}: {reason}")


def _on_worker(task: SweepTask) -> dict:
    """A task on its Dask worker, after saying where and when it started (:data:`EVENT_TOPIC`)."""
    worker = require_dask().get_worker()
    worker.log_event(EVENT_TOPIC, {"key": task.key, "worker": worker.address, "started": time.time()})
    return run_task(task)


class _DaskRun:
    """One sweep's futures on a Dask client: each result recorded as it comes, timeouts enforced."""

    POLL = 0.2  # seconds between looks at the timeouts and the progress when no result came

    def __init__(self, distributed, client, tasks: list[SweepTask], record: Callable[[dict], None], timeout: float | None,
                 progress: SweepProgress):
        self.distributed, self.client, self.record, self.timeout, self.progress = distributed, client, record, timeout, progress
        self.tasks = {f"dml-ep-sweep-{task.key}": task for task in tasks}
        self.started_at: dict[str, tuple[str, float]] = {}  # Dask key -> (worker, started), from the tasks' events
        self.lock = threading.Lock()
        self.threads, self.threads_seen = 0, float("-inf")

    def _started(self, event) -> None:
        _, message = event
        with self.lock:
            self.started_at[f"dml-ep-sweep-{message['key']}"] = (message["worker"], message["started"])

    def run(self) -> None:
        self.client.subscribe_topic(EVENT_TOPIC, self._started)
        # the largest models first (Dask runs tasks in the order given): a long task left for last would run alone
        largest_first = sorted(self.tasks.items(), key=lambda item: -_model_size(item[1].model))
        futures = [self.client.submit(_on_worker, task, key=key, pure=False) for key, task in largest_first]
        pending = {future.key: future for future in futures}
        completed = self.distributed.as_completed(futures)
        while pending:
            batch = completed.next_batch(block=False)
            for future in batch:
                if future.status in AGAIN:  # done, then its result lost with its worker: Dask computes it again
                    completed.add(future)
                elif pending.pop(future.key, None) is not None:
                    self._finished(future)
            for key in self._timed_out(pending):
                pending.pop(key).cancel()
            self.progress.running(min(len(pending), self._threads()))
            if not batch:
                time.sleep(self.POLL)

    def _threads(self) -> int:
        """The cluster's worker threads (a task runs on each while enough are pending), looked up every few seconds."""
        now = time.monotonic()
        if now - self.threads_seen > 2.0:
            self.threads, self.threads_seen = sum(self.client.nthreads().values()), now
        return self.threads

    def _finished(self, future) -> None:
        task = self.tasks[future.key]
        with self.lock:
            _, started = self.started_at.pop(future.key, (None, None))
        try:
            row = future.result()  # waits where the result was lost since (its worker died): Dask computes it again
        except self.distributed.KilledWorker as error:
            row = failed_row(task, f"the worker running it died, {self._allowed_failures() + 1} time(s) ({error})", started)
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001  the task failed, not the sweep
            row = failed_row(task, f"Dask: {type(error).__name__}: {' '.join(str(error).split())}", started)
        self.record(row)
        self.progress.finished(row)

    def _allowed_failures(self) -> int:
        dask = import_extra("dask", "dml-ep sweep on a cluster", "sweep")
        return int(dask.config.get("distributed.scheduler.allowed-failures"))

    def _timed_out(self, pending: dict) -> list[str]:
        """The keys of the tasks running past the timeout, each recorded as failed and its worker
        restarted (which stops it)."""
        if not self.timeout:
            return []
        now = time.time()
        with self.lock:
            late = [(key, worker, started) for key, (worker, started) in self.started_at.items()
                    if key in pending and now - started > self.timeout]
            for key, _, _ in late:
                del self.started_at[key]
        for key, worker, started in late:
            row = failed_row(self.tasks[key], f"timed out after {self.timeout:g} s on worker {worker}", started)
            self.record(row)
            self.progress.finished(row)
        workers = sorted({worker for _, worker, _ in late})
        if workers:
            for key, _, _ in late:
                pending[key].cancel()
            self.client.restart_workers(workers, raise_for_error=False)
        return [key for key, _, _ in late]


def _model_size(path: str) -> int:
    """A model file's size, the guess of how long its task takes (a model zoo directory's: 0)."""
    return os.path.getsize(path) if os.path.isfile(path) else 0


class SweepProgress:
    """A sweep's progress on stderr: on a terminal, rich's bar (done of total, failed, running,
    rate, time left); elsewhere a line per finished task. Tasks done before (skipped) are said once."""

    def __init__(self, total: int, skipped: int, enabled: bool = True):
        self.total, self.enabled = total, enabled
        self.done = self.failed = self.now_running = 0
        self.began = time.monotonic()
        self.console = rich.console.Console(stderr=True)
        self.bar: rich.progress.Progress | None = None
        if enabled and skipped:
            self.console.print(f"{skipped} task(s) done before, in the database: skipped", highlight=False)
        if enabled and self.console.is_terminal and total:
            self.bar = rich.progress.Progress(
                rich.progress.TextColumn("sweep"), rich.progress.BarColumn(), rich.progress.MofNCompleteColumn(),
                rich.progress.TextColumn("{task.fields[counts]}"), console=self.console, transient=True)
            self.task = self.bar.add_task("sweep", total=total, counts="")
            self.bar.start()

    def dashboard(self, link: str | None) -> None:
        if self.enabled and link:
            self.console.print(f"Dask dashboard: {link}", highlight=False, soft_wrap=True)

    def started(self) -> None:
        self.running(1)

    def running(self, count: int) -> None:
        self.now_running = count
        self._draw()

    def finished(self, row: dict) -> None:
        self.done += 1
        self.now_running = max(self.now_running - 1, 0)
        self.failed += row["status"] == "failed"
        if self.enabled and self.bar is None:
            what = row["reason"] if row["status"] == "failed" else _result(row)
            print(f"[{self.done}/{self.total}] {_task_name(row)}: {what} ({row['seconds']:.1f} s); {self._counts()}",
                  file=sys.stderr, flush=True)
        self._draw()

    def _counts(self) -> str:
        elapsed = time.monotonic() - self.began
        rate = self.done / elapsed * 60 if elapsed > 0 else 0.0
        left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left" if self.done and self.done < self.total else ""
        return f"{self.failed} failed, {self.now_running} running, {rate:.1f} tasks/min{left}"

    def _draw(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, counts=self._counts())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def rows_text(rows: list[dict]) -> str:
    """A sweep's rows as a table, then the count of each status."""
    table_rows = []
    for row in rows:
        exact = "-" if row["exact_percent"] is None else f"{row['exact_percent']:.2f}"
        diff = "-" if row["max_diff"] is None else f"{row['max_diff']:g} {row['max_diff_unit']}"
        macs = "-" if row["dml_macs_percent"] is None else f"{row['dml_macs_percent']:.1f}%"
        said = row["reason"] if row["status"] == "failed" else counts_text(row["causes"])
        table_rows.append([shown_path(row["model"]), row["arithmetic"], row["ort_release"], row["feature_level"],
                           row["status"] + (" (plan)" if row["mode"] == "plan" else ""), exact, diff, macs, said or ""])
    header = ["model", "arithmetic", "ort", "FL", "status", "exact %", "max diff", "MACs on DML", "causes / reason"]
    counts = collections.Counter(row["status"] for row in rows)
    total = f"{len(rows)} task(s): " + ", ".join(f"{counts[status]} {status}" for status in STATUSES if counts[status])
    return table(header, table_rows, right={5, 6, 7}) + "\n" + total


def _task_name(row: dict) -> str:
    return f"{shown_path(row['model'])} ({settings_label(row)})"


def shown_path(path: str) -> str:
    """A model's path as given from here: relative when below the current directory."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def settings_label(row: dict) -> str:
    """A row's settings on one line: the ones a sweep varies, then inspect's plan if so."""
    label = f"{row['arithmetic']}, ort {row['ort_release']}, FL {row['feature_level']}"
    return label + (", plan only" if row["mode"] == "plan" else "")


def _result(row: dict) -> str:
    if row["status"] == "planned":
        return f"planned, {row['dml_macs_percent']:.1f}% of MACs on DirectML"
    if row["exact_percent"] is None:
        return row["status"]
    return f"{row['status']}, {row['exact_percent']:.2f}% exact"
