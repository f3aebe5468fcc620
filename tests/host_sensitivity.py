"""Host sensitivity decided by what a test does: a test that compares with the host's onnxruntime
(child_site/host_references.py says what counts: a reference dml_ep computes, an onnxruntime session
of the test's own, the host's saturation read; in the test's process or in a child it starts) must
carry the ``host_sensitive`` mark, which scripts/qemu_tests.sh runs under emulated CPUs (onnxruntime's
uint8 x int8 GEMMs saturate on AVX2 without VNNI; its kernels and dml_ep's compiled ones differ per
x86-64 level). An unmarked one fails at teardown, naming what it compared, and the session's summary
lists them all. A test that makes references but checks none of their values says so, and why, with
``host_insensitive("why")``.

tests/conftest.py imports these hooks; tests/package/test_host_sensitive_marks.py runs them on example tests."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

CHILD_SITE = Path(__file__).resolve().parent / "child_site"
sys.path.insert(0, str(CHILD_SITE))
import host_references  # noqa: E402  (from CHILD_SITE, the module the children's sitecustomize imports)

sys.path.remove(str(CHILD_SITE))

_state: dict = {"folder": None, "count": 0, "fixtures": {}, "unmarked": []}


def pytest_configure(config):
    # Anything recorded outside a test (a pytester run's own collection) goes nowhere.
    os.environ.pop(host_references.VARIABLE, None)
    _state["folder"] = tempfile.mkdtemp(prefix="dml_ep_references_")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHILD_SITE), os.environ.get("PYTHONPATH")]))
    host_references.install()


def pytest_unconfigure(config):
    if _state["folder"]:
        shutil.rmtree(_state["folder"], ignore_errors=True)


def _records(path) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _state["count"] += 1
    os.environ[host_references.VARIABLE] = os.path.join(_state["folder"], f"{_state['count']}.txt")
    try:
        yield
    finally:
        os.environ.pop(host_references.VARIABLE, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A fixture wider than a test that compares (a module's reference values, computed once) makes
    every test using it compare too."""
    path = os.environ.get(host_references.VARIABLE)
    before = len(_records(path)) if path else 0
    yield
    if path and fixturedef.scope != "function":
        made = _records(path)[before:]
        if made:
            _state["fixtures"][fixturedef] = made


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "teardown":
        return
    report = outcome.get_result()
    path = os.environ.get(host_references.VARIABLE)
    made = _records(path) if path else []
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        for definition in definitions:
            made += [f"{line} (fixture {definition.argname})" for line in _state["fixtures"].get(definition, ())]
    exempt = item.get_closest_marker("host_insensitive")
    if exempt is not None and not (exempt.args and str(exempt.args[0]).strip()):
        report.outcome, report.longrepr = "failed", f"{item.nodeid}: host_insensitive needs its reason: host_insensitive(\"why\")"
    elif made and report.passed and not item.get_closest_marker("host_sensitive") and exempt is None:
        shown = sorted(set(made))
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} compares with the host's onnxruntime but is not marked host_sensitive: mark it "
                           "@pytest.mark.host_sensitive (or its module's pytestmark), so that scripts/qemu_tests.sh runs it on "
                           f"emulated CPUs. It made {len(made)}: " + "; ".join(shown[:5]) + (" ..." if len(shown) > 5 else ""))
        _state["unmarked"].append(item.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _state["unmarked"]:
        terminalreporter.section("unmarked host-sensitive tests")
        terminalreporter.write_line(f"{len(_state['unmarked'])} tests compare with the host's onnxruntime without the host_sensitive mark:")
        for nodeid in _state["unmarked"]:
            terminalreporter.write_line(f"  {nodeid}")
