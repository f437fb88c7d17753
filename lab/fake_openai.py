"""A fake OpenAI-compatible server for the throughput and cache benchmarks.

Every ``POST /v1/chat/completions`` (and ``/v1/completions``) is answered after
a fixed delay with a short, valid completion, so the only cost of a call is
the delay and what the client itself spends. Requests are served by one thread
per connection (keep-alive HTTP/1.1), so delays of concurrent calls overlap.
The server counts requests and records when each one arrived and finished,
which gives the peak and mean number of requests in flight.

    from lab.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(delay=0.1) as server:
        spec = server.spec()            # openai:fake-model@http://127.0.0.1:PORT/v1
        ...                             # point selfrag at it
        print(server.stats())           # requests, peak_in_flight, span_s, ...

It is a helper of ``lab/throughput.py`` and ``lab/cache_replay.py``,
not a benchmark itself; it also holds what both need besides the server:
:func:`run_selfrag` (the real ``selfrag run`` in a child process, timed, with
its CPU time) and :func:`environment` (date, platform, CPUs, Python, commit).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lab.machine import machine

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = "fake-model"
DEFAULT_ANSWER = "Paris"


@dataclass(frozen=True)
class Interval:
    """One request as the server saw it (``time.perf_counter`` seconds)."""

    path: str
    start: float
    end: float


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default listen backlog (5) drops SYNs when 32 clients connect at once,
    # and a dropped SYN costs the client a one-second retransmission.
    request_queue_size = 256


class FakeOpenAIServer:
    """An OpenAI-compatible chat/completions server on 127.0.0.1 (random free port)."""

    def __init__(
        self,
        delay: float = 0.1,
        answer: str = DEFAULT_ANSWER,
        model: str = DEFAULT_MODEL,
        prompt_tokens: int = 50,
        completion_tokens: int = 2,
    ) -> None:
        self.delay = delay
        self.answer = answer
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak = 0
        self._count = 0
        self._intervals: list[Interval] = []
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-openai", daemon=True
        )
        self._started = False

    # -- life cycle ----------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._started = False
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spec(self, model: str | None = None) -> str:
        """The selfrag backend spec that points at this server."""
        return f"openai:{model or self.model}@{self.url}"

    # -- counters ------------------------------------------------------------------
    @property
    def requests(self) -> int:
        with self._lock:
            return self._count

    @property
    def peak_in_flight(self) -> int:
        with self._lock:
            return self._peak

    def reset(self) -> None:
        """Zero the counters (between runs); requests still in flight keep counting down."""
        with self._lock:
            self._count = 0
            self._peak = self._in_flight
            self._intervals = []

    def stats(self) -> dict[str, Any]:
        """Requests, peak in flight, and the span from the first arrival to the last answer.

        ``mean_in_flight`` is the busy time of all requests over that span
        (Little's law): how many calls were overlapping on average.
        """
        with self._lock:
            intervals = list(self._intervals)
            count, peak = self._count, self._peak
        out: dict[str, Any] = {
            "requests": count,
            "peak_in_flight": peak,
            "span_s": None,
            "mean_in_flight": None,
            "first_request": None,
            "last_answer": None,
        }
        if intervals:
            first = min(i.start for i in intervals)
            last = max(i.end for i in intervals)
            span = last - first
            out["first_request"] = first
            out["last_answer"] = last
            out["span_s"] = span
            busy = sum(i.end - i.start for i in intervals)
            out["mean_in_flight"] = busy / span if span > 0 else None
        return out

    def enter(self) -> float:
        """A request arrives (the handler's first step): counted; returns its start time."""
        with self._lock:
            self._count += 1
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
        return time.perf_counter()

    def leave(self, path: str, start: float) -> None:
        """A request is answered: no longer in flight, its interval recorded."""
        end = time.perf_counter()
        with self._lock:
            self._in_flight -= 1
            self._intervals.append(Interval(path, start, end))

    # -- responses -----------------------------------------------------------------
    def _usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }

    def chat_response(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.answer},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": self._usage(),
        }

    def completion_response(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"cmpl-fake-{time.monotonic_ns()}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [
                {"index": 0, "text": self.answer, "finish_reason": "stop", "logprobs": None}
            ],
            "usage": self._usage(),
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            # Headers and body go out in two writes; with Nagle's algorithm on, the body
            # waits for the client's delayed ACK (~40 ms on Linux) on every response.
            disable_nagle_algorithm = True

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path.rstrip("/") == "/v1/models":
                    self._send(
                        200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]}
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.rstrip("/")
                if path not in ("/v1/chat/completions", "/v1/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                start = outer.enter()
                try:
                    time.sleep(outer.delay)
                    if path == "/v1/chat/completions":
                        self._send(200, outer.chat_response(body))
                    else:
                        self._send(200, outer.completion_response(body))
                finally:
                    outer.leave(path, start)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler


# -- running selfrag -----------------------------------------------------------------


@dataclass
class CLIRun:
    """One finished ``selfrag run``: its timings, run directory and summary."""

    command: list[str]
    returncode: int
    wall_s: float  # the child process, start to exit
    cpu_s: float  # user + system CPU time of the child
    run_dir: Path
    summary: dict[str, Any]
    stderr: str

    def predictions(self) -> list[dict[str, Any]]:
        path = self.run_dir / "predictions.jsonl"
        if not path.is_file():
            return []
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def selfrag_command() -> list[str]:
    """``selfrag`` of the interpreter running this script (there is no ``python -m selfrag``)."""
    return [sys.executable, "-m", "selfrag.cli.main"]


def run_selfrag(
    config: str | Path,
    overrides: Sequence[str],
    output: Path,
    run_id: str,
    *,
    timeout: float = 600.0,
) -> CLIRun:
    """``selfrag run CONFIG --set ... --output OUTPUT --run-id RUN_ID`` from the repository root."""
    cmd = [
        *selfrag_command(),
        "run",
        str(config),
        "--no-progress",
        "--output",
        str(output),
        "--run-id",
        run_id,
    ]
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ)
    # The fake server is local: never route it through a proxy from the environment.
    no_proxy = ",".join(x for x in (env.get("NO_PROXY"), "127.0.0.1", "localhost") if x)
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run_dir = output / run_id
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
    return CLIRun(cmd, proc.returncode, wall, cpu, run_dir, summary, proc.stderr)


