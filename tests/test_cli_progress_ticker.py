"""On a terminal the stage's elapsed time moves while a stage runs; elsewhere each stage is one line; `chat`
leaves no progress text mixed into what it prints.

Real ``selfrag`` processes on a pseudo-terminal (what a user's terminal is to
them). Each model call takes 3 s (the scripted backend behind the delay
wrapper). The terminal's screen is rebuilt from what was written, with ``\\r``
and erase-line applied as a terminal applies them.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli_process import SRC, write_docs

HELPER = Path(__file__).parent / "helpers" / "gated_cli.py"
STAGE = re.compile(r"selfrag: ([^…\r\n]+)… \((\d+\.\d) s\)")


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("SELFRAG_PROGRESS", "SELFRAG_STREAM")}
    return {**base, "PYTHONPATH": SRC, "TERM": "xterm", **extra}


def read_all(fd: int, proc: subprocess.Popen, timeout: float = 120) -> str:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed its side
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks).decode("utf-8", "replace")


def screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw``: \\r returns to the line's start, ESC[K erases to its end."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    i = 0
    while i < len(raw):
        if raw.startswith("\033[K", i):
            del line[col:]
            i += 3
            continue
        ch = raw[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    if line:
        lines.append("".join(line))
    return lines


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_docs(tmp_path / "docs")
    (tmp_path / "script.json").write_text(json.dumps({
        "Rewrite": "What is the capital of Germany?",
        "capital of France?": "Paris",
        "capital of Germany?": "Berlin",
    }))
    return tmp_path


def on_a_terminal(project: Path, argv: list[str], *, stdin: str | None = None, delay: float = 3.0) -> str:
    """Run the gated CLI with stderr (and, for chat, stdin and stdout) on a pseudo-terminal."""
    master, slave = pty.openpty()
    interactive = stdin is not None
    proc = subprocess.Popen([sys.executable, str(HELPER), *argv], cwd=project,
                            env=env(GATE_DELAY=str(delay)), stdin=slave if interactive else subprocess.DEVNULL,
                            stdout=slave if interactive else subprocess.PIPE, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        if interactive:
            os.write(master, stdin.encode())
        raw = read_all(master, proc)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 0, raw[-3000:]
    return raw


def test_the_elapsed_time_moves_while_the_answer_is_written(project):
    raw = on_a_terminal(project, ["ask", "What is the capital of France?", "--docs", "docs",
                                  "--method", "vanilla_rag", "--llm", "scripted:script.json"])
    shown = STAGE.findall(raw)
    writing = [float(t) for stage, t in shown if stage == "writing the answer"]
    # One 3 s call: its figure is rewritten as the seconds go by, not frozen at the stage's start.
    assert len(set(writing)) >= 3, shown
    assert writing == sorted(writing) and writing[-1] - writing[0] >= 1.5, writing
    assert not [line for line in screen(raw) if "selfrag: " in line and "…" in line], screen(raw)


def test_without_a_terminal_each_stage_is_one_line(project):
    proc = subprocess.run([sys.executable, str(HELPER), "ask", "What is the capital of France?", "--docs", "docs",
                           "--method", "vanilla_rag", "--llm", "scripted:script.json"], cwd=project,
                          env=env(GATE_DELAY="2", SELFRAG_PROGRESS="1"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stages = [m.group(1) for m in STAGE.finditer(proc.stderr)]
    assert "writing the answer" in stages
    assert len(stages) == len(set(stages)), proc.stderr  # no line repeated while a stage runs
    assert "\r" not in proc.stderr and "\033[" not in proc.stderr


def test_chat_on_a_terminal_leaves_no_progress_text_in_its_lines(project):
    raw = on_a_terminal(project, ["chat", "--docs", "docs", "--method", "vanilla_rag", "--llm", "scripted:script.json"],
                        stdin="What is the capital of France?\nand of Germany?\nexit\n", delay=0.5)
    lines = screen(raw)
    header = next(line for line in lines if "selfrag chat ·" in line)
    assert header.startswith("selfrag chat ·"), lines
    asked = next(line for line in lines if "(asked as:" in line)
    assert asked.startswith("(asked as: What is the capital of Germany?"), lines
    assert not [line for line in lines if "starting…" in line or "s)(" in line], lines
    assert any(line.startswith("Paris") for line in lines) and any(line.startswith("Berlin") for line in lines), lines
