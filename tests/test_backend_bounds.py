"""A call is bounded as a whole, and every retry says so: against real servers on 127.0.0.1."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from selfrag.errors import BackendError
from selfrag.llm import RetryPolicy, create_backend
from selfrag.retrieval.encoders import OpenAIEmbeddingEncoder

from .helpers.servers import ScriptedHTTPServer

pytestmark = pytest.mark.server

HI = [{"role": "user", "content": "hi"}]
REPLY = {
    "model": "fake",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


class DrippingServer:
    """Answers 200 at once, then sends its body one byte every 0.1 s for ``seconds``.

    Every single read succeeds quickly, so only a bound on the whole call stops it.
    """

    def __init__(self, seconds: float = 30.0) -> None:
        self.requests = 0
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.requests += 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(int(seconds * 10) + 2))
                self.end_headers()
                try:
                    self.wfile.write(b"{")
                    self.wfile.flush()
                    deadline = time.monotonic() + seconds
                    while time.monotonic() < deadline and not outer.stop.is_set():
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass  # the client gave up and closed the connection

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> DrippingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self._server.shutdown()
        self._server.server_close()


async def test_timeout_bounds_the_whole_call_and_a_timed_out_call_is_retried():
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    with DrippingServer(seconds=30) as server:
        llm = create_backend(f"openai:m@{server.url}/v1", timeout=1, retry=RetryPolicy(max_attempts=2))
        llm._sleep = record
        start = time.monotonic()
        with pytest.raises(BackendError) as info:
            await llm.generate(HI)
        elapsed = time.monotonic() - start
        await llm.aclose()
        requests = server.requests
    # Two attempts of about a second each, far from the 30 s the server would drip for.
    assert elapsed < 15
    assert requests == 2 and len(waits) == 1  # timing out is retryable
    message = str(info.value)
    assert "gave up after 2 attempts" in message and "no complete answer within 1 s" in message


def test_embeddings_timeout_bounds_the_whole_call():
    with DrippingServer(seconds=30) as server:
        enc = OpenAIEmbeddingEncoder("m", base_url=server.url, timeout=1, max_attempts=1)
        start = time.monotonic()
        with pytest.raises(BackendError, match="no complete answer within 1 s"):
            enc.encode(["tea"])
        assert time.monotonic() - start < 15
        enc.close()


async def test_each_retry_is_logged_at_warning_with_spec_reason_and_wait(caplog):
    state = {"n": 0}

    def flaky(path, body, headers):
        state["n"] += 1
        if state["n"] <= 2:
            return 503, {"error": {"message": "overloaded"}}, {"Retry-After": "0.2"}
        return 200, REPLY, {}

    caplog.set_level(logging.WARNING)
    with ScriptedHTTPServer(flaky) as server:
        spec = f"openai:m@{server.url.replace('http://', 'http://user:S3CRET@')}/v1"
        llm = create_backend(spec, retry=RetryPolicy(max_attempts=5))
        assert (await llm.generate(HI)).text == "Paris"
        await llm.aclose()
    lines = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(lines) == 2 and all(r.levelno == logging.WARNING for r in lines)
    first = lines[0].getMessage()
    assert first.startswith(f"openai:m@http://***@127.0.0.1:{server.url.rsplit(':', 1)[1]}/v1: attempt 1 of 5 failed")
    assert "HTTP 503: overloaded" in first and first.endswith("retrying in 0.2 s")
    assert "\n" not in first and "S3CRET" not in first


def test_embedding_retries_are_logged_too(caplog):
    state = {"n": 0}

    def flaky(path, body, headers):
        state["n"] += 1
        if state["n"] == 1:
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}
        return 200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}, {}

    caplog.set_level(logging.WARNING)
    with ScriptedHTTPServer(flaky) as server:
        enc = OpenAIEmbeddingEncoder("m", base_url=server.url)
        enc.encode(["tea"])
        enc.close()
    lines = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert lines == [f"embeddings openai:m@{server.url}: attempt 1 of 5 failed: "
                     f"embeddings openai:m@{server.url}: HTTP 429: slow down; retrying in 0.0 s"]
