"""Why a file could not be written, in words that name the disk.

A full disk says only ``No space left on device`` (and numpy, writing an
index, only ``97800 requested and 10208 written``); which disk, and how much is
left on it, is what the user needs to act. :func:`why_not_written` gives that
reason for an ``OSError`` met while writing a path.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

FULL = {errno.ENOSPC, errno.EDQUOT}
# A short write with no errno (numpy's tofile) is a full disk when less than this is left.
NEARLY_FULL = 1 << 20


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding ``path`` (or the nearest folder of it that exists)."""
    current = _existing(Path(os.path.abspath(path)))
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(_existing(Path(os.path.abspath(path)))).free
    except OSError:
        return None


def size_text(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def is_disk_full(path: Path, exc: OSError) -> bool:
    if exc.errno in FULL:
        return True
    free = free_bytes(path)
    return exc.errno is None and free is not None and free < NEARLY_FULL


def why_not_written(path: Path, exc: OSError) -> str:
    """The reason ``path`` could not be written: for a full disk, which disk and what is free on it."""
    if is_disk_full(path, exc):
        free = free_bytes(path)
        left = f", {size_text(free)} free" if free is not None else ""
        return f"no space left on the disk mounted at {mount_point(path)}{left}; free some space there"
    if exc.errno == errno.EFBIG:
        return f"{exc.strerror}: a file size limit stops it (ulimit -f); raise the limit"
    return exc.strerror or str(exc) or type(exc).__name__
