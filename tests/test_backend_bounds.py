"""A call is bounded as a whole, and every retry says so: against real servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import selfrag
from selfrag.errors import BackendError
from selfrag.llm import RetryPolicy, create_backend
from selfrag.retrieval.encoders import OpenAIEmbeddingEncoder

from .helpers.servers import ScriptedHTTPServer

pytestmark = pytest.mark.server
SRC = str(Path(selfrag.__file__).resolve().parents[1])

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


# -- replies of the wrong shape or size -----------------------------------------------------------

CHAT = {"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}}


def chat_reply(**changes) -> dict:
    reply = json.loads(json.dumps(CHAT))
    for dotted, value in changes.items():
        node = reply
        *path, last = dotted.split("__")
        for part in path:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return reply


@pytest.mark.parametrize(
    ("kind", "reply", "field"),
    [
        ("openai", chat_reply(choices__0__message__content=42), "choices[0].message.content is 42, not text"),
        ("openai", chat_reply(choices__0__message__content=["Paris"]), "choices[0].message.content is ['Paris']"),
        ("openai", chat_reply(choices__0__message="Paris"), "choices[0].message is 'Paris', not an object"),
        ("openai", chat_reply(usage__prompt_tokens="many"), "usage.prompt_tokens is 'many', not a whole number"),
        ("openai", chat_reply(usage__prompt_tokens=-1), "usage.prompt_tokens is -1"),
        ("openai", chat_reply(usage__prompt_tokens=True), "usage.prompt_tokens is True"),
        ("openai", chat_reply(usage="lots"), "usage is 'lots', not an object"),
        ("openai", chat_reply(choices__0__finish_reason=7), "choices[0].finish_reason is 7"),
        ("openai", chat_reply(model=["m"]), "model is ['m'], not text"),
        ("openai-logprobs", chat_reply(choices__0__logprobs={"content": [{"token": "P", "logprob": "high"}]}),
         "choices[0].logprobs is"),
        ("openai-logprobs", chat_reply(choices__0__logprobs={"content": [{"token": "P", "top_logprobs": [
            {"token": "P", "logprob": [1]}]}]}), "choices[0].logprobs is"),
        ("openai-raw", {"choices": [{"text": 5}]}, "choices[0].text is 5, not text"),
        ("openai-raw", {"choices": [{"text": "P", "logprobs": {"tokens": ["P"], "top_logprobs": [{"P": "x"}]}}]},
         "choices[0].logprobs is"),
        ("anthropic", {"content": [{"type": "text", "text": 5}]}, "content[0].text is 5, not text"),
        ("anthropic", {"content": [3]}, "content[0] is 3, not an object"),
        ("anthropic", {"content": [{"type": "text", "text": "P"}], "usage": {"input_tokens": "x"}},
         "usage.input_tokens is 'x'"),
    ],
)
async def test_a_reply_of_the_wrong_shape_is_one_line_naming_the_field(kind, reply, field):
    with ScriptedHTTPServer(lambda path, body, headers: (200, reply, {})) as server:
        provider = "anthropic" if kind == "anthropic" else "openai"
        llm = create_backend(f"{provider}:m@{server.url}/v1", retry=RetryPolicy(max_attempts=3))
        request = "The capital of France is" if kind == "openai-raw" else HI
        with pytest.raises(BackendError) as info:
            await llm.generate(request, top_logprobs=2 if "logprobs" in kind or kind == "openai-raw" else 0)
        await llm.aclose()
        calls = len(server.requests)
    message = str(info.value)
    assert "the server's reply is malformed: " + field in message and "\n" not in message
    assert calls == 1  # the same server would answer the same way: not retried


async def test_well_formed_replies_read_as_before():
    reply = chat_reply(usage__prompt_tokens=3.0, usage__completion_tokens=None, choices__0__finish_reason=None)
    with ScriptedHTTPServer(lambda path, body, headers: (200, reply, {})) as server:
        llm = create_backend(f"openai:m@{server.url}/v1")
        gen = await llm.generate(HI)
        await llm.aclose()
    assert (gen.text, gen.prompt_tokens, gen.completion_tokens, gen.finish_reason, gen.model) == ("Paris", 3, 0, "", "m")


def selfrag_ask(url: str, cwd: Path, *extra: str) -> tuple[subprocess.CompletedProcess, int]:
    """`selfrag ask` against ``url`` in a child that reports its peak RSS (KB) on its last stderr line."""
    (cwd / "docs.jsonl").write_text('{"id": "d1", "text": "Paris is the capital of France."}\n')
    code = ("import resource, runpy, sys\nsys.argv = ['selfrag', *sys.argv[1:]]\ntry:\n"
            "    runpy.run_module('selfrag', run_name='__main__')\nfinally:\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "ask", "What is the capital?", "--docs", "docs.jsonl",
                           "--llm", f"openai:m@{url}/v1", "--method", "vanilla_rag", *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": SRC})
    lines = proc.stderr.splitlines()
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(lines[:-1])), int(lines[-1])


@pytest.mark.parametrize(("reply", "field"), [
    (chat_reply(choices__0__message__content=42), "choices[0].message.content is 42"),
    (chat_reply(usage__prompt_tokens="many"), "usage.prompt_tokens is 'many'"),
])
def test_ask_with_a_malformed_reply_is_one_line(tmp_path, reply, field):
    with ScriptedHTTPServer(lambda path, body, headers: (200, reply, {})) as server:
        proc, _ = selfrag_ask(server.url, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 0, proc.stderr
    assert field in proc.stderr


def test_serve_with_a_malformed_reply_is_a_502_not_a_500(monkeypatch):
    from selfrag.serve.background import BackgroundServer

    from .test_serve_kit import QUESTION, make_answerer, make_app

    reply = chat_reply(choices__0__message__content=42)
    with ScriptedHTTPServer(lambda path, body, headers: (200, reply, {})) as upstream:
        llm = create_backend(f"openai:m@{upstream.url}/v1", retry=RetryPolicy(max_attempts=1))
        with BackgroundServer(make_app(make_answerer(llm))) as server:
            r = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
            chat = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                              json={"model": "selfrag", "messages": [{"role": "user", "content": QUESTION}]})
    assert r.status_code == 502 and r.json()["error"]["code"] == "backend_error", r.text
    assert chat.status_code == 502


class HugeReplyServer:
    """Answers 200 with a 60 MB chat completion: declared, undeclared (read to the close) or gzipped."""

    SIZE = 60_000_000

    def __init__(self, mode: str) -> None:
        outer = self
        self.sent = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                head = b'{"choices": [{"message": {"content": "'
                tail = b'"}, "finish_reason": "stop"}]}'
                filler = b"x" * (1 << 20)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if mode == "gzip":
                    body = gzip.compress(head + b"x" * outer.SIZE + tail, compresslevel=1)
                    self.send_header("content-encoding", "gzip")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if mode == "declared":
                    self.send_header("content-length", str(len(head) + outer.SIZE + len(tail)))
                else:
                    self.send_header("connection", "close")
                self.end_headers()
                try:
                    self.wfile.write(head)
                    for _ in range(outer.SIZE // len(filler)):
                        self.wfile.write(filler)
                        outer.sent += len(filler)
                    self.wfile.write(tail)
                except OSError:
                    pass  # the client stopped reading

            def log_message(self, *args):
                pass

        Handler.protocol_version = "HTTP/1.0" if mode == "undeclared" else "HTTP/1.1"
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HugeReplyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def ordinary_ask_rss(tmp_path_factory) -> int:
    """Peak RSS (KB) of the same `selfrag ask` given a short reply: what the process itself needs here.

    It differs between machines (libraries, CPU kernels), so the bound below is relative to it."""
    with ScriptedHTTPServer(lambda path, body, headers: (200, chat_reply(), {})) as server:
        proc, rss_kb = selfrag_ask(server.url, tmp_path_factory.mktemp("ordinary"))
    assert proc.returncode == 0, proc.stderr
    return rss_kb


@pytest.mark.parametrize("mode", ["declared", "undeclared", "gzip"])
def test_a_60_mb_reply_is_refused_while_it_is_read(tmp_path, mode, ordinary_ask_rss):
    """It took 15 s and 795 MB of RSS (818 MB for 54 MB of logprobs) before."""
    with HugeReplyServer(mode) as server:
        proc, rss_kb = selfrag_ask(server.url, tmp_path, "--set", "llm.max_attempts=1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 0, proc.stderr
    assert "the server's reply is larger than 16 MiB" in proc.stderr
    # The reply is never held whole: reading stops at the 16 MiB bound (about 60 MB above an ordinary ask
    # here when gzip's output is gathered), where a whole 60 MB reply and its decoded text need over 120 MB.
    assert rss_kb - ordinary_ask_rss < 90_000, (rss_kb, ordinary_ask_rss)


async def test_a_reply_under_the_bound_is_read_whole():
    content = "Paris " * 1_500_000  # 9 MB
    with ScriptedHTTPServer(lambda path, body, headers: (200, chat_reply(choices__0__message__content=content), {})) as s:
        llm = create_backend(f"openai:m@{s.url}/v1")
        assert (await llm.generate(HI)).text == content
        await llm.aclose()


async def test_an_error_body_is_read_only_to_its_start(caplog):
    message = "overloaded " + "x" * 5_000_000

    with ScriptedHTTPServer(lambda path, body, headers: (400, {"error": {"message": message}}, {})) as server:
        llm = create_backend(f"openai:m@{server.url}/v1", retry=RetryPolicy(max_attempts=1))
        with pytest.raises(BackendError) as info:
            await llm.generate(HI)
        await llm.aclose()
    assert "HTTP 400: " in str(info.value) and len(str(info.value)) < 1000
