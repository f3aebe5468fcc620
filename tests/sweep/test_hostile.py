"""Hostile input on the sweep's surfaces (``dml-ep sweep``, ``dml-ep report``, the summary page):
paths that name one file twice, crafted and damaged databases, a database SQLite can only read,
bad scheduler addresses and listeners that never answer, the embedded cluster's listeners, and
names that are markup. Each is refused in one line with exit status 2, before any work, leaving
what was there as it was; none runs a comparison, so each takes seconds.

Crafted databases are made here with sqlite3 as an attacker would: dml-ep's application_id and
layout in the header, then a schema and rows of their own (a NULL where a column says NOT NULL is
written through a writable schema)."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from dml_ep.cli.commands import main
from dml_ep.core.errors import DmlEpError
from dml_ep.sweep import run as sweep_run
from dml_ep.sweep.db import APPLICATION_ID, COLUMNS, SCHEMA_VERSION, SweepDatabase
from dml_ep.sweep.tasks import SweepTask, failed_row

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "mlp.onnx"
CREATE_TASKS = f"CREATE TABLE tasks ({', '.join(f'{name} {kind}' for name, kind in COLUMNS.items())})"  # as SQLite keeps it
SCRIPT = "<script>alert(1)</script>"


def refused(capsys, *argv) -> str:
    """``dml-ep argv``'s one-line error (exit status 2), its text after ``dml-ep: error:``."""
    status = main([*map(str, argv)])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dml-ep: error: "), err
    return lines[0].removeprefix("dml-ep: error: ")


def a_row(model: str = str(MODEL), reason: str = "a reason") -> dict:
    """A whole row as a sweep writes it (a failed task's: nothing compared)."""
    return failed_row(SweepTask(model), reason, started=1.0)


def real_database(path: Path, *rows: dict) -> Path:
    with SweepDatabase(str(path)) as database:
        for row in rows or (a_row(),):
            database.record(row)
    return path


def crafted(path: Path, *statements: str) -> Path:
    """A file with dml-ep's header and whatever ``statements`` make."""
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for statement in statements:
            connection.execute(statement)
    connection.close()
    return path


def with_schema(path: Path, create_tasks: str) -> None:
    """Replace the table's declaration in the file (SQLite reads it back as given)."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'tasks'", (create_tasks,))
    connection.close()


def tampered(path: Path, column: str, value) -> Path:
    """A real database whose one row holds ``value`` in ``column``, whatever its schema says: the
    column's type and constraint dropped for the write (no conversion, no NOT NULL), then put back."""
    real_database(path)
    if column != "key":  # a key may be NULL as it is (SQLite's TEXT PRIMARY KEY)
        with_schema(path, CREATE_TASKS.replace(f"{column} {COLUMNS[column]}", column))
    with sqlite3.connect(path) as connection:
        connection.execute(f"UPDATE tasks SET {column} = ?", (value,))
    connection.close()
    with_schema(path, CREATE_TASKS)
    return path


