"""A deterministic, torch-free text encoder: a hashed bag of words, normalised.

Used as a stand-in encoder for dense-retrieval logic, and by the local
OpenAI-compatible embeddings server in the tests.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def hashed_vector(text: str, dim: int = 64) -> list[float]:
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little")
        vec[h % dim] += 1.0 if (h >> 31) & 1 else -1.0
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [v / norm for v in vec]


class HashingEncoder:
    """Implements the Encoder protocol; counts the texts it encodes."""

    def __init__(self, dim: int = 64, name: str | None = None) -> None:
        self.dim = dim
        self.name = name or f"test-hashing-{dim}"
        self.encoded: list[str] = []
        self.query_calls = 0

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        if query:
            self.query_calls += 1
        else:
            self.encoded.extend(texts)
        return np.asarray([hashed_vector(t, self.dim) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    async def aencode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        return self.encode(texts, query=query)
