"""Fixtures shared by the model tests."""

import importlib.util
import multiprocessing.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnxruntime.capi import _pybind_state

from browser import launch, missing

from dml_ep.numerics import arithmetic, engines
from dml_ep.numerics.kernels import compiled as native
from dml_ep.runtime.executor import Executor
# An unmarked test comparing with the host's onnxruntime fails (tests/host_sensitivity.py).
from host_sensitivity import (pytest_configure, pytest_fixture_setup, pytest_runtest_makereport,  # noqa: F401
                              pytest_runtest_protocol, pytest_terminal_summary, pytest_unconfigure)

ROOT = Path(__file__).resolve().parent.parent
# Under scripts/qemu_tests.sh, the emulated CPU (qemu-x86_64's -cpu), which this process runs on.
QEMU_CPU = os.environ.get("DML_EP_QEMU_CPU")


def _emulated(args):
    """``args`` of a child Python (this interpreter, or a script of its environment: dml-ep,
    polygraphy) run on the emulated CPU too: qemu-user runs child processes on the real CPU."""
    if isinstance(args, (str, bytes)) or not args:
        return args
    args = list(args)
    program = os.fspath(args[0])
    resolved = shutil.which(program) or program
    executable = os.path.realpath(sys.executable)
    if os.path.realpath(resolved) == executable:
        return [shutil.which("qemu-x86_64"), "-cpu", QEMU_CPU, sys.executable, *args[1:]]
    if os.path.dirname(os.path.abspath(resolved)) == os.path.dirname(sys.executable) and os.path.isfile(resolved):
        with open(resolved, "rb") as script:
            shebang = script.readline()
        if shebang.startswith(b"#!") and b"python" in shebang:
            return [shutil.which("qemu-x86_64"), "-cpu", QEMU_CPU, sys.executable, resolved, *args[1:]]
    return args


if QEMU_CPU:
    _popen_init = subprocess.Popen.__init__

    def _popen_emulated(self, args, *rest, **options):
        _popen_init(self, _emulated(args), *rest, **options)

    subprocess.Popen.__init__ = _popen_emulated
    # multiprocessing's spawned children (a sweep's Dask workers, their resource tracker) start through spawnv_passfds
    _spawnv_passfds = multiprocessing.util.spawnv_passfds

    def _spawnv_emulated(path, args, passfds):
        if os.path.realpath(os.fsdecode(path)) == os.path.realpath(sys.executable):  # multiprocessing's is bytes
            qemu = shutil.which("qemu-x86_64")
            path, args = os.fsencode(qemu), [qemu, "-cpu", QEMU_CPU, *args]
        return _spawnv_passfds(path, args, passfds)

    multiprocessing.util.spawnv_passfds = _spawnv_emulated


@pytest.fixture(autouse=True)
def _compiled_kernels_built(request):
    """Tests marked ``compiled`` need the compiled kernels: where they were not built (no C
    compiler at install) they skip, saying so, except where DML_EP_REQUIRE_COMPILED is set (CI),
    where they fail."""
    if request.node.get_closest_marker("compiled") and native.MISSING:
        message = f"compiled kernels not built: {', '.join(native.MISSING)} (reinstall with a C compiler)"
        if os.environ.get("DML_EP_REQUIRE_COMPILED"):
            pytest.fail(message)
        pytest.skip(message)


def _make_models():
    spec = importlib.util.spec_from_file_location("make_models", ROOT / "scripts" / "make_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Models scripts/make_models.py builds, on demand, once per test session:
    ``built(name)`` is the QOperator file, ``built(name, "qdq")`` the QDQ one."""
    out = tmp_path_factory.mktemp("models")
    make_models = _make_models()
    cache = {}

    def build(name, quant_format="qoperator"):
        if (name, quant_format) not in cache:
            cache[name, quant_format] = make_models.build_models(out, [name], quant_format=quant_format)[name]
        return cache[name, quant_format]

    return build


@pytest.fixture
def break_dml_node(monkeypatch):
    """``break_dml_node(name)``: dml_ep's DML node ``name`` gives its output one step off (the
    lowest bit flipped), so that a comparison has something to find."""

    def apply(name):
        original = Executor.run_dml

        def off_by_one(self, entry, values):
            result = original(self, entry, values)
            return result ^ np.uint8(1) if entry.node.name == name else result

        monkeypatch.setattr(Executor, "run_dml", off_by_one)

    return apply


@pytest.fixture
def handed_to_onnxruntime(monkeypatch):
    """The list of models (ModelProtos) given to onnxruntime during the test: recorded where every
    session and every load-only graph (ort_inference.static_values) is made, onnxruntime's pybind
    InferenceSession.

    The probe and the engine are made once per process: their caches are emptied around the test,
    so that they are made (and recorded) again."""
    recorded = []
    made = _pybind_state.InferenceSession

    def recording(options, model, is_path, *args):
        recorded.append(onnx.load(model, load_external_data=False) if is_path else onnx.load_from_string(bytes(model)))
        return made(options, model, is_path, *args)

    monkeypatch.setattr(_pybind_state, "InferenceSession", recording)
    caches = [arithmetic.host_saturates_u8s8, engines._ENGINES["onnxruntime"]]
    for cache in caches:
        cache.cache_clear()
    yield recorded
    for cache in caches:
        cache.cache_clear()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (tests/browser.py) for one test module: the HTML reports' tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()
