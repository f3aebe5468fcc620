"""Records, while a test runs, each comparison it makes with the host's onnxruntime: the test's
references, which tests/conftest.py requires to be marked ``host_sensitive`` (scripts/qemu_tests.sh
runs those on emulated CPUs).

A test compares with the host's onnxruntime when, in its process or in a child process it starts,
- dml_ep computes a reference (``dml_ep.conformance.compare.run_reference``: ``dml-ep compare``, ``sweep``,
  ``compare_model`` and every helper over them, the CLI's default reference among them);
- an onnxruntime session is made by code that is neither dml_ep's nor onnxruntime's nor the model
  builders' (scripts/): the test's own (``dml_ep.ort.reference.cpu_session`` called from a test
  helper too), Polygraphy's ``--onnxrt`` runner, ``python -c`` code;
- such code reads the host's saturation (``dml_ep.numerics.arithmetic.host_saturates_u8s8``).
dml_ep's own sessions (fallback partitions, the integer engine's, its probes) are not references.

Each is a line appended to the file named by DML_EP_TEST_RECORD (nothing is recorded without it).
:func:`install` patches onnxruntime's InferenceSession and dml_ep.numerics.arithmetic, now if imported, else
when first imported; tests/child_site/sitecustomize.py installs it in child processes (conftest puts
the folder on their PYTHONPATH), so a test's ``dml-ep`` child is seen as well.
"""

import functools
import importlib.abc
import os
import sys
from pathlib import Path

VARIABLE = "DML_EP_TEST_RECORD"
_SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts") + os.sep
_MARK = "_dml_ep_test_record"


def record(line: str) -> None:
    path = os.environ.get(VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line.replace("\n", " ") + "\n")


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    return os.path.dirname(module.__file__) + os.sep if module is not None and getattr(module, "__file__", None) else None


def _origin(frame) -> tuple[str, str | None]:
    """Who called: ("reference", where) inside dml_ep.conformance.compare.run_reference, ("internal", None) for
    dml_ep's, onnxruntime's and scripts/ code, else ("test", file:line) for any other code."""
    dml_ep, onnxruntime = _package_dir("dml_ep"), _package_dir("onnxruntime")
    caller = None
    while frame is not None:
        path = frame.f_code.co_filename
        if dml_ep and path.startswith(dml_ep) and path.endswith("compare.py") and frame.f_code.co_name == "run_reference":
            return "reference", None
        if caller is None and not (onnxruntime and path.startswith(onnxruntime)) and not (dml_ep and path.endswith(os.sep + "reference.py") and path.startswith(dml_ep)):
            caller = frame
        frame = frame.f_back
    if caller is None:
        return "internal", None
    path = caller.f_code.co_filename
    if (dml_ep and path.startswith(dml_ep)) or path.startswith(_SCRIPTS):
        return "internal", None
    return "test", f"{path}:{caller.f_lineno}"


def _patch_sessions(module) -> None:
    cls = module.InferenceSession
    made = cls.__init__
    if getattr(made, _MARK, False):
        return

    @functools.wraps(made)
    def __init__(self, *args, **kwargs):
        try:
            origin, where = _origin(sys._getframe(1))
            if origin == "reference":
                record(f"a reference: dml_ep's onnxruntime session in compare.run_reference (pid {os.getpid()})")
            elif origin == "test":
                record(f"an onnxruntime session made by {where} (pid {os.getpid()})")
        except Exception:  # noqa: BLE001  recording never breaks the session
            pass
        made(self, *args, **kwargs)

    setattr(__init__, _MARK, True)
    cls.__init__ = __init__


def _patch_arithmetic(module) -> None:
    probe = module.host_saturates_u8s8
    if getattr(probe, _MARK, False):
        return

    @functools.wraps(probe)
    def host_saturates_u8s8():
        try:
            origin, where = _origin(sys._getframe(1))
            if origin == "test":
                record(f"the host's saturation read by {where} (pid {os.getpid()})")
        except Exception:  # noqa: BLE001
            pass
        return probe()

    host_saturates_u8s8.cache_clear = probe.cache_clear
    host_saturates_u8s8.cache_info = probe.cache_info
    setattr(host_saturates_u8s8, _MARK, True)
    module.host_saturates_u8s8 = host_saturates_u8s8


PATCHES = {"onnxruntime.capi.onnxruntime_inference_collection": _patch_sessions, "dml_ep.numerics.arithmetic": _patch_arithmetic}


class _OnImport(importlib.abc.MetaPathFinder):
    """Applies PATCHES to a module right after it is first executed."""

    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            PATCHES[name](module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Patch the modules already imported, and the others when they are (once per process)."""
    if not getattr(sys, _MARK, False):
        sys.meta_path.insert(0, _OnImport())
        setattr(sys, _MARK, True)
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
