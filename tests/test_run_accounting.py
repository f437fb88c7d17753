"""What a run paid, counted exactly even when a session was killed with SIGKILL.

A real ``selfrag run`` process (``tests/helpers/gated_cli.py``: the CLI with
the scripted backend behind the delay wrapper and a gate) answers questions
with ``self_corrective``, two LLM calls per question, two questions at a time.
After five calls the gate closes, so both workers wait in the middle of a
question; the test kills the process there, resumes it, and compares the
summary's totals with the calls the backend actually answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.eval.ledger import LEDGER_FILE, Ledger, account, read_ledger
from selfrag.eval.results import read_predictions
from selfrag.eval.runner import run_experiment_async
from selfrag.llm.scripted import ScriptedBackend

from .conftest import wait_for

HELPER = Path(__file__).parent / "helpers" / "gated_cli.py"
N = 8
CALLS_PER_QUESTION = 2
OPEN_CALLS = 5  # calls answered before the gate closes (odd: one worker is mid-question)
CONCURRENCY = 2
DELAY = 0.05
PRICE = 0.001  # every call costs the same


def write_workspace(tmp: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City {i}"],
             "contexts": [f"The capital number {i} is City {i}."]} for i in range(1, N + 1)]
    (tmp / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = {"Start your reply with YES or NO": {"text": "YES. The documents name the city.", "cost_usd": PRICE}}
    script.update({f"capital number {i}?": {"text": f"City {i}", "cost_usd": PRICE} for i in range(1, N + 1)})
    (tmp / "script.json").write_text(json.dumps(script))
    (tmp / "exp.yaml").write_text(
        "experiment: {name: acct}\n"
        "architecture: {name: self_corrective}\n"
        "self_corrective: {top_k: 1, max_iterations: 1}\n"
        "llm: {spec: 'scripted:script.json', max_attempts: 1}\n"
        "retrieval: {top_k: 1}\n"
        "data: {dataset: jsonl, path: q.jsonl}\n"
        "cache: {enabled: true, path: cache.db}\n"
        f"run: {{concurrency: {CONCURRENCY}}}\n"
    )


def gated(tmp: Path, *args: str, gate_after: int | None = None, log: str = "calls.log") -> subprocess.Popen:
    env = {**os.environ, "GATE_DELAY": str(DELAY), "GATE_LOG": str(tmp / log)}
    if gate_after is not None:
        env.update(GATE_AFTER=str(gate_after), GATE_FILE=str(tmp / "gate-open"))
    return subprocess.Popen([sys.executable, str(HELPER), *args, "--no-progress"], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def events(tmp: Path, log: str = "calls.log") -> list[str]:
    path = tmp / log
    return path.read_text().split() if path.exists() else []


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def test_totals_after_a_sigkill_and_a_resume_are_what_was_paid(tmp_path, capsys):
    write_workspace(tmp_path)
    run_dir = tmp_path / "results" / "k"
    proc = gated(tmp_path, "run", "exp.yaml", "--run-id", "k", gate_after=OPEN_CALLS)
    try:
        # Both workers wait at the gate: every answered call has been fully handled before that.
        held = wait_for(lambda: events(tmp_path).count("held") == CONCURRENCY, 60)
        assert held, proc.poll()
        assert events(tmp_path).count("answered") == OPEN_CALLS
    finally:
        kill(proc)
    finished = read_predictions(run_dir / "predictions.jsonl")
    cut_short = OPEN_CALLS - CALLS_PER_QUESTION * len(finished)  # paid calls of questions never written
    assert cut_short >= 1

    # Read straight after the kill, the run already counts every call it paid for.
    assert main(["analyze", str(run_dir), "--json"]) == 0
    killed = json.loads(capsys.readouterr().out)
    assert killed["cache"]["misses"] == OPEN_CALLS and killed["spent"]["llm_calls"] == OPEN_CALLS
    assert len(killed["sessions"]) == 1 and killed["sessions"][0]["finished"] is None

    # The resumed session runs with the lock of the killed one released by the kernel.
    done = gated(tmp_path, "run", "--resume", str(run_dir))
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err

    paid = events(tmp_path).count("answered")
    assert paid == N * CALLS_PER_QUESTION  # each distinct call reached the backend once
    records = read_predictions(run_dir / "predictions.jsonl")
    assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(1, N + 1))
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["cache"] == {"enabled": True, "hits": cut_short, "misses": paid}
    assert s["spent"]["llm_calls"] == paid
    assert s["spent"]["cost_usd"] == pytest.approx(PRICE * paid)
    assert s["cost_usd"]["total"] == pytest.approx(PRICE * (paid - cut_short))  # the answers' own calls
    # The records add up to the same totals once the calls of the cut-short questions are added.
    assert sum(r["accounting"]["cache_misses"] for r in records) == paid - cut_short
    assert sum(r["accounting"]["cache_hits"] for r in records) == cut_short
    assert {r["session"] for r in records} == {1, 2}

    first, second = s["sessions"]
    assert (first["session"], second["session"]) == (1, 2)
    assert first["finished"] is None and second["finished"] is not None
    assert (first["cache_misses"], first["cache_hits"]) == (OPEN_CALLS, 0)
    assert (second["cache_misses"], second["cache_hits"]) == (paid - OPEN_CALLS, cut_short)
    assert first["answered"] == len(finished) and second["answered"] == N - len(finished)
    # The killed session's time counts up to its last flushed call: at least three delayed calls
    # in a row on one worker (five calls over two workers).
    assert first["wall_time_s"] >= 3 * DELAY
    assert s["wall_time_s"] == round(first["wall_time_s"] + second["wall_time_s"], 3)
    assert s["status"] == "complete" and s["complete"] is True


# -- the ledger in-process ---------------------------------------------------------------------


def test_a_torn_ledger_line_is_skipped_and_the_next_session_starts_on_a_new_line(tmp_path):
    path = tmp_path / LEDGER_FILE
    path.write_text(json.dumps({"event": "session", "session": 1, "started": "x", "pid": 1, "resumed": False})
                    + "\n" + '{"event": "call", "session": 1, "id": "q1", "cac')
    with Ledger(path) as ledger:
        assert ledger.session == 2
        ledger.begin(resumed=True)
        ledger.end("complete")
    events = read_ledger(path)
    assert [(e["event"], e["session"]) for e in events] == [("session", 1), ("session", 2), ("end", 2)]
    assert path.read_text().splitlines()[1].startswith('{"event": "call"')  # left alone, on its own line


def test_a_question_written_just_before_a_kill_counts_for_its_session():
    # The kill fell between the predictions line and the ledger's question event.
    events = [{"event": "session", "session": 1, "t": 0.0},
              {"event": "call", "session": 1, "id": "q1", "cached": False, "cost_usd": 0.5, "t": 1.25},
              {"event": "question", "session": 1, "id": "q1", "error": None, "t": 1.5},
              {"event": "call", "session": 1, "id": "q2", "cached": False, "cost_usd": 0.5, "t": 2.0}]
    records = [{"id": "q1", "session": 1}, {"id": "q2", "session": 1}, {"id": "q3"}]
    totals = account(events, records)
    (session,) = totals["sessions"]
    assert (session["answered"], session["errors"], session["finished"], session["wall_time_s"]) == (2, 0, None, 2.0)
    assert totals["spent"] == {"llm_calls": 2, "cost_usd": 1.0, "prompt_tokens": 0, "completion_tokens": 0}


async def test_a_run_from_before_the_ledger_keeps_its_sessions_when_resumed(tmp_path):
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City {i}"],
             "contexts": [f"The capital number {i} is City {i}."]} for i in range(1, 5)]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def cfg(*extra: str):
        return load_config(overrides=[
            "architecture.name=vanilla_rag", "data.dataset=jsonl", f"data.path={tmp_path / 'q.jsonl'}",
            f"experiment.output_dir={tmp_path / 'results'}", "cache.enabled=false", "retrieval.top_k=1", *extra])

    llm = ScriptedBackend({"capital number": "City"})
    first = await run_experiment_async(cfg("data.subset_size=2"), progress=False, llm=llm)
    # What an older selfrag left: no ledger, records without a session, the sessions only in summary.json.
    (first.run_dir / LEDGER_FILE).unlink()
    predictions = first.run_dir / "predictions.jsonl"
    old_records = [{k: v for k, v in r.items() if k != "session"} for r in read_predictions(predictions)]
    predictions.write_text("".join(json.dumps(r) + "\n" for r in old_records))
    summary = json.loads((first.run_dir / "summary.json").read_text())
    summary["sessions"] = [{"started": "2025-01-01T00:00:00Z", "finished": "2025-01-01T00:01:00Z", "answered": 2,
                            "errors": 0, "wall_time_s": 60.0, "cache_hits": 0, "cache_misses": 2}]
    (first.run_dir / "summary.json").write_text(json.dumps(summary))

    result = await run_experiment_async(cfg(), resume_dir=first.run_dir, progress=False, llm=llm)
    old, new = result.summary["sessions"]
    assert (old["session"], old["status"], old["answered"], old["wall_time_s"]) == (1, "imported", 2, 60.0)
    assert (new["session"], new["status"], new["answered"], new["cache_misses"]) == (2, "complete", 2, 2)
    assert result.summary["cache"]["misses"] == 4 and result.summary["spent"]["llm_calls"] == 4
    assert result.summary["wall_time_s"] == round(60.0 + new["wall_time_s"], 3)
