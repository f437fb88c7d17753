"""SIGTERM handled like Ctrl-C, so ``kill PID`` stops a run cleanly.

Python's default for SIGTERM ends the process on the spot: a run's answers
are on disk already, but its summary would stay ``running`` and its ledger
session open. Inside :func:`sigterm_stops` the signal raises
:class:`Terminated`, a ``KeyboardInterrupt``, wherever the main thread is,
so the code that closes a run on Ctrl-C closes it on ``kill`` too.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM."""


def _raise_terminated(signum, frame):
    raise Terminated


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """Raise :class:`Terminated` on SIGTERM while the block runs (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
