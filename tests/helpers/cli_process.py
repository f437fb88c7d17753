"""The real ``selfrag`` command in a child process, as a user runs it.

``selfrag(*argv, cwd=...)`` runs ``python -m selfrag`` with the selfrag the
tests imported. ``unprivileged=True`` runs it as a user who cannot read or
write files that are not theirs: as root the child runs as ``nobody`` through
``setpriv`` (root reads and writes any file whatever its mode), otherwise as
the current user, whom ``chmod`` already binds. ``shared_dir()`` makes a
folder that such a child can work in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import selfrag

SRC = str(Path(selfrag.__file__).resolve().parents[1])
NOBODY = 65534


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot run a child that file modes bind")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def selfrag(*argv: str, cwd: Path, env: dict[str, str] | None = None, unprivileged: bool = False,
            preexec=None, timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": SRC, "SELFRAG_PROGRESS": "0", "SELFRAG_STREAM": "0", **(env or {})}
    prefix = _as_nobody() if unprivileged else []
    if prefix:
        full_env["HOME"] = str(cwd)
    return subprocess.run([*prefix, sys.executable, "-m", "selfrag", *argv], cwd=cwd, env=full_env,
                          preexec_fn=preexec, capture_output=True, text=True, timeout=timeout)


def shared_dir(prefix: str) -> Path:
    """A new folder every user may work in (pytest's tmp_path is the current user's alone)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o777)
    return path


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The last line of stderr, which must be the one ``selfrag: error:`` line."""
    no_traceback(proc)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, f"nothing on stderr (exit {proc.returncode}); stdout: {proc.stdout[-2000:]}"
    assert lines[-1].startswith("selfrag: error: "), proc.stderr[-3000:]
    return lines[-1]


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "paris.txt").write_text("Paris is the capital of France. It lies on the Seine.\n")
    (folder / "berlin.txt").write_text("Berlin is the capital of Germany. It lies on the Spree.\n")
    return folder


def write_experiment(folder: Path, n: int, *, name: str = "exp", cache: str = "cache.db",
                     filler: str = "") -> Path:
    """``n`` questions with their own contexts, a keyed script that answers each, and a vanilla_rag config."""
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [f"City {i}"],
             "contexts": [f"The capital number {i} is City {i}. {filler}"]} for i in range(1, n + 1)]
    (folder / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "script.json").write_text(json.dumps({f"capital number {i}?": f"City {i}" for i in range(1, n + 1)}))
    config = folder / f"{name}.yaml"
    config.write_text(
        f"experiment: {{name: {name}}}\n"
        "architecture: {name: vanilla_rag}\n"
        "llm: {spec: 'scripted:script.json', max_attempts: 1}\n"
        "retrieval: {top_k: 1}\n"
        "data: {dataset: jsonl, path: q.jsonl}\n"
        f"cache: {{path: {cache}}}\n"
    )
    return config