# --- one file named twice ----------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["m.onnx", "--db", "r.db", "--report", "r.db"],
    ["m.onnx", "--db", "r.db", "--report", "./sub/../r.db"],
    ["m.onnx", "--report", "v.db"],  # the database's default name: --report's, with .db
    ["m.onnx", "--db", "r.db", "--report", "link.html"],  # a symbolic link to r.db
    ["m.onnx", "--db", "r.db", "--html-dir", "r.db"],
    ["m.onnx", "--report", "pages", "--html-dir", "pages"],
    ["sub", "--db", "r.db", "--html-dir", "sub"],  # the folder of models swept
    ["m.onnx", "--db", "m.onnx"],
])
def test_a_sweep_writing_one_file_twice_is_refused_before_any_work(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    shutil.copy(MODEL, tmp_path / "m.onnx")
    shutil.copy(MODEL, tmp_path / "sub" / "m.onnx")
    os.symlink(tmp_path / "r.db", tmp_path / "link.html")
    before = sorted(p.name for p in tmp_path.iterdir())
    message = refused(capsys, "sweep", "--sequential", "--quiet", *argv)
    assert "give" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no database, no page, no folder made
    assert (tmp_path / "m.onnx").read_bytes() == MODEL.read_bytes()


def test_an_existing_database_is_never_replaced_by_the_page(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    real_database(tmp_path / "r.db")
    os.link(tmp_path / "r.db", tmp_path / "hard.html")
    before = (tmp_path / "r.db").read_bytes()
    refused(capsys, "sweep", MODEL, "--sequential", "--quiet", "--db", "r.db", "--report", "r.db")
    refused(capsys, "sweep", MODEL, "--sequential", "--quiet", "--report", "r.db")
    refused(capsys, "report", "r.db", "--html", "hard.html")
    assert (tmp_path / "r.db").read_bytes() == before


# --- crafted and damaged databases -----------------------------------------------------------


def test_a_view_that_never_ends_is_refused_unread(tmp_path, capsys):
    """Issue 58's file: 4 KB, dml-ep's header, ``tasks`` a view over an unbounded recursive query
    (SQLite ran it for minutes, its temporary file past 1.3 GB)."""
    values = {"key": "n", **{name: "'{}'" if kind.startswith("TEXT") else "0" for name, kind in list(COLUMNS.items())[1:]}}
    db = crafted(tmp_path / "view.db", "CREATE VIEW tasks AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                                      f"SELECT {', '.join(f'{value} AS {name}' for name, value in values.items())} FROM r")
    assert db.stat().st_size <= 8192
    started = time.monotonic()
    assert "its tasks is a view, not a table" in refused(capsys, "report", db)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("statements, said", [
    ([], "no table tasks"),
    (["CREATE TABLE tasks (key TEXT PRIMARY KEY, model TEXT NOT NULL)"], "lacks columns 'mode'"),
    ([CREATE_TASKS.replace(")", ", extra TEXT)")], "has columns dml-ep never writes: 'extra'"),
    ([CREATE_TASKS, "CREATE TABLE other (x)"], "never makes: 'table other'"),
    ([CREATE_TASKS, "CREATE TRIGGER t AFTER INSERT ON tasks BEGIN DELETE FROM tasks; END"], "never makes: 'trigger t'"),
    ([CREATE_TASKS, "CREATE VIEW v AS SELECT 1"], "never makes: 'view v'"),
    ([CREATE_TASKS.replace("TEXT PRIMARY KEY", "TEXT PRIMARY KEY CHECK (length(key) > 0)")], "declares its columns otherwise"),
])
def test_a_database_whose_schema_is_not_dml_eps_is_refused(tmp_path, capsys, statements, said):
    db = crafted(tmp_path / "c.db", *statements)
    message = refused(capsys, "report", db)
    assert "not a dml-ep sweep database of layout 1" in message and said in message


@pytest.mark.parametrize("column, value, said", [
    ("causes", "not JSON", "its causes is not JSON"),
    ("report", None, "its report is not JSON"),
    ("versions", "[1, 2]", "its versions is [1, 2]"),
    ("status", "pwned", "its status is 'pwned'"),
    ("exact_percent", "12", "its exact_percent is '12'"),
    ("seconds", float("inf"), "its seconds is inf"),
    ("model", None, "its model is None"),
    ("key", None, "its key is None"),
    ("attempts", None, "its attempts is None"),
])
def test_a_row_that_is_not_what_dml_ep_writes_is_refused_naming_it(tmp_path, capsys, column, value, said):
    db = tampered(tmp_path / "t.db", column, value)
    message = refused(capsys, "report", db)
    assert said in message and "damaged or crafted" in message


def test_a_damaged_file_is_refused_in_one_line(tmp_path, capsys):
    db = real_database(tmp_path / "d.db", *[a_row(f"/m{i}.onnx") for i in range(20)])
    data = bytearray(db.read_bytes())
    data[100:] = bytes(range(256)) * ((len(data) - 100) // 256) + bytes((len(data) - 100) % 256)  # all pages garbage
    db.write_bytes(bytes(data))
    refused(capsys, "report", db)
    db.write_bytes(bytes(data[:100]))  # the header alone
    refused(capsys, "report", db)


@pytest.mark.parametrize("path", ["/dev/null", "."])
def test_a_database_that_is_not_a_file_is_refused(tmp_path, monkeypatch, capsys, path):
    monkeypatch.chdir(tmp_path)
    assert "not a file" in refused(capsys, "sweep", MODEL, "--sequential", "--quiet", "--db", path)
    assert "not a file" in refused(capsys, "report", path)
    assert os.listdir(tmp_path) == []


def test_a_read_past_the_time_limit_stops(tmp_path):
    db = real_database(tmp_path / "big.db", *[a_row(f"/m{i}.onnx") for i in range(300)])
    with SweepDatabase(str(db), readonly=True) as database:
        assert len(database.rows()) == 300
    with SweepDatabase(str(db), readonly=True, time_limit=0.0) as database:
        with pytest.raises(DmlEpError, match="stopped reading it after 0 s"):
            database.rows()


UNENDING = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_read_and_is_raised_as_its_handler_says(tmp_path, number):
    """SQLite runs a statement without Python: the progress handler stops it at a signal, which is
    then raised to its handler (the CLI's raises, to exit 130 or 143): never lost, never waiting."""

    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped(signum)

    previous = signal.signal(number, stop)
    try:
        with SweepDatabase(str(real_database(tmp_path / "s.db")), readonly=True) as database:
            threading.Timer(0.3, os.kill, (os.getpid(), number)).start()
            started = time.monotonic()
            with pytest.raises(Stopped):
                with database._bounded():  # as every statement of the class runs; this one would not end
                    database.connection.execute(UNENDING).fetchall()
            assert time.monotonic() - started < 10
    finally:
        signal.signal(number, previous)


# --- a database SQLite can only read ----------------------------------------------------------


def test_a_database_sqlite_can_only_read_is_refused_before_any_task(tmp_path, monkeypatch, capsys):
    """Issue 58: exit 3 "attempt to write a readonly database" after the work, its result lost.
    The file is read-only, its folder writable, as in the report. Root writes whatever the mode:
    there SQLite opens the file read-only as it does for any other user (checked by hand as nobody)."""
    db = real_database(tmp_path / "r.db")
    os.chmod(db, 0o444)
    if os.name == "posix" and os.geteuid() == 0:
        connect = sqlite3.connect

        def read_only(database, *args, **kwargs):
            uri = database if str(database).startswith("file:") else Path(os.path.abspath(database)).as_uri() + "?mode=ro"
            return connect(uri, *args, **{**kwargs, "uri": True})

        monkeypatch.setattr(sqlite3, "connect", read_only)

    def no_task(task):
        raise AssertionError(f"a task ran: {task}")

    monkeypatch.setattr(sweep_run, "run_task", no_task)
    before = db.read_bytes()
    message = refused(capsys, "sweep", MODEL, "--sequential", "--quiet", "--db", db)
    assert message == f"{db}: cannot write it (attempt to write a readonly database): a sweep writes each result there"
    assert db.read_bytes() == before


# --- schedulers --------------------------------------------------------------------------------


@pytest.fixture
def silent_listener():
    """A TCP listener on loopback that accepts, reads and never answers; its address."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            accepted.append(connection)
            threading.Thread(target=drain, args=(connection,), daemon=True).start()

    def drain(connection: socket.socket) -> None:
        try:
            while connection.recv(65536):
                pass
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in accepted:
        connection.close()


@pytest.fixture
def http_server():
    """An HTTP server on loopback (it answers Dask's handshake with a 400 page); its address."""
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("listener", ["silent_listener", "http_server"])
def test_a_scheduler_that_never_answers_fails_within_the_time_limit(tmp_path, monkeypatch, capsys, request, listener):
    pytest.importorskip("distributed")
    address = request.getfixturevalue(listener)
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT", 2.0)
    started = time.monotonic()
    message = refused(capsys, "sweep", MODEL, "--quiet", "--db", tmp_path / "s.db", "--scheduler", address)
    assert time.monotonic() - started < 20
    assert message.startswith(f"cannot reach the Dask scheduler {address}: ")
    if listener == "silent_listener":
        assert message.endswith(": no answer within 2 s")
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("address, said", [
    ("foo://bar", "unknown address scheme 'foo'"),
    ("http://127.0.0.1:8786", "unknown address scheme 'http'"),
    ("nonsense", "missing port number"),
])
def test_a_bad_scheduler_address_is_refused_in_one_line(tmp_path, capsys, address, said):
    pytest.importorskip("distributed")
    message = refused(capsys, "sweep", MODEL, "--quiet", "--db", tmp_path / "s.db", "--scheduler", address)
    assert message.startswith(f"cannot reach the Dask scheduler {address}: ") and said in message
    assert not (tmp_path / "s.db").exists()


@pytest.mark.native_children  # the cluster's worker processes
def test_the_embedded_cluster_listens_on_loopback_only():
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("distributed")
    cluster = sweep_run.local_cluster(1)
    try:
        processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
        listening = {(c.laddr.ip, c.laddr.port) for p in processes for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN}
        dashboard = int(cluster.dashboard_link.split(":")[2].split("/")[0])
    finally:
        cluster.close()
    assert dashboard in {port for _, port in listening} and len(listening) >= 3  # the dashboard, the scheduler, a worker
    assert {ip for ip, _ in listening} == {"127.0.0.1"}, listening


# --- the summary page -------------------------------------------------------------------------


class _Page(html.parser.HTMLParser):
    """The page's title and its script elements."""

    def __init__(self):
        super().__init__()
        self.title, self.scripts, self._in = "", 0, None

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        self._in = tag

    def handle_data(self, data):
        if self._in == "title":
            self.title += data

    def handle_endtag(self, tag):
        self._in = None


def parsed_page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_the_page_title_names_the_database_once(tmp_path, capsys):
    db = real_database(tmp_path / "results.db")
    assert main(["report", str(db), "--html", str(tmp_path / "page.html")]) == 0
    assert parsed_page(tmp_path / "page.html").title == "dml_ep sweep: results.db"


def test_markup_in_names_and_reasons_is_text_on_the_page(tmp_path, capsys):
    """Names and reasons from a database reach the page as text (tests/sweep/test_page.py checks the
    same in a browser): the page holds the script elements of a plain one, and the tasks' data
    block gives the names back whole."""
    plain = real_database(tmp_path / "plain.db")
    reasons = {f"</script>{SCRIPT}<!--", SCRIPT}
    hostile = real_database(tmp_path / "hostile.db", *[a_row(f"/models/{SCRIPT}/{i}.onnx", reason) for i, reason in enumerate(reasons)])
    for db in (plain, hostile):
        assert main(["report", str(db), "--html", str(db.with_suffix(".html"))]) == 0
    text = hostile.with_suffix(".html").read_text(encoding="utf-8")
    assert parsed_page(hostile.with_suffix(".html")).scripts == parsed_page(plain.with_suffix(".html")).scripts == 2
    assert SCRIPT not in text and "<!--" not in text
    data = json.loads(text.split('<script type="application/json" id="sweep-data">')[1].split("</script>")[0])
    assert {task["reason"] for task in data["tasks"]} == reasons
    assert all(SCRIPT in task["model"] for task in data["tasks"])
