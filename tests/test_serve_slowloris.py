"""Connections that never finish their request (slowloris, or a body that never ends) cannot hold a
real `selfrag serve` process: its header deadline closes them, and past a bound the oldest unfinished
one makes room, so a real request still gets its answer (real sockets against a real process with a
256-file limit)."""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from .test_serve_cli import REPO

pytestmark = pytest.mark.server
PARTIAL = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # headers that never end


class Serve:
    """`python -m selfrag serve ARGS --port 0` with at most ``files`` open files (256, as in the report)."""

    def __init__(self, log, *args: str, files: int = 256) -> None:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "selfrag", "serve", *args, "--port", "0"],
                                         stderr=err, stdout=subprocess.DEVNULL, preexec_fn=limit,
                                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        deadline = time.monotonic() + 120
        while not (match := re.search(r"serving on http://[^:]+:(\d+)", log.read_text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"selfrag serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _open_partial(port: int, n: int) -> list[socket.socket]:
    held = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(PARTIAL)
        except OSError:
            s.close()
            continue
        held.append(s)
    return held


@pytest.mark.parametrize("remote", [False, True], ids=["local", "0.0.0.0-with-key"])
def test_300_unfinished_requests_do_not_keep_a_real_request_out(tmp_path, remote):
    args = ["--runs", str(tmp_path)]
    headers = {}
    if remote:
        args += ["--host", "0.0.0.0", "--api-key", "k-slow-123"]
        headers = {"authorization": "Bearer k-slow-123"}
    server = Serve(tmp_path / "serve.log", *args)
    port = server.port
    held = []
    try:
        held = _open_partial(port, 300)
        started = time.monotonic()
        r = httpx.get(server.url + "/health", headers=headers, timeout=20)
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["status"] == "ok"
        assert took < 10, f"a real request waited {took:.1f} s behind 300 unfinished ones"
        # The server still answers once they are all gone, and said nothing alarming.
        for s in held:
            s.close()
        held = []
        assert httpx.get(server.url + "/health", headers=headers, timeout=20).status_code == 200
    finally:
        for s in held:
            s.close()
        server.close()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing ``sock`` (b"" for a bare close); None if still open after ``seconds``."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return got


def test_unfinished_headers_are_closed_after_the_header_timeout(tmp_path):
    server = Serve(tmp_path / "serve.log", "--runs", str(tmp_path), "--header-timeout", "1")
    try:
        port = server.port
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)  # connects and sends nothing
        partial = _open_partial(port, 1)[0]
        # One byte a second: each byte does not buy more time.
        drip = socket.create_connection(("127.0.0.1", port), timeout=5)
        started = time.monotonic()
        for byte in PARTIAL[:6]:  # 2.4 s, past the deadline: the server may have closed it already
            try:
                drip.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.4)
        for sock in (silent, partial, drip):
            got = _closed_within(sock, 15)
            assert got is not None, "a connection without complete headers is still open"
            assert got == b"" or got.startswith(b"HTTP/1.1 408 "), got
            sock.close()
        assert time.monotonic() - started < 15
        # A finished request on a kept-alive connection, then unfinished headers on it: closed too.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as kept:
            kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert kept.recv(4096).startswith(b"HTTP/1.1 200 ")
            kept.sendall(PARTIAL)
            assert _closed_within(kept, 15) is not None
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
    finally:
        server.close()
    assert "Traceback" not in server.log.read_text()


SLOW_BODY = (b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Content-Length: 1000\r\n\r\n{\"question\": \"x")  # a body that stops after 15 bytes


def _flood(port: int, stop: threading.Event, threads: int = 8, per_thread: int = 75) -> None:
    """Open connections that send SLOW_BODY and nothing more, from several threads, keeping at most
    ``per_thread`` open each (the oldest closed for a new one), until ``stop``."""
    def worker() -> None:
        held: list[socket.socket] = []
        while not stop.is_set():
            s = socket.socket()
            s.settimeout(3)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(SLOW_BODY)
                held.append(s)
            except OSError:
                s.close()
            if len(held) > per_thread:
                held.pop(0).close()
            time.sleep(0.005)
        for s in held:
            s.close()

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    stop.wait()
    for w in workers:
        w.join(timeout=10)


def test_a_flood_of_bodies_that_never_end_does_not_keep_a_real_question_out(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"id": "d", "text": "Paris is the capital of France."}\n')
    (tmp_path / "script.json").write_text('{"capital": "Paris"}')
    server = Serve(tmp_path / "serve.log", "--docs", str(tmp_path / "docs.jsonl"), "--method", "vanilla_rag",
                   "--llm", f"scripted:{tmp_path / 'script.json'}")
    stop = threading.Event()
    flood = threading.Thread(target=_flood, args=(server.port, stop), daemon=True)
    try:
        flood.start()
        time.sleep(3)  # the flood is under way: the old server had run out of files by now, for 30 s
        started = time.monotonic()
        r = httpx.post(server.url + "/v1/ask", json={"question": "What is the capital?"}, timeout=25)
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["answer"] == "Paris"
        assert took < 10, f"a real question waited {took:.1f} s behind bodies that never end"
    finally:
        stop.set()
        flood.join(timeout=20)
        server.close()
    assert "Traceback" not in server.log.read_text()


def test_a_client_that_reads_none_of_a_large_reply_is_disconnected(tmp_path):
    run = tmp_path / "runs" / "wide"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("experiment: {name: wide}\n")
    row = {"question": "Who wrote this book? " * 10, "gold": ["An author"], "prediction": "An author",
           "metrics": {"em": 1.0, "f1": 1.0}, "accounting": {"latency_ms": 12.0}}
    (run / "predictions.jsonl").write_text("".join(json.dumps({"id": f"q{i}", **row}) + "\n" for i in range(40000)))
    server = Serve(tmp_path / "serve.log", "--runs", str(tmp_path / "runs"), "--send-timeout", "1")
    try:
        whole = len(httpx.get(server.url + "/v1/runs/table", params={"run": "wide"}, timeout=120).content)
        assert whole > 8_000_000  # more than the kernel's buffers hold for a client that does not read
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /v1/runs/table?run=wide HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            time.sleep(5)  # reads nothing, well past --send-timeout
            sock.settimeout(10)
            got = 0
            try:
                while chunk := sock.recv(65536):
                    got += len(chunk)
            except ConnectionResetError:
                pass
        assert got < whole, "the server kept the whole reply for a client that read none of it"
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
    finally:
        server.close()
    assert "Traceback" not in server.log.read_text()