def shown_command(run: CLIRun) -> str:
    """The command line as a reader would type it (``selfrag run ...``)."""
    args = run.command[len(selfrag_command()) :]
    return " ".join(["selfrag", *args])


# -- the machine -----------------------------------------------------------------------


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment() -> dict[str, Any]:
    """Date (UTC), platform, CPU count, Python version, commit and load average."""
    return {**machine(), "load_average": load_average()}


def environment_line(env: dict[str, Any]) -> str:
    load = env.get("load_average")
    load_text = " / ".join(f"{x:.2f}" for x in load) if load else "n/a"
    return (
        f"Measured {env['date']} on {env['platform']}, {env['cpu_count']} CPUs "
        f"({env['usable_cpus']} usable), Python {env['python']}, commit {env['commit']}; "
        f"load average at start {load_text} (1 / 5 / 15 min)."
    )


def add_common_arguments(parser: argparse.ArgumentParser, results: Path) -> None:
    """``--out`` and ``--delay``, the options every fake-server benchmark takes."""
    parser.add_argument("--out", type=Path, default=results, help="report folder (default: lab/results)")
    parser.add_argument(
        "--delay", type=float, default=0.1, help="seconds the fake server takes per call (default 0.1)"
    )


if __name__ == "__main__":  # a manual smoke test: serve until Ctrl-C
    with FakeOpenAIServer() as srv:
        print(f"serving {srv.spec()} (Ctrl-C to stop)")
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            print(srv.stats())
