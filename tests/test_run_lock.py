"""One process per run directory, and readers that count each question once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import DataError
from selfrag.eval.results import read_predictions
from selfrag.eval.run_lock import LOCK_FILE, RunLock

from .conftest import wait_for
from .test_run_accounting import HELPER, N, events, write_workspace


def selfrag(tmp: Path, *args: str, gate: str | None = None, log: str = "calls.log") -> subprocess.Popen:
    """The CLI in a new process; with ``gate`` every call waits until that file exists."""
    env = dict(os.environ)
    command = [sys.executable, "-m", "selfrag.cli.main"]
    if gate is not None:
        env.update(GATE_AFTER="0", GATE_FILE=str(tmp / gate), GATE_LOG=str(tmp / log))
        command = [sys.executable, str(HELPER)]
    return subprocess.Popen([*command, *args, "--no-progress"], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_from_a_terminal)


def _ctrl_c_as_from_a_terminal() -> None:
    """A suite started in the background (``pytest &``) ignores SIGINT and its children inherit that, so
    the CLI would rightly ignore the Ctrl-C these tests send: give the child SIGINT's default, as a
    terminal's foreground process has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_second_process_on_the_same_run_directory_is_refused(tmp_path):
    write_workspace(tmp_path)
    run_dir = tmp_path / "results" / "r"
    # An interrupted run: killed while its first calls were waiting.
    first = selfrag(tmp_path, "run", "exp.yaml", "--run-id", "r", gate="never", log="first.log")
    assert wait_for(lambda: events(tmp_path, "first.log").count("held") == 2, 60), first.poll()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)

    # Two resumptions at once: the one that got there first holds the run directory.
    holder = selfrag(tmp_path, "run", "--resume", str(run_dir), gate="open")
    try:
        assert wait_for(lambda: events(tmp_path).count("held") >= 1, 60), holder.poll()
        other = selfrag(tmp_path, "run", "--resume", str(run_dir))
        out, err = other.communicate(timeout=120)
        assert other.returncode == 2, (out, err)
        assert err.startswith("selfrag: error: ") and err.count("\n") == 1, err
        assert str(run_dir) in err and f"pid {holder.pid}" in err
        (tmp_path / "open").touch()
        out, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    ids = [r["id"] for r in read_predictions(run_dir / "predictions.jsonl")]
    assert sorted(ids) == sorted(f"q{i}" for i in range(1, N + 1))  # each question once
    assert json.loads((run_dir / "summary.json").read_text())["n_answered"] == N


