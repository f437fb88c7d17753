"""A refused connection to this machine fails fast (one retry, one line); remote hosts keep the retry policy."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import httpx
import pytest

from selfrag.cli.main import main
from selfrag.errors import BackendError
from selfrag.llm.http import HTTPTransport, is_local_url, refused
from selfrag.llm.retry import RetryPolicy, call_with_retries


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://localhost:1/v1", "http://[::1]:9/v1",
                                 "http://127.5.5.5/v1", "https://api.localhost/v1"])
def test_local_urls(url):
    assert is_local_url(url)


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://10.0.0.1:8000/v1", "http://localhost.example.com"])
def test_remote_urls(url):
    assert not is_local_url(url)


def test_refused_is_read_from_the_cause_or_the_text():
    inner = ConnectionRefusedError(111, "Connection refused")
    outer = httpx.ConnectError("boom")
    outer.__cause__ = inner
    assert refused(outer) and refused(httpx.ConnectError("[Errno 111] Connection refused"))
    assert not refused(httpx.ConnectError("[Errno -2] Name or service not known"))


@pytest.mark.parametrize("vanilla", [True, False], ids=["vanilla_rag", "self_rag"])
def test_ask_against_a_dead_local_server_fails_in_one_line_within_two_seconds(tmp_path, capsys, vanilla):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Paris is the capital of France.")
    url = f"http://user:hunter2secret@127.0.0.1:{closed_port()}/v1"
    argv = ["ask", "capital of France?", "--docs", str(docs), "--llm", f"openai:some-model@{url}"]
    start = time.perf_counter()
    code = main(argv + (["--method", "vanilla_rag"] if vanilla else []))
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert elapsed < 2.0, elapsed
    line = lines[0]
    assert line.startswith("selfrag: error: ") and "connection refused by http://" in line
    assert f"127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}/v1" in line and "(tried 2 times)" in line
    assert "hunter2secret" not in err


def transport(url: str, handler) -> HTTPTransport:
    t = HTTPTransport(url, {}, 5.0, "openai:m")
    t._client = httpx.AsyncClient(base_url=url, transport=httpx.MockTransport(handler))
    return t


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


async def attempts(url: str, policy: RetryPolicy) -> tuple[int, BackendError]:
    count = 0
    t = transport(url, refuse)

    async def call():
        nonlocal count
        count += 1
        return await t.post_json("/chat/completions", {})

    async def no_wait(_seconds: float) -> None:
        return None

    with pytest.raises(BackendError) as info:
        await call_with_retries(call, policy=policy, label="openai:m", sleep=no_wait)
    await t.aclose()
    return count, info.value


def test_a_local_refusal_is_retried_once_and_a_remote_one_by_the_policy(caplog):
    policy = RetryPolicy(max_attempts=5)
    with caplog.at_level(logging.INFO, logger="selfrag.llm.retry"):
        count, error = asyncio.run(attempts("http://127.0.0.1:9/v1", policy))
    assert count == 2 and "connection refused by http://127.0.0.1:9/v1" in str(error)
    assert [r.levelno for r in caplog.records] == [logging.INFO]  # the retry is not a second stderr line
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="selfrag.llm.retry"):
        count, error = asyncio.run(attempts("https://llm.example.com/v1", policy))
    assert count == 5 and "gave up after 5 attempts" in str(error) and "cannot reach" in str(error)
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 4
