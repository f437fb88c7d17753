"""A cache selfrag cannot write (or cannot open) costs its savings, never a question: one warning, then on.

Through real ``selfrag`` processes run as a user the file modes bind (``nobody``
when the tests run as root): a read-only cache that a first run filled, an
unreadable one, and one in a folder nobody may write to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cli_process import (
    no_traceback,
    selfrag,
    shared_dir,
    write_docs,
    write_experiment,
)

N = 30
FILLED = 5  # questions a first run answered into the cache before it was made read-only


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "WARNING" in line]


@pytest.fixture
def project() -> Path:
    folder = shared_dir("selfrag-ro-cache-")
    write_experiment(folder, N, cache="cache.db")
    write_docs(folder / "docs")
    (folder / "paris.json").write_text(json.dumps({"France": "Paris", "Germany": "Berlin"}))
    first = selfrag("run", "exp.yaml", "--limit", str(FILLED), "--output", "results", "--run-id", "fill",
                    "--no-progress", cwd=folder)
    assert first.returncode == 0, first.stderr
    return folder


def make_read_only(project: Path) -> None:
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        if (project / name).exists():
            (project / name).chmod(0o444)
    (project / "results").chmod(0o777)


def test_run_with_a_read_only_cache_answers_every_question(project):
    make_read_only(project)
    proc = selfrag("run", "exp.yaml", "--output", "results", "--run-id", "ro", "--no-progress", "--json",
                   cwd=project, unprivileged=True)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["n_answered"] == N and summary["n_errors"] == 0
    # What the cache held is still read; the rest is answered without storing it.
    assert summary["cache"]["hits"] == FILLED and summary["cache"]["misses"] == N - FILLED
    found = warnings_of(proc.stderr)
    assert len(found) == 1, proc.stderr
    assert "cache.db" in found[0] and "readonly" in found[0] and "without storing" in found[0]


def test_ask_with_a_read_only_cache_answers(project):
    make_read_only(project)
    proc = selfrag("ask", "What is the capital of France?", "--docs", "docs", "--method", "vanilla_rag",
                   "--llm", "scripted:paris.json", "--cache", "cache.db", cwd=project, unprivileged=True)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Paris")
    assert len(warnings_of(proc.stderr)) == 1, proc.stderr


@pytest.mark.parametrize("case", ["unreadable file", "read-only folder"])
def test_a_cache_that_cannot_be_opened_is_skipped_with_one_warning(project, case):
    if case == "unreadable file":
        (project / "cache.db").chmod(0o000)
        cache = "cache.db"
    else:
        locked = project / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        cache = "locked/cache.db"
    proc = selfrag("ask", "What is the capital of France?", "--docs", "docs", "--method", "vanilla_rag",
                   "--llm", "scripted:paris.json", "--cache", cache, cwd=project, unprivileged=True)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Paris")
    found = warnings_of(proc.stderr)
    assert len(found) == 1 and cache in found[0] and "without the cache" in found[0], proc.stderr


def test_a_folder_given_as_the_cache_is_still_an_error(project):
    (project / "adir").mkdir()
    proc = selfrag("ask", "What is the capital of France?", "--docs", "docs", "--method", "vanilla_rag",
                   "--llm", "scripted:paris.json", "--cache", "adir", cwd=project)
    no_traceback(proc)
    assert proc.returncode == 2 and "is a folder" in proc.stderr


def test_the_cache_is_written_again_when_it_can_be(project):
    """The read-only case changed nothing for a writable cache: a second run is answered from it."""
    proc = selfrag("run", "exp.yaml", "--output", "results", "--run-id", "again", "--no-progress", "--json",
                   "--limit", str(FILLED), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cache"]["hits"] == FILLED
    assert not warnings_of(proc.stderr)
    assert os.access(project / "cache.db", os.W_OK)


def test_a_damaged_cache_in_a_read_only_folder_is_skipped(project):
    """It cannot be moved aside, so it is not used: one warning, and the question is answered."""
    folder = project / "kept"
    folder.mkdir()
    proc = selfrag("run", "exp.yaml", "--output", "results", "--run-id", "fill2", "--no-progress",
                   "--set", "cache.path=kept/cache.db", cwd=project)
    assert proc.returncode == 0, proc.stderr
    cache = folder / "cache.db"
    with cache.open("r+b") as fh:  # random bytes over the pages, the SQLite header intact
        fh.seek(4096)
        fh.write(os.urandom(16384))
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        (folder / name).touch()
        (folder / name).chmod(0o666)
    folder.chmod(0o555)
    proc = selfrag("ask", "What is the capital of France?", "--docs", "docs", "--method", "vanilla_rag",
                   "--llm", "scripted:paris.json", "--cache", "kept/cache.db", cwd=project, unprivileged=True)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Paris")
    found = warnings_of(proc.stderr)
    assert len(found) == 1 and "damaged" in found[0] and "cannot be moved aside" in found[0], proc.stderr
