"""SQLite cache files that heal: a damaged file is moved aside and a fresh one takes its place.

A cache only saves work, so a file whose pages are broken (its SQLite header
intact) is no reason to stop: ``PRAGMA quick_check`` runs when the file is
opened, and any ``sqlite3.DatabaseError`` other than an operational one
(locked, read-only, disk full) while it is used counts as damage. The file
(and its WAL) is renamed to ``PATH.damaged-<time>`` with one warning line and
a new file is opened. A file without an SQLite header is not touched: it may
be the user's own, so it is a one-line error. A file that cannot be opened for
an operational reason (permissions, a read-only folder) raises
:class:`CacheUnavailable`, which a caller may answer by going on without the
cache. Used by the LLM cache (:mod:`selfrag.llm.cache`); any other SQLite
cache can use it the same way.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError, DataError
from ..redaction import redact_secrets

log = logging.getLogger("selfrag.llm.cache")

SQLITE_HEADER = b"SQLite format 3\x00"


class CacheUnavailable(ConfigError):
    """The file cannot be opened for reasons of the system, not of the path given (permissions, a
    read-only folder, a lock): a cache only saves work, so callers may go on without it."""


class _Damaged(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_sqlite_file(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _damage(conn: sqlite3.Connection) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the open database, or None when it is sound."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:
        return str(exc)
    if rows == [("ok",)]:
        return None
    return "; ".join(str(r[0]) for r in rows[:2]) or "quick_check failed"


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def move_aside(path: Path, reason: str, label: str = "the LLM cache") -> Path:
    """Rename a damaged file (and its WAL) to ``PATH.damaged-<time>``; one warning line."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    try:
        os.rename(path, target)
    except OSError as exc:  # a read-only folder: the damaged file stays, and the cache cannot be used
        raise CacheUnavailable(f"{label} {path} is damaged ({redact_secrets(reason)[:200]}) and cannot be moved "
                               f"aside ({exc.strerror or exc})") from None
    wal, shm = path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
    if wal.exists():
        os.rename(wal, target.with_name(target.name + "-wal"))
    shm.unlink(missing_ok=True)
    log.warning("%s %s is damaged (%s); moved it to %s and started a fresh cache (what it held will be computed again)",
                label, path, redact_secrets(reason)[:200], target.name)
    return target


class CacheFile:
    """One connection to a cache file, reopened on a fresh file when the old one turns out damaged.

    ``prepare(conn)`` creates the schema (and may raise a DataError for a
    database that is not this cache's); ``fix`` ends the one-line errors
    ("give another --cache path").
    """

    def __init__(self, path: Path, *, label: str, fix: str, prepare: Callable[[sqlite3.Connection], None]) -> None:
        self.path = path
        self.label = label
        self.fix = fix
        self.prepare = prepare
        self.replaced = 0
        try:
            self.conn = self._open()
        except _Damaged as exc:
            move_aside(path, exc.reason, label)
            self.conn = self._open()
        self._inode = _inode(path)

    def _open(self) -> sqlite3.Connection:
        path, where = self.path, f"{self.label} {self.path}"
        if path.is_dir():
            raise ConfigError(f"{where} is a folder; give a file path such as {path / 'cache.db'}; {self.fix}")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise ConfigError(f"cannot put {where} under {parent}: {parent} is a file; {self.fix}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the folder of {where} ({exc.strerror or exc}); {self.fix}") from None
        conn = None
        try:
            conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")
            self.prepare(conn)
            conn.commit()
            damage = _damage(conn)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.OperationalError):  # cannot open, read-only, locked ...
                raise CacheUnavailable(f"cannot use {where} ({exc}); check the path and its permissions") from None
            if _is_sqlite_file(path):
                raise _Damaged(str(exc)) from None
            raise DataError(f"{where} is not an SQLite database ({exc}); delete it or {self.fix}") from None
        except DataError:
            conn.close()
            raise
        if damage is not None:
            conn.close()
            raise _Damaged(damage)
        return conn

    def damaged(self, exc: sqlite3.DatabaseError) -> None:
        """Handle a DatabaseError met while in use: re-raise an operational one, else replace the file.

        The file is moved aside only if it is still the one this connection
        opened: another process may have replaced it already.
        """
        if isinstance(exc, sqlite3.OperationalError):
            raise exc
        self.conn.close()
        if _inode(self.path) == self._inode:
            move_aside(self.path, str(exc), self.label)
        try:
            self.conn = self._open()
        except _Damaged as again:  # another process's file, damaged too
            move_aside(self.path, again.reason, self.label)
            self.conn = self._open()
        self._inode = _inode(self.path)
        self.replaced += 1

    def close(self) -> None:
        self.conn.close()
