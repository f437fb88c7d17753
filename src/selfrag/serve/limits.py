"""Bounds on requests: body size, JSON shape, question length, questions in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.requests import ClientDisconnect, Request

from ..validation import load_json, lone_surrogate
from .errors import ApiError
from .settings import Limits

log = logging.getLogger("selfrag.serve")
_JSON_NAMES = {type(None): "null", str: "a string", list: "an array", int: "a number", float: "a number", bool: "a boolean"}


class Gate:
    """At most ``capacity`` questions at once; one more is refused with 429 at once, never queued."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_flight = 0
        self.refused = 0

    @property
    def full(self) -> bool:
        return self.in_flight >= self.capacity

    def enter(self) -> None:
        # One event loop, no await between the test and the increment: no lock needed.
        if self.full:
            self.refused += 1
            raise ApiError(
                429,
                f"the server is answering {self.in_flight} questions, its limit (--max-concurrent); try again shortly",
                code="too_many_requests",
                headers={"Retry-After": "1"},
            )
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1

    @contextmanager
    def slot(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()


async def read_json(request: Request, limits: Limits) -> dict[str, Any]:
    """The request's JSON object, refusing other content types, oversized bodies, bodies that take
    longer than ``limits.body_timeout_s`` to arrive, and bad JSON.

    Requiring ``application/json`` also keeps other web sites out: a browser
    sends that type across sites only after asking (CORS), which this server
    never allows.
    """
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, "send the body as JSON with 'Content-Type: application/json'", code="unsupported_media_type")
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    raise ApiError(413, f"the request body is over the limit of {limits.max_body_bytes} bytes",
                                   code="body_too_large")
    except ClientDisconnect:
        # Nobody is left to answer: one line in the log, no traceback (the reply goes nowhere).
        log.info("the client left while sending its request body (%s %s, %d bytes read)",
                 request.method, request.url.path, len(body))
        raise ApiError(400, "the client left while sending the body", code="client_disconnected") from None
    except TimeoutError:
        log.info("a request body was not complete after %g s (%s %s, %d bytes read); refused",
                 limits.body_timeout_s, request.method, request.url.path, len(body))
        raise ApiError(408, f"the request body did not arrive within {limits.body_timeout_s:g} s (--body-timeout)",
                       code="body_timeout") from None
    try:
        data = load_json(bytes(body))
    except ValueError as exc:  # not UTF-8, not JSON, or JSON Python will not read (an integer of 5,000 digits)
        reason = getattr(exc, "msg", None) or ("not UTF-8" if isinstance(exc, UnicodeDecodeError) else _why(exc))
        raise ApiError(400, f"the body is not valid JSON ({reason})", code="bad_json") from None
    if not isinstance(data, dict):
        kind = _JSON_NAMES.get(type(data), type(data).__name__)
        raise ApiError(400, f"the body must be a JSON object, not {kind}", code="bad_json")
    return data


def _why(exc: ValueError) -> str:
    """The first clause of a ValueError's message (Python's digit limit adds advice about sys that is
    not the client's to follow)."""
    text = str(exc).split(";", 1)[0].strip()
    return text[:200] or type(exc).__name__


def check_question(text: Any, max_chars: int, *, param: str = "question") -> str:
    if not isinstance(text, str):
        raise ApiError(400, f"'{param}' must be a string", param=param, code="bad_question")
    if not text.strip():
        raise ApiError(400, "the question is empty; give some text to answer", param=param, code="bad_question")
    if (problem := lone_surrogate(text)) is not None:
        raise ApiError(400, f"the question is not valid Unicode text ({problem})", param=param, code="bad_question")
    if len(text) > max_chars:
        raise ApiError(
            400, f"the question is {len(text)} characters; the limit is {max_chars} (--max-question-chars)",
            param=param, code="question_too_long",
        )
    return text.strip()


def flag(body: dict[str, Any], key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"'{key}' must be true or false", param=key)
    return value
