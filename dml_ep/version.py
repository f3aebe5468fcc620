"""dml_ep's version, the one place it is written: pyproject.toml reads it from here, and the
package's ``__version__`` is it (a module of its own, so that the modules writing it into files
import it without importing the package's API)."""

__version__ = "0.1.0"
