"""Hybrid retrieval: BM25 and dense retrieval fused into one ranking.

``fusion="rrf"`` (the default) is reciprocal rank fusion (Cormack et al., 2009):
``score(d) = sum over rankings of 1 / (rrf_k + rank(d))`` with 1-based ranks
and ``rrf_k = 60``. A document BM25 scores 0 (no query term in it) is not in the
BM25 ranking at all. ``fusion="weighted"`` is
``bm25_weight * minmax(bm25) + dense_weight * minmax(dense)`` with each score
list min-max normalised over the collection. The fusion functions are pure and
tested with hand-computed numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..types import Document, RetrievalResult
from .base import RetrieverKind
from .bm25 import KIND as BM25_KIND
from .bm25 import BM25Retriever
from .dense import KIND as DENSE_KIND
from .dense import DenseRetriever, top_indices
from .embedding_cache import EmbeddingCache
from .encoders import Encoder
from .persist import read_index_json

FUSIONS = ("rrf", "weighted")


# -- pure fusion functions -------------------------------------------------------


def ranking(scores: np.ndarray, *, drop_zero: bool = False) -> np.ndarray:
    """Document indices from best to worst score (ties in corpus order); optionally without zero scores."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    if drop_zero:
        order = order[np.asarray(scores)[order] > 0]
    return order


def reciprocal_rank_fusion(rankings: Sequence[np.ndarray], n: int, k: int = 60) -> np.ndarray:
    """Fused score of each of ``n`` documents from rankings given as index arrays, best first."""
    if k < 1:
        raise ConfigError(f"rrf_k must be at least 1, got {k}")
    fused = np.zeros(n, dtype=np.float64)
    for order in rankings:
        order = np.asarray(order, dtype=np.int64)
        fused[order] += 1.0 / (k + np.arange(1, len(order) + 1, dtype=np.float64))
    return fused


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scores mapped onto [0, 1]; a constant list maps to zeros."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    lo, hi = float(s.min()), float(s.max())
    if hi <= lo:
        return np.zeros_like(s)
    return (s - lo) / (hi - lo)


