"""Request bodies meant to hurt: a number of 5,000 digits is a 400 saying so, not a 500 with a
traceback; a body that stops arriving is a 408 after --body-timeout, not a connection held for ever
(the app under a real uvicorn on 127.0.0.1, real sockets)."""

from __future__ import annotations

import json
import logging
import socket
import time

import httpx
import pytest

from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits

from .test_serve_kit import QUESTION, make_answerer, make_app

pytestmark = pytest.mark.server
HUGE = "1" * 5000  # Python refuses to read an integer of more than 4,300 digits


@pytest.fixture(scope="module")
def server():
    with BackgroundServer(make_app(make_answerer(), limits=Limits(body_timeout_s=1.0))) as s:
        yield s


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/ask", f'{{"question": "{QUESTION}", "top_k": {HUGE}}}'),
    ("/v1/ask", f'{{"question": {HUGE}}}'),
    ("/v1/chat/completions", f'{{"model": "vanilla_rag", "max_tokens": {HUGE}, '
                             f'"messages": [{{"role": "user", "content": "{QUESTION}"}}]}}'),
    ("/v1/chat/completions", f'{{"model": "vanilla_rag", "n": -{HUGE}, '
                             f'"messages": [{{"role": "user", "content": "{QUESTION}"}}]}}'),
])
def test_a_huge_integer_is_a_400_with_the_reason(server, caplog, path, body):
    with caplog.at_level(logging.INFO):
        r = httpx.post(server.url + path, content=body.encode(), headers={"content-type": "application/json"},
                       timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "bad_json" and "digits" in error["message"], error
    assert "Traceback" not in caplog.text and not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    # A float that large is a number like any other (inf is refused by the question's checks).
    ok = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
    assert ok.status_code == 200


def test_a_body_that_stops_arriving_is_a_408(server, caplog):
    port = int(server.url.rsplit(":", 1)[1])
    started = time.monotonic()
    with caplog.at_level(logging.INFO), socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"question\": \"What is")
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    took = time.monotonic() - started
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply
    assert json.loads(payload)["error"]["code"] == "body_timeout"
    assert took < 10
    assert "Traceback" not in caplog.text
