"""Opening one document file: regular files only, never more bytes than the cap.

A FIFO would block a reader forever and a device (``/dev/zero``) never ends,
so a file is looked at (``stat``, following links) before it is opened, and
opened only when it is a regular file; the open descriptor is checked again,
so an entry swapped for a FIFO in between is refused too. A file is read up
to its cap and one byte more, so a file that grows while it is read, or
claims a size of 0 (``/proc``), cannot take more memory than the cap.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ..errors import DataError
from .limits import IngestLimits

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class NotRegular(Exception):
    """An entry that is not a regular file; the message says what it is (``a FIFO``)."""


def kind_of(mode: int) -> str:
    """What a non-regular entry is, as a skip reason names it."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _open_regular(path: Path) -> int:
    try:
        if not stat.S_ISREG(mode := os.stat(path).st_mode):
            raise NotRegular(kind_of(mode))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegular(kind_of(mode))
    return fd


def read_capped(path: Path, limits: IngestLimits, *, text: bool) -> bytes:
    """The bytes of the regular file ``path``, at most ``limits.max_text_mb`` of them for a text format
    (``text``), else ``limits.max_file_mb``: TooLarge past it, NotRegular for a FIFO, device or socket,
    a one-line DataError when it cannot be read."""
    check = limits.check_text if text else limits.check_file
    cap = limits.text_bytes if text else limits.file_bytes
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as fh:
            check(os.fstat(fh.fileno()).st_size)
            data = fh.read(cap + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    check(len(data))  # a file that grew while it was read, or that gave its size as 0 (/proc)
    return data


def sha256_of(path: Path) -> str:
    """The sha256 of a regular file, read in blocks (a JSONL corpus is not held in memory to hash it)."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
