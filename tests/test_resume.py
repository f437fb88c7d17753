"""Killing a real `selfrag run` process and resuming it.

The run talks to a real OpenAI-compatible HTTP server on 127.0.0.1 that
counts every request. The server answers the first questions, then holds the
next requests open; the test SIGKILLs the run while they are in flight,
resumes it in a new process, and checks that every question is answered
exactly once and that no LLM call whose answer had come back is made again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from selfrag.eval.results import read_predictions, repair_predictions

from .conftest import wait_for
from .helpers.servers import ScriptedHTTPServer

N = 10
FAST = 5  # requests answered before the server starts holding them
CONCURRENCY = 2
QUESTION = re.compile(r"capital number (\d+)\?")


class GatedServer:
    """Answers at once until ``FAST`` requests were served, then holds requests until released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.requests: list[str] = []  # question id per request, in arrival order
        self.delivered: Counter[str] = Counter()  # answers actually sent back, per question
        self.holding = True

    def __call__(self, path, body, headers):
        text = "\n".join(m["content"] for m in body.get("messages", []))
        qid = f"q{QUESTION.search(text)[1]}"
        with self.lock:
            self.requests.append(qid)
            hold = self.holding and len(self.requests) > FAST
        if hold:
            self.release.wait(60)
        else:
            with self.lock:
                self.delivered[qid] += 1
        reply = {
            "id": "x", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"City {qid}"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
        }
        return 200, reply, {}


def write_dataset(path: Path) -> None:
    rows = [
        {"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City q{i}"],
         "contexts": [f"The capital number {i} is City q{i}.", "Rivers flow to the sea."]}
        for i in range(1, N + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def selfrag(cwd: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "selfrag.cli.main", *args]


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def start_run(tmp_path: Path, server_url: str, run_id: str, env: dict[str, str], cache: bool) -> subprocess.Popen:
    """Write the experiment config and start `selfrag run` on it in a child process."""
    (tmp_path / "exp.yaml").write_text(
        f"experiment: {{name: {run_id}}}\n"
        "architecture: {name: vanilla_rag}\n"
        f"llm: {{spec: 'openai:fake@{server_url}/v1', max_attempts: 1}}\n"
        "retrieval: {top_k: 1}\n"
        "data: {dataset: jsonl, path: q.jsonl}\n"
        + ("cache: {enabled: true, path: cache.db}\n" if cache else "")
        + f"run: {{concurrency: {CONCURRENCY}}}\n"
    )
    return subprocess.Popen(
        selfrag(tmp_path, "run", "exp.yaml", "--run-id", run_id, "--no-progress"),
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.server
def test_killed_run_resumes_with_each_question_once_and_no_call_paid_twice(tmp_path):
    write_dataset(tmp_path / "q.jsonl")
    gate = GatedServer()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with ScriptedHTTPServer(gate) as server:
        run_dir = tmp_path / "results" / "k"
        predictions = run_dir / "predictions.jsonl"
        proc = start_run(tmp_path, server.url, "k", env, cache=True)
        try:
            # FAST questions answered and written, CONCURRENCY more held open by the server.
            ok = wait_for(lambda: lines(predictions) == FAST and len(gate.requests) == FAST + CONCURRENCY, 60)
            assert ok, (proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.stderr.close()
        in_flight = gate.requests[FAST:]
        assert sum(gate.delivered.values()) == FAST
        # A kill in the middle of a write leaves a torn last line.
        with predictions.open("a") as fh:
            fh.write('{"id": "q9", "question": "What is the cap')

        gate.holding = False
        gate.release.set()
        done = subprocess.run(selfrag(tmp_path, "run", "--resume", str(run_dir), "--no-progress"),
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

        records = read_predictions(predictions)
        ids = [r["id"] for r in records]
        assert sorted(ids) == sorted(f"q{i}" for i in range(1, N + 1))  # every question exactly once
        assert all(r.get("error") is None for r in records)
        assert all(r["prediction"] == f"City {r['id']}" for r in records)
        # No answer that came back was asked for again; only the held requests were repeated.
        assert all(count == 1 for count in gate.delivered.values()) and len(gate.delivered) == N
        assert Counter(gate.requests) - Counter(set(gate.requests)) == Counter(in_flight)

        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["complete"] is True and summary["n_answered"] == N and summary["n_errors"] == 0
        assert [s["finished"] is not None for s in summary["sessions"]] == [False, True]
        assert summary["sessions"][1]["cache_misses"] == N - FAST

        # Lose the last seven lines (as if killed after the calls but before the writes):
        # resuming answers those questions from the cache without a single request.
        kept = predictions.read_text().splitlines()[:3]
        predictions.write_text("\n".join(kept) + "\n" + kept[0][:25])
        before = len(gate.requests)
        done = subprocess.run(selfrag(tmp_path, "run", "--resume", str(run_dir), "--no-progress"),
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(gate.requests) == before
        records = read_predictions(predictions)
        assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(1, N + 1))
        resumed = [r for r in records if r["id"] not in {json.loads(k)["id"] for k in kept}]
        assert len(resumed) == N - 3 and all(r["accounting"]["cached_calls"] == 1 for r in resumed)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["sessions"][-1]["cache_hits"] == N - 3 and summary["sessions"][-1]["cache_misses"] == 0


@pytest.mark.server
def test_sigterm_closes_the_session_as_stopped_and_the_run_resumes(tmp_path):
    """`kill PID` (SIGTERM) stops a run the way Ctrl-C does: summary `stopped`, a resume hint."""
    write_dataset(tmp_path / "q.jsonl")
    gate = GatedServer()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with ScriptedHTTPServer(gate) as server:
        run_dir = tmp_path / "results" / "t"
        predictions = run_dir / "predictions.jsonl"
        proc = start_run(tmp_path, server.url, "t", env, cache=False)
        try:
            ok = wait_for(lambda: lines(predictions) == FAST and len(gate.requests) == FAST + CONCURRENCY, 60)
            assert ok, (proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
            proc.send_signal(signal.SIGTERM)
            gate.release.set()  # the held requests may finish or not: the run must stop either way
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + signal.SIGTERM, stderr
        assert "selfrag: terminated" in stderr and f"selfrag run --resume {run_dir}" in stderr
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "stopped" and summary["complete"] is False
        assert summary["sessions"][0]["finished"] is not None
        answered = lines(predictions)
        assert FAST <= answered < N

        gate.holding = False
        done = subprocess.run(selfrag(tmp_path, "run", "--resume", str(run_dir), "--no-progress"),
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert sorted(r["id"] for r in read_predictions(predictions)) == sorted(f"q{i}" for i in range(1, N + 1))
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"


def test_repair_cuts_a_torn_line_and_drops_errors_and_repeats(tmp_path):
    path = tmp_path / "predictions.jsonl"
    rows = [{"id": "a", "prediction": "x"}, {"id": "b", "error": {"type": "E", "message": "m"}},
            {"id": "a", "prediction": "y"}, {"id": "c", "prediction": "z"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "d", "predi')
    assert [r["id"] for r in read_predictions(path)] == ["a", "b", "a", "c"]  # reading ignores the torn tail
    kept = repair_predictions(path)
    assert [(r["id"], r["prediction"]) for r in kept] == [("a", "x"), ("c", "z")]
    assert path.read_text() == "".join(json.dumps(r) + "\n" for r in (rows[0], rows[3]))


def test_repair_keeps_a_complete_last_line_without_newline(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}')
    assert [r["id"] for r in repair_predictions(path)] == ["a", "b"]
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    assert repair_predictions(tmp_path / "none.jsonl") == []
