"""Connections that never finish their request headers (slowloris) cannot hold the server.

uvicorn times out a kept-alive connection that sends nothing, but not one
that is still sending its request headers: a fresh connection that sends
nothing, or a few header bytes and then nothing, stays open for ever, and a
few hundred of them use up the process's open files, so a real request is
never accepted. :func:`server_config` runs the app with uvicorn's h11 protocol
and two bounds on a connection waiting for its headers:

* **a deadline**: its request headers must be complete ``header_timeout_s``
  seconds after the connection opens (or, on a kept-alive connection, after
  the first byte of its next request); then it gets ``408`` and is closed.
  Sending a byte now and then does not move the deadline.
* **a number**: at most ``max_pending_connections`` connections (and at most
  a quarter of the process's open-file limit) may be waiting for their
  request at once, its headers or its body still arriving (or idle between
  two requests); one more closes the one that has waited longest, so a
  flood of them (slowloris, or slow bodies) cannot use up the open files
  before a deadline frees them.

Connections are accepted in batches of at most :data:`ACCEPT_BATCH` (uvicorn's
``backlog``, also the kernel's queue of connections not yet accepted). A flood
can still run the process out of open files for a moment between batches:
asyncio then stops accepting for a second, and :func:`quiet_accept_errors`
makes that one warning line instead of a traceback per refusal.
:func:`raise_file_limit` lifts the soft open-file limit to the hard one when
the server starts, as servers commonly do, so that moment needs a far larger flood.

A client that stops reading its reply (so that the reply fills the buffers)
is disconnected after ``send_timeout_s`` without progress: an unread reply
would otherwise hold its memory, its file and its question's slot for ever.
A request's body must also arrive within ``--body-timeout``
(:func:`selfrag.serve.limits.read_json`); a request being answered is not
counted (its answer is bounded by ``--timeout`` and ``--max-concurrent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import time
from typing import Any

from .settings import Limits

log = logging.getLogger("selfrag.serve")
# What a connection whose headers did not arrive in time is told, before it is closed.
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
# Connections accepted at once (uvicorn's backlog; the listening socket's queue holds as many).
ACCEPT_BATCH = 128
# Seconds between two warnings that the process ran out of open files.
WARN_EVERY_S = 10.0
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def file_limit() -> int:
    """The process's soft limit on open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_file_limit() -> None:
    """Lift the soft open-file limit to the hard one (nothing happens when it cannot be lifted)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        with contextlib.suppress(ValueError, OSError):  # not allowed here: keep the limit as it is
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def protocol_class(limits: Limits) -> type:
    """uvicorn's h11 protocol with a header deadline and a bound on connections waiting for headers."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderBoundProtocol(H11Protocol):
        header_timeout_s = limits.header_timeout_s
        send_timeout_s = limits.send_timeout_s
        max_pending = max(1, min(limits.max_pending_connections, file_limit() // 4))

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            self._header_deadline: asyncio.TimerHandle | None = None
            self._stalled: asyncio.TimerHandle | None = None
            self._waiting_since = time.monotonic()
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()
            self._shed()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._waiting_for_headers():
                self._arm()  # armed once per request: later bytes do not move the deadline
            else:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Idle on keep-alive now (uvicorn's keep-alive timeout covers that); the next request's
            # deadline starts with its first byte.
            self._disarm()
            self._waiting_since = time.monotonic()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._unstall()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            # The client stopped reading and its reply fills the buffers: it has send_timeout_s to go on.
            super().pause_writing()
            if self._stalled is None:
                self._stalled = self.loop.call_later(self.send_timeout_s, self._reader_too_slow)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._unstall()

        def _unstall(self) -> None:
            if self._stalled is not None:
                self._stalled.cancel()
                self._stalled = None

        def _reader_too_slow(self) -> None:
            self._stalled = None
            log.info("closed a connection that read none of its reply for %g s (--send-timeout)", self.send_timeout_s)
            self.transport.abort()  # drops the reply it would not read; its question's slot is free again

        def _waiting_for_headers(self) -> bool:
            return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

        def _waiting_for_request(self) -> bool:
            """Its request's headers or body are still arriving (or it is idle between requests)."""
            return self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing()

        def _arm(self) -> None:
            if self._header_deadline is None:
                self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _headers_too_slow(self) -> None:
            self._header_deadline = None
            if self._waiting_for_headers():
                log.info("closed a connection whose request headers were not complete after %g s (--header-timeout)",
                         self.header_timeout_s)
                self._close(TIMED_OUT)

        def _close(self, reply: bytes) -> None:
            self._disarm()
            try:
                self.transport.write(reply)
            finally:
                self.transport.close()

        def _shed(self) -> None:
            """Over the bound, close the connection that has waited longest for its request."""
            waiting = [c for c in self.connections if isinstance(c, HeaderBoundProtocol) and c._waiting_for_request()]
            if len(waiting) <= self.max_pending:
                return
            oldest = min(waiting, key=lambda c: c._waiting_since)
            log.info("%d connections are waiting for their requests (--max-pending-connections %d); "
                     "closed the one that waited longest", len(waiting), self.max_pending)
            oldest._close(TIMED_OUT)

    return HeaderBoundProtocol


def server_config(app: Any, limits: Limits, **options: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the bounds above (``options``: the other Config arguments)."""
    import uvicorn

    return uvicorn.Config(app, http=protocol_class(limits), backlog=ACCEPT_BATCH, **options)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Running out of open files while accepting is one warning line (at most one per
    :data:`WARN_EVERY_S`), not asyncio's traceback per refusal; asyncio retries a second later."""
    default = loop.get_exception_handler()
    last = [float("-inf")]

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if isinstance(exc, OSError) and exc.errno in _OUT_OF_FILES and "accept" in message:
            now = time.monotonic()
            if now - last[0] >= WARN_EVERY_S:
                last[0] = now
                log.warning("out of open files (%s; the limit is %d): new connections wait a second; raise the "
                            "limit (ulimit -n) or lower --max-pending-connections", exc.strerror or exc, file_limit())
            return
        if isinstance(exc, ValueError) and "_start_serving" in message:
            return  # that retry came after the server closed its socket: nothing is left to accept
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
