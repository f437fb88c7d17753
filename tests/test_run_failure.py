"""A run whose questions failed: the exit status, the one line, and what the summary says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.eval.summary import run_status

N = 4


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_script(failing: set[int]) -> None:
    script = {
        f"capital number {i}?": ({"error": f"context too long for question {i}", "status": 400}
                                 if i in failing else f"City {i}")
        for i in range(1, N + 1)
    }
    Path("script.json").write_text(json.dumps(script))


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City {i}"],
             "contexts": [f"The capital number {i} is City {i}."]} for i in range(1, N + 1)]
    Path("q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("exp.yaml").write_text(
        "experiment: {name: fail}\n"
        "architecture: {name: vanilla_rag}\n"
        "llm: {spec: 'scripted:script.json', max_attempts: 1}\n"
        "retrieval: {top_k: 1}\n"
        "data: {dataset: jsonl, path: q.jsonl}\n"
        "cache: {path: cache.db}\n"
        "run: {concurrency: 2}\n"
    )
    return tmp_path


def summary_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_run_where_every_question_failed_exits_non_zero_and_says_so(workspace, capsys):
    write_script(failing={1, 2, 3, 4})
    code, out, err = run_cli(capsys, "run", "exp.yaml", "--run-id", "all", "--no-progress")
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("selfrag: error: 4 of 4 questions failed")
    assert "first: q1: BackendError: scripted error: context too long for question 1" in last
    assert "selfrag run --resume" in last and str(workspace / "results" / "all") in last
    s = summary_of(workspace / "results" / "all")
    assert s["status"] == "failed" and s["complete"] is False
    assert s["failure"].startswith("4 of 4 questions failed")
    assert "(failed)" in out  # the table says it too


def test_the_error_rate_limit_is_a_setting(workspace, capsys):
    write_script(failing={3})
    # By default more than one question in ten failing fails the run.
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--run-id", "strict", "--no-progress")
    assert code == 1
    assert "1 of 4 questions failed (25% > run.max_error_rate 10%)" in err
    assert "first: q3: BackendError: scripted error: context too long for question 3" in err
    assert summary_of(workspace / "results" / "strict")["status"] == "failed"

    code, _, err = run_cli(capsys, "run", "exp.yaml", "--run-id", "lenient", "--no-progress",
                           "--set", "run.max_error_rate=0.5")
    assert code == 0, err
    assert "1 question(s) failed" in err and "error:" not in err
    s = summary_of(workspace / "results" / "lenient")
    assert (s["status"], s["complete"], s["n_errors"], s["failure"]) == ("complete", True, 1, None)

    # 1.0 fails only a run in which every question failed (the cache would answer three of them).
    write_script(failing={1, 2, 3, 4})
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--run-id", "all", "--no-progress",
                           "--set", "run.max_error_rate=1.0", "--set", "cache.enabled=false")
    assert code == 1 and "4 of 4 questions failed" in err


def test_resuming_a_failed_run_retries_the_failures_and_may_change_the_limit(workspace, capsys):
    write_script(failing={2})
    assert run_cli(capsys, "run", "exp.yaml", "--run-id", "r", "--no-progress")[0] == 1
    write_script(failing=set())
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--resume", "results/r", "--no-progress",
                           "--set", "run.max_error_rate=0.2")
    assert code == 0, err
    s = summary_of(workspace / "results" / "r")
    assert (s["status"], s["complete"], s["n_errors"], s["n_answered"]) == ("complete", True, 0, N)


@pytest.mark.parametrize("value", ["-0.1", "1.5", "lots"])
def test_a_bad_limit_is_one_line(workspace, capsys, value):
    write_script(failing=set())
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--set", f"run.max_error_rate={value}")
    assert code == 2 and err.startswith("selfrag: error: ") and err.count("\n") == 1
    assert "run.max_error_rate" in err


def test_run_status():
    ok = {"id": "a", "metrics": {}}
    bad = {"id": "b", "error": {"type": "BackendError", "message": "boom\n  on two lines"}}
    assert run_status([ok], 2, 0.1) == ("incomplete", None)
    assert run_status([ok, ok], 2, 0.0) == ("complete", None)
    assert run_status([], 0, 0.1) == ("complete", None)
    status, why = run_status([ok, bad], 2, 0.5)
    assert status == "complete" and why is None  # 50% is not above 50%
    status, why = run_status([ok, bad], 2, 0.4)
    assert status == "failed" and why == "1 of 2 questions failed (50% > run.max_error_rate 40%); " \
                                         "first: b: BackendError: boom on two lines"
    status, why = run_status([bad], 1, 1.0)
    assert status == "failed" and why.startswith("1 of 1 questions failed; first: b:")
