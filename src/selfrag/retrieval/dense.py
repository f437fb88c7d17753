"""Dense retrieval: normalised sentence embeddings and inner-product search.

Documents are embedded once (through the on-disk embedding cache) and kept as
one float32 matrix. Small collections are searched exactly with a matrix
product; from ``FAISS_THRESHOLD`` documents on, or with
``vector_store="faiss"``, a FAISS ``IndexFlatIP`` holds them (also exact, and
the index directory then carries a ``faiss.index`` file other tools can read).
The encoder is loaded lazily, so loading a saved index costs no model load
until the first query.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError, require
from ..types import Document, RetrievalResult
from .base import RetrieverKind
from .embedding_cache import EmbeddingCache, encode_documents, resolve_cache
from .encoders import DEFAULT_MODEL, Encoder, canonical_model_name, get_encoder
from .persist import read_index_json
from .store import read_documents, write_documents

FAISS_THRESHOLD = 20_000
VECTOR_STORES = ("auto", "exact", "faiss")


def document_text(doc: Document) -> str:
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, highest first; ties keep corpus order."""
    return np.argsort(-scores, kind="stable")[:k]


class DenseRetriever:
    """Cosine-similarity retrieval over sentence embeddings."""

    name = "dense"

    def __init__(
        self,
        documents: Sequence[Document] | None = None,
        *,
        embedding_model: str | None = None,
        encoder: Encoder | None = None,
        vector_store: str = "auto",
        batch_size: int | None = None,
        cache: EmbeddingCache | str | Path | bool | None = True,
        show_progress: bool | None = None,
    ) -> None:
        if vector_store not in VECTOR_STORES:
            raise ConfigError(f"unknown vector_store {vector_store!r}; use one of: {', '.join(VECTOR_STORES)}")
        self.embedding_model = encoder.name if encoder is not None else canonical_model_name(embedding_model)
        self.vector_store = vector_store
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._encoder = encoder
        self._cache = resolve_cache(cache)
        self._docs: list[Document] = []
        self._emb: np.ndarray | None = None
        self._faiss: Any = None
        if documents is not None:
            self.index(documents)

    # -- building ---------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = get_encoder(self.embedding_model)
        return self._encoder

    @property
    def documents(self) -> Sequence[Document]:
        return self._docs

    @property
    def embeddings(self) -> np.ndarray:
        """The (documents x dimension) matrix of normalised document embeddings."""
        if self._emb is None:
            raise DataError("the dense retriever has no index yet; call index(documents) first")
        return self._emb

    def index(self, documents: Sequence[Document]) -> None:
        docs = list(documents)
        if not docs:
            raise DataError("cannot build a dense index over zero documents; give at least one")
        emb = encode_documents(
            self.encoder,
            [document_text(d) for d in docs],
            cache=self._cache,
            batch_size=self.batch_size,
            show_progress=self.show_progress,
        )
        self._set_index(docs, emb)

    def _set_index(self, docs: list[Document], emb: np.ndarray, faiss_index: Any = None) -> None:
        if emb.ndim != 2 or emb.shape[0] != len(docs):
            raise DataError(f"{emb.shape[0]} embeddings for {len(docs)} documents; rebuild the index")
        self._docs = docs
        self._emb = np.ascontiguousarray(emb, dtype=np.float32)
        self._faiss = faiss_index
        if faiss_index is None and self._uses_faiss():
            faiss = require("faiss", "dense", "FAISS vector search")
            index = faiss.IndexFlatIP(self._emb.shape[1])
            index.add(self._emb)
            self._faiss = index

    @property
    def store(self) -> str:
        """Where the vectors are searched: ``faiss`` (an IndexFlatIP) or ``numpy`` (exact either way)."""
        return "faiss" if self._faiss is not None else "numpy"

    def _uses_faiss(self) -> bool:
        if self.vector_store == "auto":
            return len(self._docs) >= FAISS_THRESHOLD
        return self.vector_store == "faiss"

    # -- searching --------------------------------------------------------------
    def _query_vector(self, vector: np.ndarray) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.embeddings.shape[1]:
            raise DataError(
                f"the query embedding has {q.shape[0]} dimensions but the index has "
                f"{self.embeddings.shape[1]}: the index was built with another model than "
                f"{self.embedding_model}; rebuild it with 'selfrag index build'"
            )
        return q

    def scores_for_vector(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every indexed document to an already encoded query."""
        return self.embeddings @ self._query_vector(vector)

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of every indexed document to ``query``."""
        self.embeddings  # noqa: B018 - fail early, before loading a model, when there is no index
        return self.scores_for_vector(self.encoder.encode([query], query=True)[0])

    def search_vector(self, vector: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, scores) of the ``top_k`` nearest documents, best first."""
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        q = self._query_vector(vector)
        k = min(top_k, len(self._docs))
        if self._faiss is not None:
            found, idx = self._faiss.search(q[None, :], k)
            idx, found = idx[0], found[0]
            keep = idx >= 0
            idx, found = idx[keep], found[keep]
            order = np.lexsort((idx, -found))  # score descending, then corpus order
            return idx[order].astype(np.int64), found[order].astype(np.float32)
        scores = self.embeddings @ q
        idx = top_indices(scores, k)
        return idx, scores[idx]

    def _result(self, query: str, idx: np.ndarray, scores: np.ndarray, start: float) -> RetrievalResult:
        return RetrievalResult(
            documents=tuple(self._docs[i] for i in idx),
            scores=tuple(float(s) for s in scores),
            query=query,
            retrieval_time_ms=(time.perf_counter() - start) * 1000,
            method=self.name,
        )

    def retrieve_sync(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self.embeddings  # noqa: B018
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        idx, scores = self.search_vector(self.encoder.encode([query], query=True)[0], top_k)
        return self._result(query, idx, scores, start)

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self.embeddings  # noqa: B018
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        vector = (await self.encoder.aencode([query], query=True))[0]
        idx, scores = self.search_vector(vector, top_k)
        return self._result(query, idx, scores, start)

    # -- persistence --------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        dim = int(self._emb.shape[1]) if self._emb is not None else None
        return {"embedding_model": self.embedding_model, "dimension": dim, "vector_store": self.vector_store}

    def save(self, path: str | Path) -> None:
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "embeddings.npy", self.embeddings)
        write_documents(out / "documents.jsonl", self._docs)
        if self._faiss is not None:
            faiss = require("faiss", "dense", "FAISS vector search")
            faiss.write_index(self._faiss, str(out / "faiss.index"))
        (out / "dense.json").write_text(json.dumps(self.params(), indent=2), encoding="utf-8")

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        encoder: Encoder | None = None,
        vector_store: str | None = None,
        cache: EmbeddingCache | str | Path | bool | None = True,
    ) -> DenseRetriever:
        src = Path(path)
        params_file = src / "dense.json"
        if not params_file.is_file():
            raise DataError(f"{src} is not a saved dense index (no dense.json); rebuild it with 'selfrag index build'")

        def damaged(why: str) -> DataError:
            return DataError(f"{src} holds a damaged dense index ({why}); rebuild it with 'selfrag index build'")

        params = read_index_json(params_file, src)
        model = params.get("embedding_model")
        saved_store = params.get("vector_store", "auto")
        if not isinstance(model, str | None) or saved_store not in VECTOR_STORES:
            raise damaged("dense.json holds a mistyped embedding_model or vector_store")
        store = vector_store or saved_store
        retriever = cls(
            embedding_model=model or DEFAULT_MODEL,
            encoder=encoder,
            vector_store=store,
            cache=cache,
        )
        try:
            emb = np.load(src / "embeddings.npy", allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise DataError(f"{src}/embeddings.npy is missing or damaged ({' '.join(str(exc).split())}); rebuild the index") from None
        if not isinstance(emb, np.ndarray) or emb.ndim != 2 or emb.dtype.kind != "f" or not np.isfinite(emb).all():
            raise damaged("embeddings.npy is not a matrix of finite numbers")
        docs = read_documents(src / "documents.jsonl")
        faiss_index = None
        faiss_file = src / "faiss.index"
        if faiss_file.is_file() and store != "exact":
            faiss = require("faiss", "dense", "FAISS vector search")
            try:
                faiss_index = faiss.read_index(str(faiss_file))
            except RuntimeError:
                raise damaged("faiss.index cannot be read") from None
            if faiss_index.ntotal != len(docs) or faiss_index.d != emb.shape[1]:
                raise damaged("faiss.index does not fit embeddings.npy and the documents")
        retriever._set_index(docs, emb, faiss_index)
        return retriever


# The registry's entry (see selfrag.retrieval.registry). vector_store is also a query-time choice.
KIND = RetrieverKind(
    name=DenseRetriever.name,
    build=DenseRetriever,
    load=DenseRetriever.load,
    files=frozenset({"dense.json", "documents.jsonl", "embeddings.npy", "faiss.index"}),
    options={"embedding_model": "", "vector_store": "auto"},
    load_options=("vector_store",),
    build_options=frozenset({"cache", "show_progress"}),
)
