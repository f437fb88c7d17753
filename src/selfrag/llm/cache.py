"""A persistent SQLite cache that wraps any backend.

The key is a hash of the backend spec (provider, model, server), the prompt and
every sampling parameter. A hit returns the stored generation marked
``cached=True`` with zero cost. The database runs in WAL mode with a busy
timeout, so several processes (a run and its resumption) can share it, and
identical calls in flight at the same time are made once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..types import Generation, TokenLogprobs
from .base import LLMRequest, RequestGenerator

SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def request_key(backend_spec: str, request: LLMRequest) -> str:
    payload = json.dumps({"backend": backend_spec, "request": request.as_dict()}, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def generation_to_json(gen: Generation) -> str:
    return json.dumps(dataclasses.asdict(gen), sort_keys=True)


def generation_from_json(text: str) -> Generation:
    data = json.loads(text)
    if data.get("logprobs") is not None:
        data["logprobs"] = tuple(TokenLogprobs(**t) for t in data["logprobs"])
    return Generation(**data)


class SQLiteCache:
    """The storage half: a thread-safe key -> generation table."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(SCHEMA)
            self._conn.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Generation | None:
        with self._lock:
            row = self._conn.execute("SELECT response FROM generations WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return generation_from_json(row[0])

    def put(self, key: str, backend_spec: str, request: LLMRequest, gen: Generation) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO generations (key, backend, request, response, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, backend_spec, json.dumps(request.as_dict()), generation_to_json(gen), time.time()),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self)}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


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
