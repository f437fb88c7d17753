"""A damaged cache file is moved aside and replaced, and `ask` and `run` go on (issue 55, defect 4).

The damage is the issue's: 16 KB of random bytes written over a real cache from
offset 8192, so the SQLite header is intact and the pages under it are not.
The commands run as real `python -m selfrag` processes with a scripted backend.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import selfrag
from selfrag.llm import SQLiteCache
from selfrag.llm.base import build_request
from selfrag.llm.cache import request_key
from selfrag.types import Generation

REPO = Path(__file__).resolve().parents[1]
SRC = str(Path(selfrag.__file__).resolve().parents[1])  # the selfrag this test imported, for its children
N = 30
FILLER = "It was printed on thick paper and sold in many shops across the country. " * 6


def selfrag(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "selfrag", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def damage(path: Path) -> None:
    """dd if=/dev/urandom of=PATH bs=1 seek=8192 count=16384 conv=notrunc"""
    with path.open("r+b") as fh:
        fh.seek(8192)
        fh.write(os.urandom(16384))


def is_broken(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]
    except sqlite3.DatabaseError:
        return True
    finally:
        conn.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """30 questions, their documents, a script, and a cache that a first run filled, then damaged."""
    tmp = tmp_path_factory.mktemp("cache_damage")
    rows = [{"id": f"q{i}", "question": f"Who wrote book {i}?", "answers": [f"Author {i}"],
             "contexts": [{"title": f"Book {i}", "text": f"Book {i} was written by Author {i}. {FILLER}"}]}
            for i in range(N)]
    (tmp / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "docs.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["contexts"][0]["text"]}) + "\n"
                                            for r in rows))
    (tmp / "replies.json").write_text(json.dumps({f"book {i}?": f"Author {i}" for i in range(N)}))
    (tmp / "exp.yaml").write_text(
        f"inherits: {REPO / 'configs' / 'vanilla_rag.yaml'}\n"
        "data: {dataset: jsonl, path: questions.jsonl}\n"
    )
    first = selfrag("run", "exp.yaml", "--llm", "scripted:replies.json", "--set", "cache.path=filled.db",
                    "--output", "results", "--run-id", "first", "--no-progress", cwd=tmp)
    assert first.returncode == 0, first.stderr
    assert (tmp / "filled.db").stat().st_size > 8192 + 16384
    damage(tmp / "filled.db")
    assert is_broken(tmp / "filled.db")
    return tmp


def fresh_copy(project: Path, name: str) -> Path:
    shutil.copy(project / "filled.db", project / name)
    return project / name


def check_moved_aside(project: Path, name: str, stderr: str) -> None:
    assert "Traceback" not in stderr
    warnings = [line for line in stderr.splitlines() if "is damaged" in line]
    assert len(warnings) == 1, stderr
    assert f"moved it to {name}.damaged-" in warnings[0] and "started a fresh cache" in warnings[0]
    assert len(list(project.glob(f"{name}.damaged-*"))) == 1
    assert not is_broken(project / name)


def test_ask_moves_a_damaged_cache_aside_and_answers(project):
    fresh_copy(project, "ask.db")
    proc = selfrag("ask", "Who wrote book 3?", "--docs", "docs.jsonl", "--llm", "scripted:replies.json",
                   "--method", "vanilla_rag", "--cache", "ask.db", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "Author 3" in proc.stdout
    check_moved_aside(project, "ask.db", proc.stderr)
    again = selfrag("ask", "Who wrote book 3?", "--docs", "docs.jsonl", "--llm", "scripted:replies.json",
                    "--method", "vanilla_rag", "--cache", "ask.db", "--json", cwd=project)
    assert again.returncode == 0 and not again.stderr  # the fresh cache is sound: no second warning


def test_run_moves_a_damaged_cache_aside_and_answers_every_question(project):
    fresh_copy(project, "run.db")
    proc = selfrag("run", "exp.yaml", "--llm", "scripted:replies.json", "--set", "cache.path=run.db",
                   "--output", "results", "--run-id", "second", "--no-progress", cwd=project)
    assert proc.returncode == 0, proc.stderr
    check_moved_aside(project, "run.db", proc.stderr)
    summary = json.loads((project / "results" / "second" / "summary.json").read_text())
    assert summary["n_answered"] == N and summary["n_errors"] == 0


def test_damage_found_while_in_use_is_handled_the_same(project, caplog):
    path = project / "inuse.db"
    cache = SQLiteCache(path)
    request = build_request([{"role": "user", "content": "q"}])
    key = request_key("scripted:x", request)
    for i in range(200):  # enough rows for pages past 24 KB
        cache.put(f"{key}{i}", "scripted:x", request, Generation(text=FILLER))
    cache._conn.close()
    damage(path)
    cache._conn = sqlite3.connect(path, check_same_thread=False)  # as if it broke after the open check
    with caplog.at_level(logging.WARNING, logger="selfrag.llm.cache"):
        assert all(cache.get(f"{key}{i}") is None for i in range(200))
        cache.put(key, "scripted:x", request, Generation(text="Paris"))
    assert cache.get(key).text == "Paris" and len(cache) == 1
    assert sum("is damaged" in r.getMessage() for r in caplog.records) == 1
    assert len(list(project.glob("inuse.db.damaged-*"))) == 1


def test_a_file_that_is_not_sqlite_is_still_a_one_line_error_and_is_not_moved(tmp_path):
    from selfrag.errors import DataError

    notes = tmp_path / "notes.db"
    notes.write_text("my own notes, not a cache\n" * 100)
    with pytest.raises(DataError, match="is not an SQLite database"):
        SQLiteCache(notes)
    assert notes.read_text().startswith("my own notes") and not list(tmp_path.glob("notes.db.damaged-*"))
