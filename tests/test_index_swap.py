"""A rebuild killed at any point leaves the old or the new index, never none (issue 55, defect 3).

Each build runs in a child process that gets a real SIGKILL at one point of the
swap: from inside (the child wraps the swap's own calls and kills itself right
after one) and, where strace is installed, from outside (strace kills it on
entry to each rename system call in turn). Afterwards the index must load (a
half-done swap is repaired on open), hold the old or the new documents, and
the next build must succeed and leave no `.idx.*` folder behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import selfrag
from selfrag.cli.main import main
from selfrag.retrieval.persist import load_index

REPO = Path(__file__).resolve().parents[1]
SRC = str(Path(selfrag.__file__).resolve().parents[1])  # the selfrag this test imported, for its children
OLD = [{"id": "old1", "text": "The old index talks about Rome."}, {"id": "old2", "text": "And about Oslo."}]
NEW = [{"id": "new1", "text": "The new index talks about Lima."}, {"id": "new2", "text": "And about Quito."},
       {"id": "new3", "text": "And about Bogota."}]

# The child: optionally without RENAME_EXCHANGE, optionally killing itself right after one step.
CHILD = r"""
import json, os, signal, sys
spec = json.loads(sys.argv[1])
try:
    from selfrag.retrieval import swap
except ImportError:  # selfrag before the atomic swap: only the strace kills apply
    import types
    swap = types.SimpleNamespace(exchange=None)

def die():
    os.kill(os.getpid(), signal.SIGKILL)

real_exchange, real_rename = swap.exchange, os.rename
if not spec["exchange"]:
    swap.exchange = lambda a, b: False
kill = spec.get("kill")
if kill == "during-save":
    from selfrag.retrieval.bm25 import BM25Retriever
    real_save = BM25Retriever.save
    def save(self, path):
        real_save(self, path)
        die()
    BM25Retriever.save = save
elif kill == "after-exchange":
    def exchange(a, b):
        done = real_exchange(a, b)
        if done:
            die()
        return done
    swap.exchange = exchange
elif kill in ("after-rename-1", "after-rename-2"):
    count = [0]
    def rename(a, b):
        real_rename(a, b)
        if os.path.basename(a).startswith(".idx.") or os.path.basename(a) == "idx":
            count[0] += 1
            if count[0] == int(kill[-1]):
                die()
    os.rename = rename
from selfrag.cli.main import main
sys.exit(main(["index", "build", "--docs", spec["docs"], "--out", spec["out"]]))
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "PYTHONDONTWRITEBYTECODE": "1"}


def write_docs(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def setup(tmp_path, capsys):
    old, new = write_docs(tmp_path / "old.jsonl", OLD), write_docs(tmp_path / "new.jsonl", NEW)
    work = tmp_path / "work"
    work.mkdir()
    assert main(["index", "build", "--docs", str(old), "--out", str(work / "idx")]) == 0
    capsys.readouterr()
    return work, old, new


def child_argv(spec: dict) -> list[str]:
    return [sys.executable, "-c", CHILD, json.dumps(spec)]


def ids(idx: Path) -> set[str]:
    return {d.id for d in load_index(idx).documents}


def leftovers(work: Path) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith(".idx."))


def rebuild_cleans_up(work: Path, docs: Path, capsys) -> None:
    assert main(["index", "build", "--docs", str(docs), "--out", str(work / "idx")]) == 0
    capsys.readouterr()
    assert leftovers(work) == [] and ids(work / "idx") == {r["id"] for r in NEW}


@pytest.mark.parametrize(
    ("exchange", "kill", "expected"),
    [
        (True, "during-save", OLD),
        (True, "after-exchange", NEW),
        (False, "during-save", OLD),
        (False, "after-rename-1", OLD),  # the old index aside, the new one not yet in place
        (False, "after-rename-2", NEW),
    ],
)
def test_a_build_killed_at_each_step_leaves_a_whole_index(setup, capsys, exchange, kill, expected):
    work, _, new = setup
    spec = {"exchange": exchange, "kill": kill, "docs": str(new), "out": str(work / "idx")}
    proc = subprocess.run(child_argv(spec), env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert leftovers(work)  # the killed build left its folder(s)
    if kill == "after-rename-1":
        assert not (work / "idx").exists()  # the half-swapped state the next open must repair
    assert ids(work / "idx") == {r["id"] for r in expected}
    rebuild_cleans_up(work, new, capsys)


def strace_kills(work: Path, new: Path, exchange: bool) -> list[tuple[str, int]]:
    """(system call, n) for every rename-family call the build makes, from a traced run."""
    log = work.parent / "trace.log"
    spec = {"exchange": exchange, "docs": str(new), "out": str(work / "idx")}
    calls = "rename,renameat,renameat2"
    subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", f"trace={calls}", *child_argv(spec)],
                   env=env(), check=True, capture_output=True, timeout=300)
    names = [line.split("(", 1)[0].split()[-1] for line in log.read_text().splitlines() if "(" in line]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return [(name, n) for name, total in counts.items() for n in range(1, total + 1)]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_strace_kills_the_build_at_every_rename(setup, capsys, exchange):
    work, old, new = setup
    kills = strace_kills(work, new, exchange)
    assert kills, "the traced build made no rename"
    assert main(["index", "build", "--docs", str(old), "--out", str(work / "idx")]) == 0  # back to the old index
    for name, n in kills:
        spec = {"exchange": exchange, "docs": str(new), "out": str(work / "idx")}
        argv = ["strace", "-f", "-qq", "-o", os.devnull, "-e", f"trace={name}",
                "-e", f"inject={name}:signal=KILL:when={n}", *child_argv(spec)]
        proc = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0, f"{name} #{n} was not killed: {proc.stderr}"
        # Killed on entry to the call: the swap has not happened, so the old index is whole
        # (after a repair on open when the kill fell between the two renames).
        assert ids(work / "idx") == {r["id"] for r in OLD}, f"after a kill at {name} #{n}"
    rebuild_cleans_up(work, new, capsys)


def test_a_running_builds_folder_is_left_alone(setup, capsys):
    work, _, new = setup
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = work / f".idx.building-{sleeper.pid}-0123abcd"
        dead = work / ".idx.building-999999999-0123abcd"
        for folder in (live, dead):
            folder.mkdir()
            (folder / "partial.bin").write_bytes(b"x" * 1000)
            past = time.time() - 60
            os.utime(folder, (past, past))
        assert main(["index", "build", "--docs", str(new), "--out", str(work / "idx")]) == 0
        assert leftovers(work) == [live.name]  # the dead build's folder went, the live one's stayed
    finally:
        sleeper.kill()
        sleeper.wait()
    capsys.readouterr()


def test_recovery_restores_the_newest_old_index_only_when_the_index_is_missing(setup):
    from selfrag.retrieval import swap

    work, _, _ = setup
    idx = work / "idx"
    aside = work / f".idx.old-999999999-{'0' * 8}"
    os.rename(idx, aside)
    assert swap.recover(idx) and ids(idx) == {r["id"] for r in OLD}
    assert not aside.exists()
    assert not swap.recover(idx)  # nothing to do when the index is there


def test_the_exchange_is_used_where_the_kernel_has_it(tmp_path):
    from selfrag.retrieval import swap

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("a")
    (b / "f").write_text("b")
    if swap._renameat2() is None:
        pytest.skip("no renameat2 in this C library")
    assert swap.exchange(a, b)
    assert (a / "f").read_text() == "b" and (b / "f").read_text() == "a"
