"""A sweep's results in SQLite: one row per task (:func:`dml_ep.sweep_tasks.result_row`), keyed by
the task's key, so that a sweep run again on the same file skips what is done.

Each row is written in a transaction of its own, as its task ends: a sweep killed at any moment
leaves a database that holds every task finished before, whole, and no other (SQLite's journal).
The file says it is dml_ep's by its SQLite ``application_id``: a file that is not, SQLite or not,
is refused rather than written over.
"""

from __future__ import annotations

import json
import os
import sqlite3

from .errors import DmlEpError

APPLICATION_ID = 0x646D6C65  # "dmle" in the SQLite header
SCHEMA_VERSION = 1  # PRAGMA user_version: the layout of the table below
JSON_COLUMNS = ("settings", "causes", "versions", "report")
COLUMNS = {
    "key": "TEXT PRIMARY KEY", "model": "TEXT NOT NULL", "mode": "TEXT NOT NULL", "arithmetic": "TEXT NOT NULL",
    "ort_release": "TEXT NOT NULL", "feature_level": "TEXT NOT NULL", "settings": "TEXT NOT NULL", "status": "TEXT NOT NULL",
    "reason": "TEXT", "exact_percent": "REAL", "max_diff": "REAL", "max_diff_unit": "TEXT", "causes": "TEXT NOT NULL",
    "dml_macs_percent": "REAL", "dml_nodes": "INTEGER", "model_nodes": "INTEGER", "started": "REAL", "finished": "REAL",
    "seconds": "REAL", "host": "TEXT", "pid": "INTEGER", "versions": "TEXT NOT NULL", "html": "TEXT", "report": "TEXT NOT NULL",
    "attempts": "INTEGER NOT NULL",
}


class SweepDatabase:
    """The results of one or more sweeps in the SQLite file ``path``, made if missing."""

    def __init__(self, path: str):
        self.path = path
        existed = os.path.exists(path) and os.path.getsize(path) > 0
        if existed:
            _check_ours(path)
        self.connection = sqlite3.connect(path, timeout=60)
        if not existed:
            with self.connection:
                self.connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
                self.connection.execute(f"CREATE TABLE IF NOT EXISTS tasks ({columns})")

    def __enter__(self) -> SweepDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    def finished(self, rerun_failed: bool = False) -> set[str]:
        """The keys of the tasks with a row: not to run again (failed ones are, with ``rerun_failed``)."""
        query = "SELECT key FROM tasks" + (" WHERE status != 'failed'" if rerun_failed else "")
        return {key for (key,) in self.connection.execute(query)}

    def record(self, row: dict) -> None:
        """Write ``row`` (replacing the task's earlier one, whose attempts it counts on), in one transaction."""
        with self.connection:
            before = self.connection.execute("SELECT attempts FROM tasks WHERE key = ?", (row["key"],)).fetchone()
            values = {**row, "attempts": (before[0] if before else 0) + 1}
            values.update({name: json.dumps(values[name]) for name in JSON_COLUMNS})
            names = list(COLUMNS)
            self.connection.execute(f"INSERT OR REPLACE INTO tasks ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                                    [values[name] for name in names])

    def rows(self, keys: list[str] | None = None) -> list[dict]:
        """The rows (of ``keys``, in that order; else all, by model and settings), JSON decoded."""
        cursor = self.connection.execute("SELECT * FROM tasks ORDER BY model, mode, arithmetic, ort_release, feature_level, key")
        names = [column[0] for column in cursor.description]
        found = {}
        for values in cursor:
            row = dict(zip(names, values))
            row.update({name: json.loads(row[name]) for name in JSON_COLUMNS})
            found[row["key"]] = row
        return list(found.values()) if keys is None else [found[key] for key in keys if key in found]


def _check_ours(path: str) -> None:
    """``path`` is a dml_ep sweep database, of a layout this version reads."""
    with open(path, "rb") as f:
        header = f.read(100)
    if not header.startswith(b"SQLite format 3\0") or int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        raise DmlEpError(f"{path}: not a dml-ep sweep database (give another --db, or remove it)")
    version = int.from_bytes(header[60:64], "big")
    if version != SCHEMA_VERSION:
        raise DmlEpError(f"{path}: a sweep database of layout {version}; this dml_ep reads layout {SCHEMA_VERSION}")
