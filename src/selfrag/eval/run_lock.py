"""One process per run directory: an OS file lock on ``RUN_DIR/run.lock``.

``selfrag run`` (and ``--resume``) takes an exclusive ``flock`` on the lock
file before it reads or writes anything else in the directory and holds it
until it returns. The kernel drops the lock when the process ends, however it
ends (``kill -9`` included), so a stale lock never blocks a resumption. The
file keeps the holder's pid, which a refused process names; the file itself
stays (removing it would let two processes lock two different files).
POSIX only (``fcntl``).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import DataError
from .results import cannot_write

LOCK_FILE = "run.lock"


class RunLock:
    """A held lock; :meth:`release` (or leaving the ``with`` block) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Lock ``run_dir`` or raise a :class:`DataError` naming the process that holds it."""
        path = Path(run_dir) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise cannot_write(path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (pid {holder})" if holder else ""
            raise DataError(
                f"{run_dir} is in use by another selfrag run{who}; wait for it to finish, "
                f"or stop it and resume with: selfrag run --resume {run_dir}"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise cannot_write(path, exc) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
