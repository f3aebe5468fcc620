"""The process's memory and collector: while dml_ep loads a model, what onnxruntime frees goes back
to the system and Python's cyclic garbage collector waits until the planning is done; while it
runs one, the memory its arrays free stays in the process for the next ones."""

from __future__ import annotations

import ctypes
import functools
import gc


def release_freed_memory() -> None:
    """Hand the memory onnxruntime just freed (a graph it loaded) back to the system. glibc keeps
    it in its heap, where Python's objects, allocated from arenas
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

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
HEAP_ARRAYS = 32 << 20  # arrays up to this size come from the heap, not from mappings of their own
KEPT_FREE = 256 << 20  # free memory at the heap's top kept for reuse, not handed back at each free


@functools.cache
def reuse_freed_memory() -> None:
    """Keep the memory that a run's arrays free in the process for the next ones (glibc's
    ``mallopt``; once per process; a no-op elsewhere). By default glibc maps each array above
    128 KB (up to 32 MB once it adapts) on its own and unmaps it when freed, or trims the heap
    each time its free top passes twice that: every kernel's temporary then costs page faults
    again, 2-3 us a page on a virtual machine, which made a 12 x 128x32x128 product take 1.9 ms
    instead of 0.45. Like onnxruntime's own arena, this keeps a run's working set; what a load
    frees still goes back (:func:`release_freed_memory`, an explicit trim)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, TypeError, AttributeError):  # not glibc, or no such handle (Windows)
        return
    mallopt(M_MMAP_THRESHOLD, HEAP_ARRAYS)
    mallopt(M_TRIM_THRESHOLD, KEPT_FREE)


def paused_gc(function):
    """``function`` with Python's cyclic garbage collector paused while it runs. Loading and
    planning a model make hundreds of thousands of small objects (protobuf wrappers, names,
    tuples), nearly none of them in cycles; each collection they trigger walks them all, and a
    full one every object of the process: 15 % of a 2,000-node session's creation, for nothing.
    Cycles made meanwhile are collected after. (Mercurial's ``util.nogc`` does the same.)"""
    @functools.wraps(function)
    def paused(*args, **kwargs):
        if not gc.isenabled():  # paused already, by a caller or by the host program
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()
    return paused
