"""What every lab report states about where it ran: date, machine, Python, commit."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> str:
    """The short commit, marked when tracked files differ from it."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def machine() -> dict[str, Any]:
    """Date (UTC), platform, CPU count (and how many this process may use), memory, Python, commit,
    and the load when the measurement started (the machine may be shared: other work shows there)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        memory_gb = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "commit": git_commit(),
        "load_average_at_start": load_average(),
    }


def machine_lines(info: dict[str, Any]) -> list[str]:
    """A report's "where it ran" lines, one per fact."""
    return [f"- {key.replace('_', ' ')}: {value}" for key, value in info.items()]
