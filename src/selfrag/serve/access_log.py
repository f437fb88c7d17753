"""An access log for ``selfrag serve``: one line per request on stderr (an ASGI middleware).

Each line holds the UTC time (ISO 8601, to the second, ``Z``), the method and
path in quotes, the status and the latency in milliseconds (until the
response's last byte, so a streamed answer counts whole), for example
``selfrag: <time> "POST /v1/chat/completions" 200 1843.2 ms``.

Never logged: the query string (it may carry a key or a question), any
header (Authorization above all), the body and the client's address. Control
characters in the path are escaped so a request cannot forge log lines. The
middleware sits outside the guard, so refused requests are logged too; a
request the app failed on is logged as 500, one whose client left before a
response started as ``-``.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOGGER = "selfrag.serve.access"
MAX_PATH = 200


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when the line is logged (not when the handler was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # a closed or broken stderr must not fail the request
            self.handleError(record)


def access_logger() -> logging.Logger:
    """The access logger: INFO lines on stderr, whatever the root logger's level."""
    log = logging.getLogger(LOGGER)
    log.setLevel(logging.INFO)
    log.propagate = False
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("selfrag: %(message)s"))
        log.addHandler(handler)
    return log


def safe_path(path: str) -> str:
    """The path with control characters, spaces and quotes escaped, cut to ``MAX_PATH`` characters."""
    out = "".join(c if c.isprintable() and c not in ' "' else f"%{ord(c):02X}" for c in path)
    return out if len(out) <= MAX_PATH else out[: MAX_PATH - 3] + "..."


def line(method: str, path: str, status: int | None, seconds: float, when: datetime | None = None) -> str:
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f'{stamp} "{method} {safe_path(path)}" {status if status else "-"} {seconds * 1000:.1f} ms'


class AccessLog:
    def __init__(self, app: ASGIApp, logger: logging.Logger | None = None) -> None:
        self.app = app
        self.log = logger or access_logger()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        except BaseException:
            status = status or 500
            raise
        finally:
            self.log.info(line(scope.get("method", "?"), scope.get("path", ""), status, time.perf_counter() - start))
