"""Putting a newly built index directory in place of the old one in one step, and repairing a killed swap.

:func:`save_index <selfrag.retrieval.persist.save_index>` builds into a
fresh ``.NAME.building-PID-RAND`` folder beside ``NAME`` and then calls
:func:`replace_dir`:

* Where the kernel can (Linux's ``renameat2`` with ``RENAME_EXCHANGE``, on
  the usual local file systems), one system call exchanges the two folders,
  so at every instant ``NAME`` is the whole old index or the whole new one.
  The old index, now under the building name, is removed afterwards.
* Elsewhere, ``NAME`` is renamed to ``.NAME.old-PID-RAND`` and the new folder
  to ``NAME``. A kill between the two renames leaves no ``NAME``; the next
  open or build (:func:`recover`) renames the old index back.

Swaps and recoveries hold an exclusive ``flock`` on the parent folder, so a
reader never "recovers" an index in the middle of another process's swap.
Folders a killed build left (``.NAME.building-*``, ``.NAME.old-*``) are
removed by the next build of ``NAME`` (:func:`remove_stale`) when they are
older than that build and the process named in them is gone, so a build
running at the same time keeps its folder.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

AT_FDCWD = -100
RENAME_EXCHANGE = 2
# errno values that mean "this kernel or file system cannot exchange": fall back to two renames.
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV}
_KINDS = ("building", "old")


def work_dir(out: Path, kind: str) -> Path:
    """A new, empty ``.NAME.KIND-PID-RAND`` beside ``out`` (usual permissions, unlike mkdtemp's 0700)."""
    assert kind in _KINDS
    while True:
        candidate = out.parent / f".{out.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue


def _aside_name(out: Path) -> Path:
    return out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"


def _leftovers(out: Path) -> list[tuple[str, int, Path]]:
    """(kind, pid, path) of every ``.NAME.building-*`` / ``.NAME.old-*`` folder beside ``out``."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.({'|'.join(_KINDS)})-(\d+)-[0-9a-f]+")
    found = []
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            found.append((match.group(1), int(match.group(2)), Path(entry.path)))
    return found


@contextmanager
def parent_lock(out: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder that holds ``out`` (none where flock is missing)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the swap still works, without the lock
        yield
        return
    try:
        fd = os.open(out.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@functools.cache
def _renameat2():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` atomically; False when this system cannot (nothing moved)."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE:
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _recover_locked(out: Path) -> bool:
    if out.exists() or out.is_symlink():
        return False
    olds = [path for kind, _, path in _leftovers(out) if kind == "old" and (path / "manifest.json").is_file()]
    if not olds:
        return False
    newest = max(olds, key=lambda p: p.stat().st_ctime_ns)
    os.rename(newest, out)
    log.warning("%s was missing after an interrupted rebuild; restored the previous index from %s", out, newest.name)
    return True


def recover(out: Path) -> bool:
    """Restore ``out`` from ``.NAME.old-*`` when a swap was killed between its two renames.

    True when it restored something. Only a missing ``out`` is repaired; a
    folder that cannot be renamed back is left for the user (logged).
    """
    out = Path(out)
    if out.exists() or out.is_symlink() or not any(kind == "old" for kind, _, _ in _leftovers(out)):
        return False
    try:
        with parent_lock(out):
            return _recover_locked(out)
    except OSError as exc:
        log.warning("cannot restore %s from an interrupted rebuild (%s)", out, exc.strerror or exc)
        return False


def remove_stale(out: Path, started: float, keep: Path | None = None) -> int:
    """Remove the folders killed builds of ``out`` left; the number removed.

    A folder is stale when it is older than ``started`` (this build's start,
    ``time.time()``) and the process that made it is gone. ``.NAME.old-*`` is
    kept while ``out`` is missing: it is what :func:`recover` restores.
    """
    removed = 0
    for kind, pid, path in _leftovers(out):
        if path == keep or _pid_alive(pid):
            continue
        if kind == "old" and not out.exists():
            continue
        try:
            if path.stat().st_mtime >= started:
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    if removed:
        log.warning("removed %d folder(s) that interrupted builds of %s left behind", removed, out)
    return removed


def replace_dir(new: Path, out: Path, check: Callable[[Path], None] | None = None) -> None:
    """Put the folder ``new`` (a sibling of ``out``) at ``out``, replacing what is there in one step.

    ``check(out)`` runs under the lock right before the swap (to refuse an
    ``out`` that changed while the new folder was being written).
    """
    old: Path | None = None
    with parent_lock(out):
        _recover_locked(out)
        if check is not None:
            check(out)
        if not out.exists():
            os.rename(new, out)
        elif exchange(new, out):
            old = new  # the old index now sits under the building name
        else:
            old = _aside_name(out)
            os.rename(out, old)
            try:
                os.rename(new, out)
            except BaseException:
                os.rename(old, out)  # put the old index back
                raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