def weighted_fusion(score_lists: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Weighted sum of min-max-normalised score lists."""
    if not score_lists or len(score_lists) != len(weights):
        raise ValueError("give one weight per score list, and at least one list")
    fused = np.zeros(len(score_lists[0]), dtype=np.float64)
    for scores, weight in zip(score_lists, weights, strict=True):
        fused += weight * min_max(scores)
    return fused


def check_fusion(fusion: str, rrf_k: int, bm25_weight: float, dense_weight: float) -> None:
    if fusion not in FUSIONS:
        raise ConfigError(f"unknown fusion {fusion!r}; use one of: {', '.join(FUSIONS)}")
    if rrf_k < 1:
        raise ConfigError(f"rrf_k must be at least 1, got {rrf_k}")
    if bm25_weight < 0 or dense_weight < 0:
        raise ConfigError("bm25_weight and dense_weight must not be negative")
    if fusion == "weighted" and bm25_weight + dense_weight == 0:
        raise ConfigError("weighted fusion needs bm25_weight or dense_weight above 0")


# -- the retriever ----------------------------------------------------------------


class FusionSettings:
    """How a retriever fuses its BM25 and dense rankings, a query-time choice (a saved index can be
    fused either way): ``configure`` checks the settings and sets them."""

    fusion: str
    rrf_k: int
    bm25_weight: float
    dense_weight: float

    def configure(self, *, fusion: str, rrf_k: int, bm25_weight: float, dense_weight: float) -> None:
        check_fusion(fusion, rrf_k, bm25_weight, dense_weight)
        self.fusion, self.rrf_k = fusion, int(rrf_k)
        self.bm25_weight, self.dense_weight = float(bm25_weight), float(dense_weight)


class HybridRetriever(FusionSettings):
    """BM25 and dense retrieval over the same documents, fused."""

    name = "hybrid"

    def __init__(
        self,
        documents: Sequence[Document] | None = None,
        *,
        embedding_model: str | None = None,
        fusion: str = "rrf",
        rrf_k: int = 60,
        bm25_weight: float = 0.5,
        dense_weight: float = 0.5,
        encoder: Encoder | None = None,
        vector_store: str = "auto",
        cache: EmbeddingCache | str | Path | bool | None = True,
        show_progress: bool | None = None,
        bm25: BM25Retriever | None = None,
        dense: DenseRetriever | None = None,
    ) -> None:
        self.configure(fusion=fusion, rrf_k=rrf_k, bm25_weight=bm25_weight, dense_weight=dense_weight)
        self.bm25 = bm25 if bm25 is not None else BM25Retriever()
        self.dense = dense if dense is not None else DenseRetriever(
            embedding_model=embedding_model,
            encoder=encoder,
            vector_store=vector_store,
            cache=cache,
            show_progress=show_progress,
        )
        if documents is not None:
            self.index(documents)

    @property
    def embedding_model(self) -> str:
        return self.dense.embedding_model

    @property
    def documents(self) -> Sequence[Document]:
        return self.dense.documents

    def index(self, documents: Sequence[Document]) -> None:
        docs = list(documents)
        if not docs:
            raise DataError("cannot build a hybrid index over zero documents; give at least one")
        self.bm25.index(docs)
        self.dense.index(docs)

    def fuse(self, bm25_scores: np.ndarray, dense_scores: np.ndarray) -> np.ndarray:
        if self.fusion == "rrf":
            return reciprocal_rank_fusion(
                [ranking(bm25_scores, drop_zero=True), ranking(dense_scores)], len(dense_scores), self.rrf_k
            )
        return weighted_fusion([bm25_scores, dense_scores], [self.bm25_weight, self.dense_weight])

    def _rank(self, query: str, query_vector: np.ndarray, top_k: int, start: float) -> RetrievalResult:
        fused = self.fuse(self.bm25.scores(query), self.dense.scores_for_vector(query_vector))
        idx = top_indices(fused, min(top_k, len(self.documents)))
        return RetrievalResult(
            documents=tuple(self.documents[i] for i in idx),
            scores=tuple(float(fused[i]) for i in idx),
            query=query,
            retrieval_time_ms=(time.perf_counter() - start) * 1000,
            method=self.name,
        )

    def _check(self, top_k: int) -> None:
        if not self.documents:
            raise DataError("the hybrid retriever has no index yet; call index(documents) first")
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")

    def retrieve_sync(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self._check(top_k)
        return self._rank(query, self.dense.encoder.encode([query], query=True)[0], top_k, start)

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self._check(top_k)
        vector = (await self.dense.encoder.aencode([query], query=True))[0]
        return self._rank(query, vector, top_k, start)

    # -- persistence --------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "bm25_weight": self.bm25_weight,
            "dense_weight": self.dense_weight,
            "embedding_model": self.embedding_model,
            "bm25": self.bm25.params(),
            "dense": self.dense.params(),
        }

    def save(self, path: str | Path) -> None:
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.bm25.save(out / "bm25")
        self.dense.save(out / "dense")
        fusion = {k: v for k, v in self.params().items() if k in ("fusion", "rrf_k", "bm25_weight", "dense_weight")}
        (out / "hybrid.json").write_text(json.dumps(fusion, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, *, encoder: Encoder | None = None, **overrides: Any) -> HybridRetriever:
        """Load a saved hybrid index; ``overrides`` (fusion, rrf_k, weights, vector_store) win over saved values."""
        src = Path(path)
        params_file = src / "hybrid.json"
        if not params_file.is_file():
            raise DataError(f"{src} is not a saved hybrid index (no hybrid.json); rebuild it with 'selfrag index build'")
        fusion = read_index_json(params_file, src)
        saved = {"fusion": "rrf", "rrf_k": 60, "bm25_weight": 0.5, "dense_weight": 0.5}
        if set(fusion) - set(saved):
            raise DataError(f"{src} holds a damaged hybrid index (unknown keys in hybrid.json); rebuild it with 'selfrag index build'")
        saved.update(fusion)
        try:
            check_fusion(saved["fusion"], saved["rrf_k"], saved["bm25_weight"], saved["dense_weight"])
            if not isinstance(saved["rrf_k"], int) or isinstance(saved["rrf_k"], bool):
                raise ConfigError("rrf_k is not an integer")
        except (ConfigError, TypeError) as exc:
            raise DataError(f"{src} holds a damaged hybrid index (hybrid.json: {exc}); rebuild it with 'selfrag index build'") from None
        vector_store = overrides.pop("vector_store", None)
        unknown = set(overrides) - {"fusion", "rrf_k", "bm25_weight", "dense_weight"}
        if unknown:
            raise ConfigError(f"unknown hybrid option(s): {', '.join(sorted(unknown))}")
        saved.update({k: v for k, v in overrides.items() if v is not None})
        bm25 = BM25Retriever.load(src / "bm25")
        dense = DenseRetriever.load(src / "dense", encoder=encoder, vector_store=vector_store)
        if list(bm25.documents) != list(dense.documents):
            raise DataError(f"index {src} is damaged: its BM25 and dense parts hold different documents; rebuild it")
        return cls(bm25=bm25, dense=dense, **saved)


# The registry's entry (see selfrag.retrieval.registry). The fusion settings are query-time choices,
# always passed (a saved index is fused as configured); load() checks every option it is given.
KIND = RetrieverKind(
    name=HybridRetriever.name,
    build=HybridRetriever,
    load=HybridRetriever.load,
    files=frozenset(
        {"hybrid.json"} | {f"bm25/{f}" for f in BM25_KIND.files} | {f"dense/{f}" for f in DENSE_KIND.files}
    ),
    options={**DENSE_KIND.options, "fusion": None, "rrf_k": None, "bm25_weight": None, "dense_weight": None},
    load_options=None,
    build_options=DENSE_KIND.build_options,
)
