"""pymilvus says nothing while selfrag calls it: selfrag reports a failed call as one line itself.

pymilvus configures its own ``pymilvus`` logger (a stderr handler of its own,
level WARNING, not propagating), and its decorators log every failed call at
ERROR with a traceback before raising. selfrag turns that exception into one
line, so the log lines only bury it. :func:`silenced` raises the logger's
level above CRITICAL for the length of a call and then puts it back, so a
program that uses pymilvus on its own keeps its logging; calls may overlap
(searches run in threads): the level is set by the first and restored by the
last. :class:`QuietClient` wraps a ``MilvusClient`` so that every method call
runs silenced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

LOGGERS = ("pymilvus",)
_lock = threading.Lock()
_active = 0
_saved: dict[str, int] = {}


@contextmanager
def silenced() -> Iterator[None]:
    """pymilvus's own log lines are dropped inside the block."""
    global _active
    with _lock:
        if _active == 0:
            for name in LOGGERS:
                logger = logging.getLogger(name)
                _saved[name] = logger.level
                logger.setLevel(logging.CRITICAL + 1)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                for name, level in _saved.items():
                    logging.getLogger(name).setLevel(level)
                _saved.clear()


class QuietClient:
    """A ``MilvusClient`` whose method calls run :func:`silenced`; everything else passes through."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with silenced():
                return value(*args, **kwargs)

        return _named(call, value)


def _named(wrapper: Callable[..., Any], wrapped: Any) -> Callable[..., Any]:
    wrapper.__name__ = getattr(wrapped, "__name__", "call")
    wrapper.__doc__ = getattr(wrapped, "__doc__", None)
    return wrapper
