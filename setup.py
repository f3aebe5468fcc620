"""The compiled kernels (``dml_ep/numerics/kernels/compiled/*.pyx``), built with Cython; the rest of the
package is in pyproject.toml.

They are optional: where no C compiler is found the install goes on without them, and dml_ep runs
their numpy twins (``dml_ep.numerics.kernels.compiled`` says why). Floating-point contraction is off, so a
compiler that may fuse ``a * b + c`` into one FMA (any on ARM64, or x86-64-v3) cannot change a
rounding the twins do in two steps; ``-fno-trapping-math`` lets it evaluate both sides of a select,
which changes no value.

On x86-64 the kernels whose loops gain from wider vectors are also built for the x86-64-v3 (AVX2)
and v4 (AVX-512) levels, as modules of their own (``<name>_x86_64_v3``), each from a stub that
includes the kernel's source; dml_ep loads the highest level the CPU has. IEEE arithmetic gives
the same bits at every width.
"""

import os
import platform
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCES = Path("dml_ep/numerics/kernels/compiled")
FLAGS = {"msvc": ["/O2", "/fp:precise"]}
OTHER_FLAGS = ["-O3", "-ffp-contract=off", "-fno-trapping-math"]
WIDER = ("direct_convolution", "quantize", "quantized_add", "requantize", "scale_bias", "sgemm")  # measured: 1.3-2.3x faster on AVX-512
LEVELS = {"x86_64_v3": "-march=x86-64-v3", "x86_64_v4": "-march=x86-64-v4"}
# Every module's Cython directives, here alone: a level's stub includes its kernel's source, where a
# "# cython:" header line would not apply. Indices are checked by the callers, not per element.
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False, "cdivision": True, "initializedcheck": False}


class BuildExt(build_ext):
    """Each compiler's optimisation and strict floating-point flags; the x86-64 levels' modules
    only where the compiler takes ``-march`` (not MSVC)."""

    def finalize_options(self):
        super().finalize_options()
        self.parallel = self.parallel or os.cpu_count()  # the modules compile independently

    def build_extensions(self):
        compiler = self.compiler.compiler_type
        if compiler == "msvc":
            self.extensions = [extension for extension in self.extensions if not extension.name.endswith(tuple(LEVELS))]
        for extension in self.extensions:
            level = next((level for level in LEVELS if extension.name.endswith(level)), None)
            extension.extra_compile_args = FLAGS.get(compiler, OTHER_FLAGS) + ([LEVELS[level]] if level else [])
        super().build_extensions()


def level_stub(stem: str, level: str) -> Path:
    """A source of the kernel ``stem`` for ``level``: one line including the kernel's own."""
    stub = Path("build", "dml_ep_levels", f"{stem}_{level}.pyx")
    stub.parent.mkdir(parents=True, exist_ok=True)
    text = f'include "{(SOURCES / f"{stem}.pyx").resolve().as_posix()}"\n'
    if not stub.exists() or stub.read_text() != text:
        stub.write_text(text)
    return stub


# Every module: the kernels' C headers found and tracked (a changed header rebuilds), and optional.
SHARED = dict(include_dirs=[str(SOURCES)], depends=[str(header) for header in SOURCES.glob("*.h")], optional=True)
extensions = [Extension(f"dml_ep.numerics.kernels.compiled.{source.stem}", [str(source)], **SHARED) for source in sorted(SOURCES.glob("*.pyx"))]
if platform.machine().lower() in ("x86_64", "amd64"):
    extensions += [Extension(f"dml_ep.numerics.kernels.compiled.{stem}_{level}", [str(level_stub(stem, level))], **SHARED)
                   for stem in WIDER for level in LEVELS]
setup(ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES), cmdclass={"build_ext": BuildExt})
