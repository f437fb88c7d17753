"""What a real server tells a client when the model server fails, misbehaves or the client leaves (issue 55).

Defect 5: an upstream that echoes the Authorization header must not reach the
client (a short message and an error id; the redacted body goes to the log),
and the CLI masks credentials echoed as Basic auth. Defect 6 (server side): a
question with a lone surrogate is a 400, streamed or not. Also seen: a client
that drops out mid-body is one log line, not an ERROR traceback; an aborted
non-streaming request frees its slot at once.

Every case runs against the app under a real uvicorn on 127.0.0.1 (or a real
`selfrag serve` process) and a real OpenAI-compatible fake server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import selfrag
from selfrag.llm import create_backend
from selfrag.llm.retry import RetryPolicy
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits
from tests.helpers.servers import ScriptedHTTPServer

from .test_serve_kit import QUESTION, HeldBackend, make_answerer, make_app

SRC = str(Path(selfrag.__file__).resolve().parents[1])
KEY = "echo-key-0123456789abcdef"
USER, PASSWORD = "alice", "pa55-word-xyz"
pytestmark = pytest.mark.server


def echoing(path, body, headers):
    """An upstream that refuses every call and repeats the credentials it was sent."""
    return 401, {"error": {"message": f"invalid credentials: {headers.get('authorization')}"}}, {}


def answering(text):
    def handler(path, body, headers):
        return 200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1}}, {}
    return handler


def openai_answerer(url: str, monkeypatch, **kwargs):
    monkeypatch.setenv("ECHO_KEY", KEY)
    llm = create_backend(f"openai:m@{url}/v1", api_key_env="ECHO_KEY", retry=RetryPolicy(max_attempts=1), **kwargs)
    return make_answerer(llm)


def sse_events(text: str) -> list[tuple[str, str]]:
    out, name = [], "message"
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            out.append((name, line[5:].strip()))
            name = "message"
    return out


# -- defect 5: upstream error bodies --------------------------------------------------------


def test_an_upstream_echoing_the_key_is_a_short_error_with_an_id(monkeypatch, caplog):
    with ScriptedHTTPServer(echoing) as upstream, caplog.at_level(logging.WARNING, logger="selfrag.serve"):
        with BackgroundServer(make_app(openai_answerer(upstream.url, monkeypatch))) as server:
            plain = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
            streamed = httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": True}, timeout=30)
            chat = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                              json={"model": "vanilla_rag", "messages": [{"role": "user", "content": QUESTION}]})
        assert upstream.requests[0][2]["authorization"] == f"Bearer {KEY}"  # it did see the key
    for r in (plain, streamed, chat):
        assert KEY not in r.text and "invalid credentials" not in r.text
    error = plain.json()["error"]
    assert plain.status_code == 502 and error["code"] == "backend_error"
    assert re.fullmatch(r"err_[0-9a-f]{12}", error["id"]) and error["id"] in error["message"]
    assert "HTTP 401" in error["message"]
    name, data = sse_events(streamed.text)[-1]
    assert name == "error" and '"id":"err_' in data
    assert chat.status_code == 502
    # The server log has the whole story under the id, with the key hidden.
    assert f"{error['id']}: " in caplog.text and "invalid credentials: ***" in caplog.text
    assert KEY not in caplog.text


def test_the_cli_masks_credentials_echoed_as_basic_auth(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"id": "d", "text": "Paris is the capital of France."}\n')
    with ScriptedHTTPServer(echoing) as upstream:
        url = upstream.url.replace("http://", f"http://{USER}:{PASSWORD}@")
        proc = subprocess.run(
            [sys.executable, "-m", "selfrag", "ask", QUESTION, "--docs", "docs.jsonl", "--llm", f"openai:m@{url}/v1"],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=120)
        sent = upstream.requests[0][2]["authorization"]
    encoded = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert sent == f"Basic {encoded}"
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "HTTP 401" in proc.stderr and "Basic ***" in proc.stderr
    assert encoded not in proc.stderr and PASSWORD not in proc.stderr


# -- defect 6 (server): lone surrogates ----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_question_with_a_lone_surrogate_is_400_streamed_or_not(stream):
    body = b'{"question": "x \\ud800", "stream": ' + (b"true" if stream else b"false") + b"}"
    with BackgroundServer(make_app()) as server:
        r = httpx.post(server.url + "/v1/ask", content=body, headers={"content-type": "application/json"}, timeout=30)
        chat = httpx.post(server.url + "/v1/chat/completions", headers={"content-type": "application/json"},
                          content=b'{"model": "vanilla_rag", "messages": [{"role": "user", "content": "x \\udfff"}]}')
        healthy = httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": stream}, timeout=30)
    for bad in (r, chat):
        assert bad.status_code == 400 and bad.headers["content-type"].startswith("application/json")
        assert "lone surrogate" in bad.json()["error"]["message"]
    assert healthy.status_code == 200


def test_a_model_reply_with_a_lone_surrogate_is_answered_not_cut(monkeypatch):
    with ScriptedHTTPServer(answering("Paris \ud800")) as upstream:
        server = BackgroundServer(make_app(openai_answerer(upstream.url, monkeypatch)))
        with server:
            plain = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
            streamed = httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": True}, timeout=30)
    assert plain.status_code == 200 and plain.json()["answer"] == "Paris \ufffd"
    assert sse_events(streamed.text)[-1][0] == "result"


def test_a_model_reply_nested_too_deep_is_a_502_not_a_500(monkeypatch, caplog):
    deep = "[" * 30000 + "]" * 30000
    with ScriptedHTTPServer(lambda path, body, headers: (200, deep, {})) as upstream:
        server = BackgroundServer(make_app(openai_answerer(upstream.url, monkeypatch)))
        with caplog.at_level(logging.WARNING), server:
            r = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
    assert r.status_code == 502 and r.json()["error"]["code"] == "backend_error"
    assert "nested more than 100 levels deep" in caplog.text and "Traceback" not in caplog.text
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


# -- also seen: disconnects -----------------------------------------------------------------


def in_flight(url: str) -> int:
    return httpx.get(url + "/health", timeout=10).json()["in_flight"]


def wait_for(check, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_an_aborted_non_streaming_request_frees_its_slot_at_once():
    held = HeldBackend()
    app = make_app(make_answerer(held), limits=Limits(max_concurrent=1))
    with BackgroundServer(app) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=httpx.Timeout(10, read=0.5))
        # The client gave up (its connection is closed) while the answer was still held.
        assert wait_for(lambda: in_flight(server.url) == 0 and held.waiting == 0)
        held.release.set()
        assert httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30).status_code == 200


def serve_process(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, str, Path]:
    log = tmp_path / "serve.log"
    (tmp_path / "docs.jsonl").write_text('{"id": "d", "text": "Paris is the capital of France."}\n')
    (tmp_path / "script.json").write_text('{"capital": "Paris"}')
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "selfrag", *args, "serve", "--docs", str(tmp_path / "docs.jsonl"),
             "--method", "vanilla_rag", "--llm", f"scripted:{tmp_path / 'script.json'}", "--port", "0"],
            stderr=err, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": SRC})
    deadline = time.monotonic() + 120
    while not (match := re.search(r"serving on http://127\.0\.0\.1:(\d+)", log.read_text())):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc, match.group(1), log


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_a_client_leaving_mid_body_is_one_log_line_not_a_traceback(tmp_path, verbose):
    proc, port, log = serve_process(tmp_path, *(["-v"] if verbose else []))
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as sock:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"question\": \"What is")
            time.sleep(0.3)
        time.sleep(0.5)
        ok = httpx.post(f"http://127.0.0.1:{port}/v1/ask", json={"question": "What is the capital?"}, timeout=30)
        assert ok.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    text = log.read_text()
    assert "Traceback" not in text and "ERROR" not in text and "ClientDisconnect" not in text, text
    left = [line for line in text.splitlines() if "left while sending" in line]
    assert len(left) == (1 if verbose else 0), text
