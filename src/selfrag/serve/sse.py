"""Server-sent events: framing, keep-alive while a method works, and a stream that holds a slot."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

# A comment line: clients ignore it; proxies see the connection is alive.
PING = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def event(data: Any, name: str | None = None) -> bytes:
    """One event; ``data`` as compact JSON on one line.

    Text that UTF-8 cannot carry (a lone surrogate from a model's output) is
    sent as a JSON escape rather than cutting the stream.
    """
    head = f"event: {name}\n" if name else ""
    line = f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"
    try:
        return line.encode()
    except UnicodeEncodeError:
        return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def pieces(text: str) -> list[str]:
    """``text`` cut into words, each with the spaces after it ("".join gives ``text`` back)."""
    return re.findall(r"\s+|\S+\s*", text) if text else []


class SlotStream(StreamingResponse):
    """An event stream that calls ``release`` once when it ends, however it ends.

    A question's slot is taken before the response starts (so a full server
    answers 429, not a stream); this gives it back even if the client went
    away before the first byte.
    """

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=STREAM_HEADERS)
        self._release = release
        self._released = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self._released:
                self._released = True
                self._release()
