"""Document embeddings computed once: an on-disk cache keyed by model and text hash.

Per-question corpora (HotpotQA's ten paragraphs, many shared between runs and
methods) and re-indexed collections hit the cache instead of the encoder. The
store is SQLite in WAL mode (several processes may share it) at
``.selfrag/embeddings.db``, or wherever ``SELFRAG_EMBEDDING_CACHE`` points;
``SELFRAG_EMBEDDING_CACHE=off`` disables it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import DataError
from .encoders import Encoder

log = logging.getLogger(__name__)

DEFAULT_PATH = ".selfrag/embeddings.db"
ENV_VAR = "SELFRAG_EMBEDDING_CACHE"
# Above this many texts to encode, a progress bar goes to stderr.
PROGRESS_THRESHOLD = 1000
_LOOKUP_CHUNK = 500

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key BLOB PRIMARY KEY,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL
)
"""


def text_key(model: str, text: str) -> bytes:
    return hashlib.sha256(f"{model}\x00document\x00{text}".encode()).digest()


class EmbeddingCache:
    """A thread-safe (model, text) -> float32 vector table."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(SCHEMA)
            conn.commit()
            self._conn = conn
        return self._conn

    def get_many(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``."""
        keys = [text_key(model, t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            conn = self._connect()
            for i in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[i : i + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, _dim, blob in conn.execute(
                    f"SELECT key, dim, vector FROM embeddings WHERE key IN ({marks})", chunk
                ):
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        out = {i: found[k] for i, k in enumerate(keys) if k in found}
        self.hits += len(out)
        self.misses += len(texts) - len(out)
        return out

    def put_many(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [
            (text_key(model, t), int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            conn = self._connect()
            conn.executemany("INSERT OR REPLACE INTO embeddings (key, dim, vector) VALUES (?, ?, ?)", rows)
            conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_CACHES: dict[Path, EmbeddingCache] = {}
_CACHES_LOCK = threading.Lock()


def open_cache(path: str | Path) -> EmbeddingCache:
    """The process-wide cache object for ``path`` (one connection per file)."""
    p = Path(path).expanduser().resolve()
    with _CACHES_LOCK:
        cache = _CACHES.get(p)
        if cache is None:
            cache = _CACHES[p] = EmbeddingCache(p)
        return cache


def default_cache() -> EmbeddingCache | None:
    """The cache ``SELFRAG_EMBEDDING_CACHE`` names (default ``.selfrag/embeddings.db``), or None when off."""
    value = os.environ.get(ENV_VAR, DEFAULT_PATH).strip()
    if value.lower() in ("", "0", "off", "false", "no", "none"):
        return None
    return open_cache(value)


def resolve_cache(cache: EmbeddingCache | str | Path | bool | None) -> EmbeddingCache | None:
    """``True``: the default cache; ``False``/``None``: none; a path: that file."""
    if cache is True:
        return default_cache()
    if cache is None or cache is False:
        return None
    if isinstance(cache, EmbeddingCache):
        return cache
    return open_cache(cache)


def encode_documents(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int | None = None,
    show_progress: bool | None = None,
) -> np.ndarray:
    """Embeddings of ``texts`` (one row each): cached rows are read, the rest encoded in batches.

    Identical texts are encoded once. Texts are encoded longest first so each
    batch pads to similar lengths. A progress bar is shown on stderr for long
    jobs (``show_progress=None``) or when asked.
    """
    n = len(texts)
    rows: dict[int, np.ndarray] = {}
    if cache is not None and n:
        try:
            rows = cache.get_many(encoder.name, texts)
        except sqlite3.Error as exc:
            log.warning("embedding cache %s unreadable (%s); encoding without it", cache.path, exc)
            cache = None
    todo: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        if i not in rows:
            todo.setdefault(text, []).append(i)
    unique = sorted(todo, key=len, reverse=True)
    if unique:
        size = batch_size or int(getattr(encoder, "batch_size", 64))
        fresh = _encode_batches(encoder, unique, size, show_progress)
        for text, vec in zip(unique, fresh, strict=True):
            for i in todo[text]:
                rows[i] = vec
        if cache is not None:
            try:
                cache.put_many(encoder.name, unique, fresh)
            except sqlite3.Error as exc:
                log.warning("embedding cache %s not written (%s)", cache.path, exc)
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    dims = {v.shape[0] for v in rows.values()}
    if len(dims) != 1:
        where = f" (delete {cache.path} to rebuild it)" if cache is not None else ""
        raise DataError(f"embeddings of different sizes {sorted(dims)} for model {encoder.name}{where}")
    return np.ascontiguousarray(np.vstack([rows[i] for i in range(n)]), dtype=np.float32)


def _encode_batches(encoder: Encoder, texts: list[str], batch_size: int, show_progress: bool | None) -> np.ndarray:
    from tqdm import tqdm

    if show_progress is None:
        show_progress = len(texts) >= PROGRESS_THRESHOLD
    parts = []
    with tqdm(
        total=len(texts), desc=f"encoding ({encoder.name})", unit="text", file=sys.stderr,
        disable=not show_progress, leave=False,
    ) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            parts.append(encoder.encode(batch))
            bar.update(len(batch))
    return np.vstack(parts)
