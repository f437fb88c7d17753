"""Evidence ranking as a retrieval stage (``retrieval.rerank: evidence``), for every method.

:class:`EvidenceReranked` wraps any retriever: asked for ``top_k`` passages,
it retrieves ``rerank_from`` and keeps the ``top_k`` with the best lexical
evidence prior (:func:`.links.evidence_prior`: the retrieval score share,
the title named in the question, the title named in another top passage),
best first, ties in retrieval order. That is the ranking the Self-RAG
methods use for their joint candidate, so ``vanilla_rag`` behind it reads
the same passages as their joint, and a comparison between them measures
the reflection, not the retrieval.

The scores it returns are the priors (descending, as the retriever contract
asks); the underlying retrieval's scores are kept in ``RetrievalResult``'s
order only through the priors they fed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from ..errors import ConfigError
from ..types import Document, RetrievalResult
from .base import Retriever, RetrieverFactory
from .links import evidence_prior

# How many passages the evidence ranking chooses from, unless configured.
RERANK_FROM = 10


class Rerank(StrEnum):
    """``retrieval.rerank``: what reorders a retrieval before a method reads it."""

    NONE = "none"
    EVIDENCE = "evidence"


def evidence_order(question: str, docs: Sequence[Document], scores: Sequence[float] | None) -> list[tuple[int, float]]:
    """(index, prior) of every passage, best prior first, ties in retrieval order."""
    priors = evidence_prior(question, docs, scores if scores is not None and len(scores) == len(docs) else None)
    return sorted(enumerate(priors), key=lambda item: (-item[1], item[0]))


class EvidenceReranked:
    """A retriever whose results are the ``top_k`` best of ``rerank_from`` by evidence prior."""

    def __init__(self, inner: Retriever, rerank_from: int = RERANK_FROM) -> None:
        if rerank_from < 1:
            raise ConfigError(f"retrieval.rerank_from must be at least 1 (got {rerank_from})")
        self.inner = inner
        self.rerank_from = rerank_from
        self.name = f"{inner.name}+evidence"

    @property
    def documents(self) -> Sequence[Document]:
        return self.inner.documents

    def index(self, documents: Sequence[Document]) -> None:
        self.inner.index(documents)

    def save(self, path: str | Path) -> None:
        self.inner.save(path)

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        wide = await self.inner.retrieve(query, max(top_k, self.rerank_from))
        order = evidence_order(query, wide.documents, wide.scores)[:top_k]
        return RetrievalResult(
            documents=tuple(wide.documents[i] for i, _ in order),
            scores=tuple(prior for _, prior in order),
            query=query,
            retrieval_time_ms=wide.retrieval_time_ms + (time.perf_counter() - start) * 1000,
            method=f"{wide.method or self.inner.name}+evidence",
        )


def reranked(retriever: Retriever, rerank: str, rerank_from: int) -> Retriever:
    """``retriever`` behind the configured rerank stage (itself for ``none``)."""
    return EvidenceReranked(retriever, rerank_from) if Rerank(rerank) is Rerank.EVIDENCE else retriever


def reranked_factory(factory: RetrieverFactory, rerank: str, rerank_from: int) -> RetrieverFactory:
    """A factory whose retrievers sit behind the configured rerank stage."""
    if Rerank(rerank) is Rerank.NONE:
        return factory

    def build(documents: Sequence[Document]) -> Retriever:
        return EvidenceReranked(factory(documents), rerank_from)

    return build
