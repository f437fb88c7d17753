"""`selfrag serve` as a command: its one-line refusals, and the real thing on the embedded model."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from selfrag.cli.main import main
from selfrag.data import demo_corpus_path

REPO = Path(__file__).resolve().parents[1]


def refused(capsys, *argv: str) -> str:
    code = main(["serve", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("selfrag: error: "), err
    return err


def test_one_line_refusals(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SELFRAG_API_KEY", raising=False)
    assert "--docs PATH" in refused(capsys)
    assert "--docs PATH or --index DIR" in refused(capsys, "--method", "self_rag")
    assert "not a folder" in refused(capsys, "--runs", str(tmp_path / "missing"))
    assert "--api-key" in refused(capsys, "--docs", str(demo_corpus_path()), "--host", "192.0.2.1")
    assert "max-concurrent" in refused(capsys, "--docs", str(demo_corpus_path()), "--max-concurrent", "0")
    assert "timeout" in refused(capsys, "--docs", str(demo_corpus_path()), "--timeout", "0")
    assert "header-timeout" in refused(capsys, "--runs", str(tmp_path), "--header-timeout", "0")
    assert "body-timeout" in refused(capsys, "--runs", str(tmp_path), "--body-timeout", "nan")
    assert "max-pending-connections" in refused(capsys, "--runs", str(tmp_path), "--max-pending-connections", "0")
    assert "max-run-file-mb" in refused(capsys, "--runs", str(tmp_path), "--max-run-file-mb", "0")


def test_a_port_in_use_is_one_line(capsys, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = refused(capsys, "--runs", str(tmp_path), "--port", str(port))
    assert f"cannot listen on 127.0.0.1:{port}" in err


def test_the_socket_sends_small_writes_at_once():
    import socket as s

    from selfrag.serve.sockets import listen

    sock = listen("127.0.0.1", 0)
    try:
        assert sock.getsockopt(s.IPPROTO_TCP, s.TCP_NODELAY) != 0
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
    finally:
        sock.close()


def test_the_command_builds_its_answerer_from_a_saved_index(tmp_path, capsys):
    import asyncio

    from selfrag.cli.commands.serve import _build_answerer
    from selfrag.cli.main import build_parser

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rome.txt").write_text("Rome is the capital of Italy.")
    (docs / "oslo.txt").write_text("Oslo is the capital of Norway.")
    assert main(["index", "build", "--docs", str(docs), "--out", str(tmp_path / "idx")]) == 0
    (tmp_path / "script.json").write_text(json.dumps({"capital of Italy": "Rome"}))
    args = build_parser().parse_args(["serve", "--index", str(tmp_path / "idx"), "--method", "vanilla_rag",
                                      "--llm", f"scripted:{tmp_path / 'script.json'}"])
    answerer = _build_answerer(args, timeout_s=10)
    response = asyncio.run(answerer.answer("What is the capital of Italy?", answerer.default_method))
    assert response.answer == "Rome" and response.sources[0].id == "rome"


class ServeProcess:
    """`python -m selfrag serve ARGS --port 0` in a child process; the port read from its first line.

    Its stderr goes to a file (a pipe nobody reads would fill up and stop the server).
    """

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "selfrag", "serve", *args, "--port", "0"],
                stderr=err, stdout=subprocess.DEVNULL, text=True,
                env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            )
        deadline = time.monotonic() + 180
        while not (match := re.search(r"serving on (http://127\.0\.0\.1:\d+)", log.read_text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"selfrag serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        self.url = match.group(1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.server
def test_a_runs_only_server_starts_and_stops_on_terminate(tmp_path):
    server = ServeProcess(tmp_path / "serve.log", "--runs", str(tmp_path))
    try:
        health = httpx.get(server.url + "/health", timeout=10).json()
        assert health["runs"] is True and health["answering"] is False
    finally:
        server.close()
    # uvicorn shuts down cleanly, then lets SIGTERM end the process as it would have
    # (serve keeps the default SIGTERM handler: cli/commands/serve.py OWN_SIGTERM).
    assert server.proc.returncode in (0, -15)
    assert "Traceback" not in server.log.read_text()


@pytest.mark.model
@pytest.mark.server
def test_the_embedded_model_answers_through_the_openai_client_and_the_page_stream(tmp_path):
    openai = pytest.importorskip("openai", reason="the openai client is in the `dev` extra")
    server = ServeProcess(tmp_path / "serve.log", "--docs", str(demo_corpus_path()), "--method", "vanilla_rag", "--api-key", "k-123",
                          "--top-k", "2", "--set", "llm.max_tokens=24")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="k-123", max_retries=0, timeout=120)
        question = [{"role": "user", "content": "Which planet has the Great Red Spot?"}]
        reply = client.chat.completions.create(model="vanilla_rag", messages=question)
        assert reply.choices[0].message.content.strip()
        assert reply.model_extra["selfrag"]["sources"][0]["id"] == "jupiter"
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="vanilla_rag", messages=question, stream=True)
            if c.choices
        )
        assert streamed.strip()
        # The page's own call: /v1/ask as events, progress first, the result last.
        started = time.monotonic()
        with httpx.stream("POST", server.url + "/v1/ask", timeout=120, headers={"authorization": "Bearer k-123"},
                          json={"question": "How many moons does Mars have?", "stream": True}) as r:
            names = [line[6:].strip() for line in r.iter_lines() if line.startswith("event:")]
            assert r.status_code == 200
        assert names[0] == "start" and "progress" in names and names[-1] == "result"
        assert time.monotonic() - started < 300
        page = httpx.get(server.url + "/")
        assert page.status_code == 200 and "ask-form" in page.text
    finally:
        server.close()


def test_the_serve_extra_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r"^serve = \[", text, flags=re.MULTILINE)
    data = json.dumps(text)
    assert "serve/static/" in data
