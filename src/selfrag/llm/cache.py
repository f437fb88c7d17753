"""A persistent SQLite cache that wraps any backend.

The key is a hash of the backend spec (provider, model, server; a script
file by the hash of its content), the prompt and every sampling parameter.
Credentials are never part of it: specs show URL credentials as ``***``, so
the same model on the same server shares entries whatever the credentials,
and nothing derived from a secret is written to the file. A hit returns the
stored generation marked ``cached=True`` with zero cost. The database runs in
WAL mode with a busy timeout, so several processes (a run and its resumption)
can share it, and identical calls in flight at the same time are made once.

Each row records the ``format`` of its stored response. A row of another
format (written by another selfrag version) is a miss, and a row that cannot
be decoded is a miss that is deleted (logged once per cache): the call is made
again and its answer replaces the row, so a damaged entry never fails a
question twice.

A damaged file (an SQLite header over pages that ``PRAGMA quick_check``
finds broken when the cache is opened, or any ``sqlite3.DatabaseError`` while
it is used) is moved aside to ``PATH.damaged-<time>`` with one warning line,
and a fresh cache takes its place (:mod:`.sqlite_file`): a cache only saves
calls, so losing it costs time and money, never a question. A file that is
not an SQLite database at all (no SQLite header: perhaps the user's own file)
is never moved; it is a one-line error.

A cache that cannot be written (a read-only file, a full disk, a lock held
too long) stops storing with one warning and keeps answering from what it
holds; one that cannot be read at all is skipped with one warning
(:func:`cached` builds the wrapper, or gives the bare backend when the file
cannot be opened). Either way every question is still answered.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..redaction import redact_secrets
from ..types import Generation, TokenLogprobs
from ..validation import load_json
from .base import LLMRequest, RequestGenerator
from .sqlite_file import CacheFile, CacheUnavailable

log = logging.getLogger(__name__)

# The encoding of the response column. Bump it when that encoding changes: rows
# of another format are then misses, recomputed and replaced.
FORMAT = 1
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL,
    format INTEGER NOT NULL DEFAULT {FORMAT}
)
"""
COLUMNS = {"key", "backend", "request", "response", "created"}


