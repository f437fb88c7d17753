"""One process per run directory: an OS file lock on ``RUN_DIR/run.lock``.

``selfrag run`` (and ``--resume``) takes an exclusive ``flock`` on the lock
file before it reads or writes anything else in the directory and holds it
until it returns. The file keeps the holder's pid, which a refused process
names. When the run ends (finished, failed, stopped by Ctrl-C or ``kill``)
the holder removes the file while it still holds the lock, so a finished run
directory holds no lock file. A process killed outright (``kill -9``) leaves
the file behind, but the kernel dropped its lock with the process, so the next
run takes the stale file over.

Removing a lock file is safe only because a taker checks, once it holds the
lock, that the file it locked is still the one at the path: a process that
opened the file just before its holder removed it would otherwise lock a
removed file while a third process locks a new one. On a mismatch it tries
again. POSIX only (``fcntl``).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from pathlib import Path

from ..errors import DataError
from .results import cannot_write

LOCK_FILE = "run.lock"
_ATTEMPTS = 100  # files replaced under a taker this many times in a row: something else is at work


class RunLock:
    """A held lock; :meth:`release` (or leaving the ``with`` block) frees it and removes its file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path, *, fresh: bool = False) -> RunLock:
        """Lock ``run_dir`` or raise a :class:`DataError` naming the process that holds it.

        ``fresh``: the directory of a new run, removed again (while empty) when it cannot be locked.
        """
        path = Path(run_dir) / LOCK_FILE
        for _ in range(_ATTEMPTS):
            fd = _locked(path, run_dir)
            if fd is not None:
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                except OSError as exc:  # a full disk: nothing can be recorded, so stop here
                    _remove(path, fd)
                    if fresh:
                        with suppress(OSError):
                            Path(run_dir).rmdir()
                    raise cannot_write(path, exc, then="run it again" if fresh else None) from None
                return cls(path, fd)
        raise DataError(f"{path} keeps being replaced by another process; stop it and run again")

    def release(self) -> None:
        if self._fd is not None:
            _remove(self.path, self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _locked(path: Path, run_dir: Path) -> int | None:
    """A descriptor holding the lock on the file now at ``path``; None when it was replaced meanwhile."""
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
    if _same_file(fd, path):
        return fd
    os.close(fd)  # its holder removed it after we opened it: lock the file there now
    return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)


def _remove(path: Path, fd: int) -> None:
    """Remove the lock file while the lock is still held, then let the lock go."""
    with suppress(OSError):
        if _same_file(fd, path):
            path.unlink()
    os.close(fd)  # closing the only descriptor drops the flock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
