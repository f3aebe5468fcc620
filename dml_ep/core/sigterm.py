"""SIGTERM as an exception, :class:`Terminated`, so that a command stopped by it cleans up what it
was writing as on Ctrl-C: by default SIGTERM ends the process at once, leaving a partial file or a
staging folder behind."""

from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that what it was writing is cleaned up as on Ctrl-C."""


@contextlib.contextmanager
def sigterm_raises():
    """While a command runs in the main thread, SIGTERM raises :class:`Terminated`."""
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    def terminate(signum, frame):
        raise Terminated
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