def request_key(backend_spec: str, request: LLMRequest) -> str:
    fields = request.as_dict()
    if not fields["draw"]:
        del fields["draw"]  # the only draw keeps the key it had before draws were numbered
    if not fields.get("hidden"):
        fields.pop("hidden", None)  # a call that reads no state keeps the key it had before
    payload = json.dumps({"backend": backend_spec, "request": fields}, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def generation_to_json(gen: Generation) -> str:
    data = dataclasses.asdict(gen)
    if gen.hidden:  # hidden states as float16 bytes: a tenth of their size as JSON numbers
        data["hidden"] = {where: {str(layer): base64.b64encode(np.asarray(v, dtype="<f2").tobytes()).decode("ascii")
                                  for layer, v in states.items()} for where, states in gen.hidden.items()}
    return json.dumps(data, sort_keys=True)


def generation_from_json(text: str | bytes) -> Generation:
    """Decode a stored response; ValueError, TypeError or KeyError when it is not one."""
    data = load_json(text, surrogates="replace")
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError("not a stored generation (no text)")
    if data.get("logprobs") is not None:
        data["logprobs"] = tuple(TokenLogprobs(**t) for t in data["logprobs"])
    if data.get("hidden"):
        data["hidden"] = {where: {int(layer): np.frombuffer(base64.b64decode(v), dtype="<f2").astype(float).tolist()
                                  for layer, v in states.items()} for where, states in data["hidden"].items()}
    return Generation(**data)


def _prepare(conn: sqlite3.Connection) -> None:
    """The generations table (a cache from before the format column gets it: its rows are format 1)."""
    conn.execute(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(generations)")}
    if not columns >= COLUMNS:
        raise DataError(f"{_file_of(conn)} is not a selfrag cache (its 'generations' table differs); {_ANOTHER}")
    if "format" not in columns:
        try:
            conn.execute("ALTER TABLE generations ADD COLUMN format INTEGER NOT NULL DEFAULT 1")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):  # another process added it first
                raise


def _file_of(conn: sqlite3.Connection) -> str:
    """The file an open connection uses."""
    return str(conn.execute("PRAGMA database_list").fetchone()[2])


_ANOTHER = "give another --cache path (or cache.path)"


class SQLiteCache:
    """The storage half: a thread-safe key -> generation table."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file = CacheFile(self.path, label="the LLM cache", fix=_ANOTHER, prepare=_prepare)
        self.hits = 0
        self.misses = 0
        self.dropped = 0  # undecodable rows deleted
        self.storing = True  # False once a write failed for an operational reason (read-only, disk full)
        self.reading = True  # False once a read failed for one: the cache is then skipped

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._file.conn

    @_conn.setter
    def _conn(self, conn: sqlite3.Connection) -> None:
        self._file.conn = conn

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        """A DatabaseError while in use (the lock held): a damaged file is replaced by a fresh one, or,
        when it cannot be, the cache is skipped from here on (one warning)."""
        try:
            self._file.damaged(exc)
        except CacheUnavailable as unavailable:
            self.reading = self.storing = False
            log.warning("%s; going on without the cache", unavailable)

    def _stop_storing(self, exc: sqlite3.OperationalError) -> None:
        """A write failed for a reason of the system (the lock held): no more writes, one warning."""
        with suppress(sqlite3.Error):
            self._conn.rollback()
        if self.storing:
            self.storing = False
            log.warning("cannot store calls in the LLM cache %s (%s); going on without storing them "
                        "(what it already holds is still used)", self.path, exc)

    def _stop_reading(self, exc: sqlite3.OperationalError) -> None:
        if self.reading:
            self.reading = self.storing = False
            log.warning("cannot read the LLM cache %s (%s); going on without the cache", self.path, exc)

    def get(self, key: str) -> Generation | None:
        if not self.reading:
            return None
        with self._lock:
            try:
                row = self._conn.execute("SELECT response, format FROM generations WHERE key = ?", (key,)).fetchone()
            except sqlite3.OperationalError as exc:
                self._stop_reading(exc)
                return None
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
                return None
        if row is None:
            return None
        response, fmt = row
        if fmt != FORMAT:
            return None  # another version's encoding: recomputed, and the new answer replaces it
        try:
            return generation_from_json(response)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._drop(key, response, exc)
            return None

    def _drop(self, key: str, response: Any, reason: Exception) -> None:
        with self._lock:
            # Only the bad row: a good answer written meanwhile by another process stays.
            try:
                if self.storing:
                    self._conn.execute("DELETE FROM generations WHERE key = ? AND response = ?", (key, response))
                    self._conn.commit()
            except sqlite3.OperationalError as exc:
                self._stop_storing(exc)
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
            self.dropped += 1
            first = self.dropped == 1
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "cache %s: dropped an entry that could not be read (%s: %s); its call is made again%s",
            self.path,
            type(reason).__name__,
            str(reason)[:120],
            " (further ones are dropped without a warning)" if first else "",
        )

    def put(self, key: str, backend_spec: str, request: LLMRequest, gen: Generation) -> None:
        row = (key, redact_secrets(backend_spec), json.dumps(request.as_dict()), generation_to_json(gen),
               time.time(), FORMAT)
        insert = ("INSERT OR REPLACE INTO generations (key, backend, request, response, created, format) "
                  "VALUES (?, ?, ?, ?, ?, ?)")
        with self._lock:
            if not self.storing:
                return
            try:
                try:
                    self._conn.execute(insert, row)
                    self._conn.commit()
                except sqlite3.OperationalError:
                    raise
                except sqlite3.DatabaseError as exc:
                    self._damaged(exc)
                    if self.storing:
                        self._conn.execute(insert, row)
                        self._conn.commit()
            except sqlite3.OperationalError as exc:  # read-only, disk full, locked: the answer stands
                self._stop_storing(exc)

    def __len__(self) -> int:
        with self._lock:
            try:
                return int(self._conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
            except sqlite3.OperationalError:
                return 0
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
                return 0

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "dropped": self.dropped, "entries": len(self)}

    def close(self) -> None:
        with self._lock:
            self._file.close()


class CachedBackend(RequestGenerator):
    """Wraps a backend with a :class:`SQLiteCache`; same protocol as the backend."""

    def __init__(self, inner: Any, cache: SQLiteCache | str | Path) -> None:
        self.inner = inner
        self.cache = cache if isinstance(cache, SQLiteCache) else SQLiteCache(cache)
        self._inflight: dict[str, asyncio.Future[Generation]] = {}

    def __getattr__(self, name: str) -> Any:
        # Capabilities, model name, count_tokens and anything else come from the inner backend.
        return getattr(self.inner, name)

    @property
    def spec(self) -> str:
        return self.inner.spec

    @property
    def hits(self) -> int:
        return self.cache.hits

    @property
    def misses(self) -> int:
        return self.cache.misses

    async def generate_request(self, request: LLMRequest) -> Generation:
        spec = self.inner.spec
        key = request_key(spec, request)
        start = time.perf_counter()
        stored = self.cache.get(key)
        if stored is not None:
            self.cache.hits += 1
            return dataclasses.replace(
                stored, cached=True, cost_usd=0.0, latency_ms=(time.perf_counter() - start) * 1000,
                evaluated_prompt_tokens=0,
            )
        pending = self._inflight.get(key)
        if pending is not None:
            self.cache.hits += 1
            gen = await asyncio.shield(pending)
            return dataclasses.replace(gen, cached=True, cost_usd=0.0, evaluated_prompt_tokens=0)
        self.cache.misses += 1
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            gen = await self.inner.generate_request(request)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # mark retrieved so an unawaited future does not warn
            raise
        finally:
            self._inflight.pop(key, None)
        self.cache.put(key, spec, request, gen)
        future.set_result(gen)
        return gen

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.cache.close()

    def __repr__(self) -> str:
        return f"<CachedBackend {self.inner!r} at {self.cache.path}>"


def cached(backend: Any, path: str | Path) -> Any:
    """``backend`` wrapped in the cache at ``path``; the bare backend, with one warning, when the file
    cannot be opened for a reason of the system (permissions, a read-only folder). A path that cannot
    be a cache (a folder, a file that is not SQLite) is still a one-line error."""
    try:
        return CachedBackend(backend, path)
    except CacheUnavailable as exc:
        log.warning("%s; going on without the cache (its calls are made, and paid, again)", exc)
        return backend
