"""What ``dml-ep --version`` says, found without importing what it names: onnxruntime, onnx (with
ml_dtypes) and numpy take most of a second or more to import, which ``--version`` alone would pay.

Versions come from the installed packages' metadata (onnxruntime's from its own build file, which
names the package that installed it: onnxruntime, onnxruntime-directml, ...), or from the module
where it is already imported; the compiled kernels' builds from their files (``dml_ep.numerics.kernels.compiled``
loads the ones this finds, but imports numpy to).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..version import __version__
from .errors import missing_runtime

COMPILED = "dml_ep.numerics.kernels.compiled"
KERNELS = ("direct_convolution", "im2col", "quantize", "quantized_add", "requantize", "scale_bias", "sgemm", "table_lookup")


def version_line() -> str:
    """``dml-ep --version``'s line: dml_ep's version, those of what decides its results, the kernels that run."""
    if missing_runtime() is not None:
        runtime = "onnxruntime not installed: pip install 'dml_ep[cpu]'; "
    else:
        runtime = f"onnxruntime {onnxruntime_version()}, "
    return f"dml-ep {__version__} ({runtime}onnx {_version('onnx')}, numpy {_version('numpy')}; {kernels_summary(*kernel_builds())})"


def onnxruntime_version() -> str:
    """``onnxruntime.__version__``, which onnxruntime reads from its build file (capi/build_and_package_info.py)."""
    if "onnxruntime" in sys.modules:
        return sys.modules["onnxruntime"].__version__
    spec = importlib.util.find_spec("onnxruntime")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    info = Path(locations[0], "capi", "build_and_package_info.py") if locations else None
    if info is None or not info.is_file():  # a build without it: onnxruntime's own answer
        return importlib.import_module("onnxruntime").__version__
    return _load("onnxruntime.capi.build_and_package_info", importlib.machinery.SourceFileLoader, info).__version__


def _version(package: str) -> str:
    module = sys.modules.get(package)
    return module.__version__ if module is not None else importlib.metadata.version(package)


@functools.lru_cache(maxsize=1)
def x86_64_levels() -> tuple[str, ...]:
    """The x86-64 levels the running CPU supports above the baseline, highest first, by the compiled
    kernels' own CPUID probe (``cpu_level``, loaded by itself: the kernels' package imports numpy)."""
    name = f"{COMPILED}.cpu_level"
    module = sys.modules.get(name)
    if module is None:
        path = _extension("cpu_level")
        if path is None:
            return ()
        module = _load(name, importlib.machinery.ExtensionFileLoader, path)
        sys.modules[name] = module  # a Cython module initialises once per process: the package's import finds it here
    level = module.x86_64_level()
    return tuple(f"x86_64_v{each}" for each in (4, 3) if each <= level)


def kernel_builds() -> tuple[dict[str, str], list[str]]:
    """Each compiled kernel's build that loads (the widest level this CPU runs, else the baseline),
    by its file; and the kernels without one."""
    levels, missing = {}, []
    for kernel in KERNELS:
        level = next((level for level in (*x86_64_levels(), "baseline")
                      if _extension(kernel if level == "baseline" else f"{kernel}_{level}")), None)
        if level is None:
            missing.append(kernel)
        else:
            levels[kernel] = level
    return levels, missing


def kernels_summary(levels: dict[str, str], missing: list[str]) -> str:
    """What runs, for ``--version`` and reports: the compiled kernels and their widest build, or
    which are missing (their numpy twins run)."""
    if missing:
        return f"compiled kernels not built: {', '.join(missing)} (their numpy twins run)"
    widest = max(levels.values(), key=lambda level: (level != "baseline", level))
    return f"compiled kernels ({widest.replace('_', '-')})"


def _extension(module: str) -> str | None:
    """The file the import system would load ``dml_ep.numerics.kernels.compiled.<module>`` from, if it is an extension."""
    finder = importlib.machinery.FileFinder(str(Path(__file__).parent.parent / "numerics" / "kernels" / "compiled"),
                                            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES))
    spec = finder.find_spec(f"{COMPILED}.{module}")
    return spec.origin if spec is not None else None


def _load(name: str, loader_class, path) -> ModuleType:
    """The module at ``path``, executed by itself (without its package's ``__init__``)."""
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader_class(name, str(path)))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
