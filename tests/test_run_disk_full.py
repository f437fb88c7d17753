"""A full disk ends `run` and `index build` with one line naming the disk, never a traceback or a torn file.

The disk is a real one: a 1 MB tmpfs, filled up to a few KB before the command
runs (mounting needs root: the test is skipped elsewhere). A file size limit
(RLIMIT_FSIZE set in the child, so writes fail with EFBIG) gives the same
failure without root. The commands are real ``selfrag`` processes.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli_process import error_line, selfrag, write_docs, write_experiment

N = 30
FILLER = "Its harbour is busy and its streets are old. " * 40  # ~1.8 KB of context per question


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until about ``leave`` bytes are free."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with filler.open("wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return filler


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_experiment(tmp_path, N, filler=FILLER)
    return tmp_path


def test_run_on_a_full_disk_is_one_line_and_resumes(project, small_disk):
    filler = fill(small_disk, 40_000)
    proc = selfrag("run", "exp.yaml", "--output", str(small_disk), "--run-id", "r", "--no-progress", cwd=project)
    line = error_line(proc)
    assert proc.returncode == 2
    assert "no space left on the disk mounted at " + str(small_disk) in line, line
    assert "free" in line and "selfrag run --resume" in line, line
    run_dir = small_disk / "r"
    assert leftovers(run_dir) == []
    # Space freed, the same run finishes: nothing answered twice, nothing lost.
    filler.unlink()
    again = selfrag("run", "--resume", str(run_dir), "--no-progress", "--json", cwd=project)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["n_answered"] == N and summary["status"] == "complete"
    ids = [json.loads(line)["id"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"q{i}" for i in range(1, N + 1))


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_run_past_a_file_size_limit_is_one_line(project):
    proc = selfrag("run", "exp.yaml", "--output", "results", "--run-id", "r", "--no-progress", cwd=project,
                   preexec=_file_size_limit(40_000))
    line = error_line(proc)
    assert proc.returncode == 2
    assert "predictions.jsonl" in line and "File too large" in line and "ulimit -f" in line, line
    assert leftovers(project / "results") == []


def test_index_build_on_a_full_disk_is_one_line_and_keeps_the_old_index(tmp_path, small_disk):
    docs = write_docs(tmp_path / "docs")
    out = small_disk / "idx"
    first = selfrag("index", "build", "--docs", str(docs), "--out", str(out), "--quiet", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    for i in range(40):
        (docs / f"more{i}.txt").write_text(" ".join(f"word{j} alpha beta gamma" for j in range(2000)))
    fill(small_disk, 20_000)
    proc = selfrag("index", "build", "--docs", str(docs), "--out", str(out), "--quiet", cwd=tmp_path)
    line = error_line(proc)
    assert proc.returncode == 2
    assert f"no space left on the disk mounted at {small_disk}" in line and str(out) in line, line
    info = selfrag("index", "info", str(out), "--json", cwd=tmp_path)
    assert info.returncode == 0 and json.loads(info.stdout)["document_count"] == 2


def test_a_new_run_on_a_disk_with_nothing_free_is_one_line_and_leaves_nothing(project, small_disk):
    fill(small_disk, 0)
    proc = selfrag("run", "exp.yaml", "--output", str(small_disk), "--run-id", "r", "--no-progress", cwd=project)
    line = error_line(proc)
    assert proc.returncode == 2
    assert f"no space left on the disk mounted at {small_disk}" in line and line.endswith("then run it again"), line
    assert not (small_disk / "r").exists()
