"""A run's config.yaml survives a kill while it is written; an empty or missing one is no dead end.

The kills are real: strace stops a resuming ``selfrag run`` with SIGKILL on its
first write to ``config.yaml`` (or the file it is written through), on the
fsync and on the rename, and the test resumes the run afterwards. A run
directory whose config.yaml an older selfrag left empty (or never wrote) is
resumed with the run's own config, as the one-line refusal says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.cli_process import SRC, error_line, selfrag, write_experiment

N = 6


@pytest.fixture
def stopped_run(tmp_path: Path) -> Path:
    """A run that answered 3 of its 6 questions (then was stopped), ready to resume."""
    write_experiment(tmp_path, N)
    proc = selfrag("run", "exp.yaml", "--output", "results", "--run-id", "r", "--no-progress", "--limit", "3",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "results" / "r"
    # As if it had been asked for all 6: a resume answers the other 3.
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["data"]["subset_size"] = None
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_dir


def resume(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return selfrag("run", *extra, "--resume", str(run_dir), "--no-progress", "--json", cwd=run_dir.parents[1])


def answered(run_dir: Path) -> list[str]:
    return sorted(json.loads(line)["id"] for line in (run_dir / "predictions.jsonl").read_text().splitlines())


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("call", ["write", "fsync", "rename"])
def test_a_kill_while_config_yaml_is_written_leaves_it_whole(stopped_run, call):
    before = (stopped_run / "config.yaml").read_text()
    paths = [str(stopped_run / "config.yaml"), str(stopped_run / "config.yaml.tmp")]
    argv = ["strace", "-f", "-qq", "-o", os.devnull, *[a for p in paths for a in ("-P", p)],
            "-e", f"trace={call}", "-e", f"inject={call}:signal=KILL:when=1",
            sys.executable, "-m", "selfrag", "run", "--resume", str(stopped_run), "--no-progress"]
    killed = subprocess.run(argv, cwd=stopped_run.parents[1], env={**os.environ, "PYTHONPATH": SRC},
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode != 0, f"not killed at {call}: {killed.stderr[-2000:]}"
    assert (stopped_run / "config.yaml").read_text() == before  # the whole old file, never an empty one
    again = resume(stopped_run)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["n_answered"] == N
    assert answered(stopped_run) == sorted(f"q{i}" for i in range(1, N + 1))
    assert not (stopped_run / "config.yaml.tmp").exists()


@pytest.mark.parametrize("damage", ["empty", "missing", "torn"])
def test_an_empty_or_missing_config_yaml_is_resumed_with_the_runs_config(stopped_run, damage):
    config = stopped_run / "config.yaml"
    if damage == "empty":
        config.write_text("")
    elif damage == "missing":
        config.unlink()
    else:  # cut mid-write, inside a flow mapping
        config.write_text("experiment: {name: exp, description: ''\n")
    line = error_line(resume(stopped_run))
    assert f"selfrag run CONFIG --resume {stopped_run}" in line, line
    assert "vanilla_rag" in line and "jsonl" in line, line  # what the run was, to find its config
    # The way out the line gives works, and config.yaml is whole again.
    again = resume(stopped_run, "exp.yaml")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["n_answered"] == N
    assert yaml.safe_load((stopped_run / "config.yaml").read_text())["architecture"]["name"] == "vanilla_rag"


def test_another_config_does_not_resume_a_run_without_its_config_yaml(stopped_run, tmp_path):
    (stopped_run / "config.yaml").write_text("")
    other = tmp_path / "other.yaml"
    other.write_text((tmp_path / "exp.yaml").read_text().replace("vanilla_rag", "no_retrieval"))
    line = error_line(resume(stopped_run, str(other)))
    assert "no_retrieval" in line and "vanilla_rag" in line, line
