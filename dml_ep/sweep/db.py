"""A sweep's results in SQLite: one row per task (:func:`dml_ep.sweep.tasks.result_row`), keyed by
the task's key, so that a sweep run again on the same file skips what is done.

Each row is written in a transaction of its own, as its task ends: a sweep killed at any moment
leaves a database that holds every task finished before, whole, and no other (SQLite's journal).
The file says it is dml_ep's by its SQLite ``application_id``: a file that is not, SQLite or not,
is refused rather than written over, and so is one SQLite could only read, before any task runs.

A database is untrusted input (``dml-ep report`` reads files from anywhere), and SQLite runs what a
file's schema says (a view is a query, a trigger code): its schema must be exactly the one made
here, one table and its key's index, before anything else is read. Every statement is bounded:
temporary data stays in memory (never a growing file), schema functions are not trusted, and a
progress handler stops a statement past the time limit, or at SIGINT or SIGTERM, which are raised
again once SQLite has returned (a Python exception raised inside the handler would be lost).
Each value read is checked against its column: a damaged or crafted row is an error naming it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..core import files
from ..core.choices import DEFAULT_DB
from ..core.errors import DmlEpError
from .tasks import STATUSES

APPLICATION_ID = 0x646D6C65  # "dmle" in the SQLite header
SCHEMA_VERSION = 1  # PRAGMA user_version: the layout of the table below
JSON_COLUMNS = {"settings": dict, "causes": dict, "versions": dict, "report": dict}  # and the type each holds
COLUMNS = {
    "key": "TEXT PRIMARY KEY", "model": "TEXT NOT NULL", "mode": "TEXT NOT NULL", "arithmetic": "TEXT NOT NULL",
    "ort_release": "TEXT NOT NULL", "feature_level": "TEXT NOT NULL", "settings": "TEXT NOT NULL", "status": "TEXT NOT NULL",
    "reason": "TEXT", "exact_percent": "REAL", "max_diff": "REAL", "max_diff_unit": "TEXT", "causes": "TEXT NOT NULL",
    "dml_macs_percent": "REAL", "dml_nodes": "INTEGER", "model_nodes": "INTEGER", "started": "REAL", "finished": "REAL",
    "seconds": "REAL", "host": "TEXT", "pid": "INTEGER", "versions": "TEXT NOT NULL", "html": "TEXT", "report": "TEXT NOT NULL",
    "attempts": "INTEGER NOT NULL",
}
CREATE_TASKS = f"CREATE TABLE tasks ({', '.join(f'{name} {kind}' for name, kind in COLUMNS.items())})"
SCHEMA = {("table", "tasks", "tasks", CREATE_TASKS), ("index", "sqlite_autoindex_tasks_1", "tasks", None)}  # sqlite_master
VALUES = {"TEXT": (str,), "REAL": (float, int), "INTEGER": (int,)}  # a column's type -> the Python values it holds
CHOICES = {"status": STATUSES, "mode": ("compare", "plan")}
TIME_LIMIT = 60.0  # seconds one call may spend in SQLite, plus one per 10 MB of database: far more than a real one takes
PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between looks at the clock and the signals


class SweepDatabase:
    """The results of one or more sweeps in the SQLite file ``path``, made if missing (with
    ``readonly``, only read: it must exist). ``time_limit``: seconds each call may spend in SQLite
    (default: :data:`TIME_LIMIT`, plus one per 10 MB of file)."""

    def __init__(self, path: str, readonly: bool = False, time_limit: float | None = None):
        self.path = path
        existed = _check_file(path, readonly)
        size = os.path.getsize(path) if existed else 0
        self.time_limit = TIME_LIMIT + size / 1e7 if time_limit is None else time_limit
        self.connection = _connect(path, readonly)
        try:
            with self._bounded():
                if existed:
                    self._check_schema()
                else:
                    with self.connection:
                        self.connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                        self.connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                        self.connection.execute(CREATE_TASKS)
                if not readonly:
                    self._check_writable()
        except BaseException:
            self.connection.close()
            raise

    def __enter__(self) -> SweepDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    def finished(self, rerun_failed: bool = False) -> set[str]:
        """The keys of the tasks with a row: not to run again (failed ones are, with ``rerun_failed``)."""
        query = "SELECT key FROM tasks" + (" WHERE status != 'failed'" if rerun_failed else "")
        with self._bounded():
            return {key for (key,) in self.connection.execute(query)}

    def record(self, row: dict) -> None:
        """Write ``row`` (replacing the task's earlier one, whose attempts it counts on), in one transaction."""
        with self._bounded(), self.connection:
            before = self.connection.execute("SELECT attempts FROM tasks WHERE key = ?", (row["key"],)).fetchone()
            values = {**row, "attempts": (before[0] if before else 0) + 1}
            values.update({name: json.dumps(values[name]) for name in JSON_COLUMNS})
            names = list(COLUMNS)
            self.connection.execute(f"INSERT OR REPLACE INTO tasks ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                                    [values[name] for name in names])

    def rows(self, keys: list[str] | None = None) -> list[dict]:
        """The rows (of ``keys``, in that order; else all, by model and settings), JSON decoded."""
        found = {}
        with self._bounded():
            cursor = self.connection.execute("SELECT * FROM tasks ORDER BY model, mode, arithmetic, ort_release, feature_level, key")
            names = [column[0] for column in cursor.description]
            for values in cursor:
                row = _checked_row(dict(zip(names, values)), self.path)
                found[row["key"]] = row
        return list(found.values()) if keys is None else [found[key] for key in keys if key in found]

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        """SQLite's statements inside stop past the time limit, or at SIGINT or SIGTERM (raised again
        on leaving), and its errors say which file."""
        deadline = time.monotonic() + self.time_limit
        with _signals_held() as held:
            self.connection.set_progress_handler(lambda: bool(held) or time.monotonic() > deadline, PROGRESS_STEPS)
            try:
                yield
            except sqlite3.Error as exc:
                if time.monotonic() > deadline:
                    raise DmlEpError(f"{self.path}: stopped reading it after {self.time_limit:g} s (a damaged or crafted "
                                     "sweep database?)") from None
                raise DmlEpError(f"{self.path}: SQLite: {exc}") from None
            finally:
                self.connection.set_progress_handler(None, 0)

    def _check_schema(self) -> None:
        """The file holds dml_ep's table and nothing else (a view, a trigger: code SQLite would run)."""
        found = set(self.connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        if found != SCHEMA:
            raise DmlEpError(f"{self.path}: not a dml-ep sweep database of layout {SCHEMA_VERSION}: {self._unlike(found)}")

    def _unlike(self, found: set[tuple]) -> str:
        """How the schema ``found`` differs from :data:`SCHEMA`."""
        tasks = [kind for kind, name, _, _ in found if name == "tasks"]
        if not tasks:
            return "it has no table tasks"
        if tasks != ["table"]:
            return f"its tasks is a {tasks[0]}, not a table"
        if ("table", "tasks", "tasks", CREATE_TASKS) not in found:
            names = [name for (_, name, *_) in self.connection.execute("PRAGMA table_info(tasks)")]
            missing, extra = [n for n in COLUMNS if n not in names], [n for n in names if n not in COLUMNS]
            said = (f"lacks columns {_listed(missing)}" if missing else f"has columns dml-ep never writes: {_listed(extra)}"
                    if extra else "declares its columns otherwise")
            return f"its table tasks {said}"
        return f"it holds what dml-ep never makes: {_listed(sorted(f'{kind} {name}' for kind, name, _, _ in found - SCHEMA))}"

    def _check_writable(self) -> None:
        """Fail now, not after the work, where SQLite can only read the file (no permission, a
        read-only mount, a folder where its journal cannot be made): a write, rolled back."""
        try:
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                self.connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            finally:
                self.connection.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise DmlEpError(f"{self.path}: cannot write it ({exc}): a sweep writes each result there") from None


def database_path(db: str | None, report: str | None) -> str:
    """``sweep``'s database: ``db`` (``--db``), else beside the summary page ``report`` (with .db
    for its extension), else :data:`dml_ep.core.choices.DEFAULT_DB`."""
    return db or (os.path.splitext(report)[0] + ".db" if report else DEFAULT_DB)


def _check_file(path: str, readonly: bool) -> bool:
    """Whether ``path`` holds a database to open (else one is made there): a regular file (not a
    folder, a device, a FIFO) that is dml_ep's, in a folder where its journal can be written."""
    exists = os.path.exists(path)
    if readonly and not exists:
        raise DmlEpError(f"{path}: no such sweep database (dml-ep sweep --db makes one)")
    if exists and not os.path.isfile(path):
        raise DmlEpError(f"{path}: not a file; a sweep database is a file (give another path)")
    if not readonly:
        files.check_folder(path, os.path.dirname(os.path.abspath(path)))
    if exists and (readonly or os.path.getsize(path) > 0):
        _check_ours(path)
        return True
    return False


def _connect(path: str, readonly: bool) -> sqlite3.Connection:
    """A connection to ``path`` (read-only with ``readonly``) under the limits above."""
    try:
        if readonly:
            connection = sqlite3.connect(Path(os.path.abspath(path)).as_uri() + "?mode=ro", uri=True, timeout=60)
        else:
            connection = sqlite3.connect(path, timeout=60)
        for pragma in ("trusted_schema = OFF", "temp_store = MEMORY", "cell_size_check = ON"):
            connection.execute(f"PRAGMA {pragma}")
    except sqlite3.Error as exc:
        raise DmlEpError(f"{path}: cannot open it as a sweep database: {exc}") from None
    return connection


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """In the main thread, SIGINT and SIGTERM (those with Python handlers) noted in the list given,
    for the progress handler to stop SQLite, then raised again on leaving, to their own handlers."""
    held: list[int] = []
    in_main = threading.current_thread() is threading.main_thread()
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM) if in_main}
    previous = {number: handler for number, handler in previous.items() if callable(handler)}
    for number in previous:
        signal.signal(number, lambda signum, frame: held.append(signum))
    try:
        yield held
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for signum in held:
            signal.raise_signal(signum)


def _checked_row(row: dict, path: str) -> dict:
    """``row`` with its JSON decoded, each value what dml_ep writes in its column, or the error
    naming the task and the column."""
    for name, kind in COLUMNS.items():
        value = row[name]
        if name in JSON_COLUMNS:
            try:
                value = row[name] = json.loads(value)
            except (TypeError, ValueError):
                value = _BAD
        if not _fits(name, kind, value):
            shown = "not JSON" if value is _BAD else f"{value!r:.60}"
            raise DmlEpError(f"{path}: task {row['key']!r}: its {name} is {shown}, not what dml-ep writes there "
                             "(a damaged or crafted sweep database?)")
    return row


def _fits(name: str, kind: str, value) -> bool:
    """Whether ``value`` (JSON decoded) is one dml_ep writes in the column ``name`` of type ``kind``:
    the page and the table take it as it is (no NaN or infinity but the largest difference's)."""
    if name in JSON_COLUMNS:
        return isinstance(value, JSON_COLUMNS[name])
    if value is None:
        return "NOT NULL" not in kind and "PRIMARY" not in kind
    if not isinstance(value, VALUES[kind.split()[0]]) or value == "":
        return False
    if isinstance(value, float) and name != "max_diff":
        return math.isfinite(value)
    return name not in CHOICES or value in CHOICES[name]


_BAD = object()  # a JSON column's text that is not JSON


def _listed(names: list[str]) -> str:
    """Names (from a file: quoted) on one line, the first few."""
    return ", ".join(repr(name) for name in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _check_ours(path: str) -> None:
    """``path`` is a dml_ep sweep database, of a layout this version reads."""
    with open(path, "rb") as f:
        header = f.read(100)
    if not header.startswith(b"SQLite format 3\0") or int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        raise DmlEpError(f"{path}: not a dml-ep sweep database (give another --db, or remove it)")
    version = int.from_bytes(header[60:64], "big")
    if version != SCHEMA_VERSION:
        raise DmlEpError(f"{path}: a sweep database of layout {version}; this dml_ep reads layout {SCHEMA_VERSION}")