def test_the_lock_names_its_holder_and_is_free_again_once_released(tmp_path):
    with RunLock.acquire(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text().strip() == str(os.getpid())
        with pytest.raises(DataError, match=rf"{tmp_path} is in use by another selfrag run \(pid {os.getpid()}\)"):
            RunLock.acquire(tmp_path)
    with RunLock.acquire(tmp_path):
        pass


# -- readers and repeated question ids ------------------------------------------------------


@pytest.fixture
def duplicated_run(tmp_path, monkeypatch, capsys):
    """A finished run whose predictions file holds two more answers for q1 and q2 (as two writers left it)."""
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City {i}"],
             "contexts": [f"The capital number {i} is City {i}."]} for i in range(1, 4)]
    Path("q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("script.json").write_text(json.dumps({"capital number": "City 1"}))
    Path("exp.yaml").write_text(
        "experiment: {name: dup}\narchitecture: {name: vanilla_rag}\nllm: {spec: 'scripted:script.json'}\n"
        "retrieval: {top_k: 1}\ndata: {dataset: jsonl, path: q.jsonl}\ncache: {path: cache.db}\n"
    )
    assert main(["run", "exp.yaml", "--run-id", "d", "--no-progress"]) == 0
    capsys.readouterr()
    run_dir = tmp_path / "results" / "d"
    predictions = run_dir / "predictions.jsonl"
    records = {r["id"]: r for r in read_predictions(predictions)}
    extra = []
    for qid in ("q2", "q1"):
        dup = json.loads(json.dumps(records[qid]))
        dup["prediction"] = f"City {qid[1]}"
        dup["metrics"] = {"em": 1.0, "f1": 1.0, "match": 1.0}
        extra.append(dup)
    with predictions.open("a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in extra))
    return run_dir


def test_analyze_counts_each_question_once_and_says_so(duplicated_run, capsys):
    assert main(["analyze", str(duplicated_run), "--json"]) == 0
    out, err = capsys.readouterr()
    s = json.loads(out)
    assert (s["n_answered"], s["metrics"]["em"]) == (3, pytest.approx(1 / 3))  # the first answer of each
    assert s["repeated_records"] == 2
    assert err.count("\n") == 1 and err.startswith("selfrag: warning: ")
    assert "predictions.jsonl repeats 2 question id(s) (e.g. q2)" in err and "first" in err


def test_compare_counts_each_question_once_and_says_so(duplicated_run, capsys):
    assert main(["compare", str(duplicated_run), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["n"] == 3
    assert err.count("\n") == 1 and "repeats 2 question id(s)" in err


def test_resuming_keeps_the_first_answer_of_a_repeated_question_and_says_so(duplicated_run, caplog):
    assert main(["run", "--resume", str(duplicated_run), "--no-progress"]) == 0
    assert "dropped 2 repeated answer(s), keeping the first answer of each question" in caplog.text
    records = read_predictions(duplicated_run / "predictions.jsonl")
    assert sorted(r["id"] for r in records) == ["q1", "q2", "q3"]
    assert next(r for r in records if r["id"] == "q2")["prediction"] == "City 1"  # the first answer


# -- the lock file is removed when a run ends; a killed run's stale lock is still handled --------------


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    out, err = proc.communicate(timeout=120)
    return out, err


@pytest.mark.parametrize("ending", ["complete", "failed"])
def test_a_run_that_ends_leaves_no_lock_file(tmp_path, ending):
    write_workspace(tmp_path)
    if ending == "failed":  # every call fails: the run ends with status failed, exit 1
        (tmp_path / "script.json").write_text(json.dumps({"capital": {"error": "bad request", "status": 400}}))
    proc = selfrag(tmp_path, "run", "exp.yaml", "--run-id", "r")
    out, err = _finish(proc)
    assert proc.returncode == (0 if ending == "complete" else 1), err
    run_dir = tmp_path / "results" / "r"
    assert (run_dir / "summary.json").is_file()
    assert not (run_dir / LOCK_FILE).exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_leaves_no_lock_file(tmp_path, sig):
    write_workspace(tmp_path)
    proc = selfrag(tmp_path, "run", "exp.yaml", "--run-id", "r", gate="never")
    assert wait_for(lambda: events(tmp_path).count("held") >= 1, 60), proc.poll()
    run_dir = tmp_path / "results" / "r"
    assert (run_dir / LOCK_FILE).read_text().strip() == str(proc.pid)  # held while it runs
    proc.send_signal(sig)
    _finish(proc)
    assert proc.returncode in (130, 128 + signal.SIGTERM)
    assert not (run_dir / LOCK_FILE).exists()


def test_a_killed_runs_stale_lock_is_taken_over_and_removed(tmp_path):
    write_workspace(tmp_path)
    proc = selfrag(tmp_path, "run", "exp.yaml", "--run-id", "r", gate="never")
    assert wait_for(lambda: events(tmp_path).count("held") >= 1, 60), proc.poll()
    proc.send_signal(signal.SIGKILL)
    _finish(proc)
    run_dir = tmp_path / "results" / "r"
    assert (run_dir / LOCK_FILE).read_text().strip() == str(proc.pid)  # left by the kill, its lock gone with it
    again = selfrag(tmp_path, "run", "--resume", str(run_dir))
    out, err = _finish(again)
    assert again.returncode == 0, err
    assert not (run_dir / LOCK_FILE).exists()
    assert json.loads((run_dir / "summary.json").read_text())["n_answered"] == N


def test_a_lock_file_replaced_between_open_and_lock_is_not_trusted(tmp_path, monkeypatch):
    """Another process may release (and remove) the lock after this one opened the file but before it
    locked it; locking the removed file would let two processes 'hold' the run. The lock is taken on
    the file that is at the path when the lock is held."""
    import fcntl

    from selfrag.eval import run_lock

    real_flock = fcntl.flock
    replaced = []

    def racing_flock(fd, op):
        if not replaced:  # the holder finishes: its file goes, and a fresh one appears
            replaced.append(os.fstat(fd).st_ino)
            (tmp_path / LOCK_FILE).unlink()
            (tmp_path / LOCK_FILE).write_text("")
        return real_flock(fd, op)

    (tmp_path / LOCK_FILE).write_text("12345\n")
    monkeypatch.setattr(run_lock.fcntl, "flock", racing_flock)
    with RunLock.acquire(tmp_path) as lock:
        held = os.fstat(lock._fd).st_ino
        assert held == (tmp_path / LOCK_FILE).stat().st_ino != replaced[0]
    assert not (tmp_path / LOCK_FILE).exists()
