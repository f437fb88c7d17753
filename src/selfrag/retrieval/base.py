"""The Retriever protocol.

A retriever is built over a collection (``index(documents)``), answers
``await retrieve(query, top_k)`` with a :class:`~selfrag.types.RetrievalResult`
whose scores descend, and persists itself with ``save(dir)`` /
``load(dir)``. Per-question corpora (HotpotQA's ten paragraphs) build a small
index per question through a :class:`RetrieverFactory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..types import Document, RetrievalResult


@runtime_checkable
class Retriever(Protocol):
    name: str

    @property
    def documents(self) -> Sequence[Document]: ...

    def index(self, documents: Sequence[Document]) -> None: ...

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult: ...

    def save(self, path: str | Path) -> None: ...


# Builds an indexed retriever over a list of documents.
RetrieverFactory = Callable[[Sequence[Document]], Retriever]
