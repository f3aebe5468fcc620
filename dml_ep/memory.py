"""Memory the C++ libraries dml_ep calls free, handed back to the system."""

from __future__ import annotations

import ctypes


def release_freed_memory() -> None:
    """Hand the memory a C++ library just freed (onnxruntime's graph, onnx's checker and inference)
    back to the system. glibc keeps it in its heap, where Python's objects, allocated from arenas
    Python maps itself, never reuse it: a 10,000-node model's load left 30 MB on top of everything
    planned after it. A no-op where the C library has no ``malloc_trim``."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _find_malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own symbols, the C library's among them
    except (OSError, TypeError, AttributeError):  # not glibc (musl, macOS), or no such handle (Windows)
        return None


_malloc_trim = _find_malloc_trim()
