"""The compiled kernels (``dml_ep/kernels/compiled/*.pyx``), built with Cython; the rest of the
package is in pyproject.toml.

They are optional: where no C compiler is found the install goes on without them, and dml_ep runs
their numpy twins (``dml_ep.kernels.compiled`` says why). Floating-point contraction is off, so a
compiler that may fuse ``a * b + c`` into one FMA (any on ARM64) cannot change a rounding the
twins do in two steps.
"""

from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = {"msvc": ["/O2", "/fp:precise"]}
OTHER_FLAGS = ["-O3", "-ffp-contract=off", "-fno-trapping-math"]


class BuildExt(build_ext):
    """Each compiler's optimisation and strict floating-point flags."""

    def build_extensions(self):
        for extension in self.extensions:
            extension.extra_compile_args = FLAGS.get(self.compiler.compiler_type, OTHER_FLAGS)
        super().build_extensions()


sources = sorted(Path("dml_ep/kernels/compiled").glob("*.pyx"))
extensions = [Extension(f"dml_ep.kernels.compiled.{source.stem}", [str(source)], optional=True) for source in sources]
setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}), cmdclass={"build_ext": BuildExt})
