"""Retrievers by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError
from ..types import Document
from .base import Retriever, RetrieverFactory


def _bm25(documents: Sequence[Document] | None, **options: Any) -> Retriever:
    from .bm25 import BM25Retriever

    return BM25Retriever(documents, **options)


def _dense(documents: Sequence[Document] | None, **options: Any) -> Retriever:
    from .dense import DenseRetriever

    return DenseRetriever(documents, **options)


def _hybrid(documents: Sequence[Document] | None, **options: Any) -> Retriever:
    from .hybrid import HybridRetriever

    return HybridRetriever(documents, **options)


# name -> builder(documents, **options); documents may be None for an empty retriever.
RETRIEVERS: dict[str, Callable[..., Retriever]] = {
    "bm25": _bm25,
    "dense": _dense,
    "hybrid": _hybrid,
}


def available_retrievers() -> list[str]:
    return sorted(RETRIEVERS)


def create_retriever(method: str, documents: Sequence[Document] | None = None, **options: Any) -> Retriever:
    """Build (and index, when documents are given) the retriever called ``method``."""
    try:
        builder = RETRIEVERS[method]
    except KeyError:
        raise ConfigError(
            f"unknown retriever {method!r}; use one of: {', '.join(available_retrievers())}"
        ) from None
    return builder(documents, **options)


def retriever_factory(method: str, **options: Any) -> RetrieverFactory:
    """A function that indexes a document list with the named retriever (for per-question corpora)."""
    if method not in RETRIEVERS:
        create_retriever(method)  # raises the helpful error

    def build(documents: Sequence[Document]) -> Retriever:
        return create_retriever(method, documents, **options)

    return build
