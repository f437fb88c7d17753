"""BM25 retrieval on bm25s, with English stemming and stop-word removal."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..types import Document, RetrievalResult
from .store import read_documents, write_documents


class BM25Retriever:
    """Okapi BM25 (Lucene variant, k1=1.5, b=0.75 by default) over a document list."""

    name = "bm25"

    def __init__(
        self,
        documents: Sequence[Document] | None = None,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        stemmer: str | None = "english",
        stopwords: str | None = "en",
    ) -> None:
        self.k1 = k1
        self.b = b
        self.stemmer_language = stemmer
        self.stopwords = stopwords
        self._stemmer = _make_stemmer(stemmer)
        self._bm25: Any = None
        self._docs: list[Document] = []
        if documents is not None:
            self.index(documents)

    @property
    def documents(self) -> Sequence[Document]:
        return self._docs

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(
            texts,
            stopwords=self.stopwords,
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )

    def index(self, documents: Sequence[Document]) -> None:
        import bm25s

        docs = list(documents)
        if not docs:
            raise DataError("cannot build a BM25 index over zero documents; give at least one")
        corpus_tokens = self._tokenize([_doc_text(d) for d in docs])
        bm25 = bm25s.BM25(k1=self.k1, b=self.b)
        bm25.index(corpus_tokens, show_progress=False)
        self._bm25 = bm25
        self._docs = docs

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed document for ``query``."""
        if self._bm25 is None:
            raise DataError("the BM25 retriever has no index yet; call index(documents) first")
        tokens = self._tokenize([query])[0]
        known = [t for t in tokens if t in self._bm25.vocab_dict]
        if not known:
            return np.zeros(len(self._docs), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float32)

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        return self.retrieve_sync(query, top_k)

    def retrieve_sync(self, query: str, top_k: int) -> RetrievalResult:
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        start = time.perf_counter()
        scores = self.scores(query)
        k = min(top_k, len(self._docs))
        # Stable sort: ties keep corpus order, so results are deterministic.
        order = np.argsort(-scores, kind="stable")[:k]
        return RetrievalResult(
            documents=tuple(self._docs[i] for i in order),
            scores=tuple(float(scores[i]) for i in order),
            query=query,
            retrieval_time_ms=(time.perf_counter() - start) * 1000,
            method=self.name,
        )

    def params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "stemmer": self.stemmer_language, "stopwords": self.stopwords}

    def save(self, path: str | Path) -> None:
        if self._bm25 is None:
            raise DataError("nothing to save: the BM25 retriever has no index yet")
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self._bm25.save(str(out / "bm25"), show_progress=False)
        write_documents(out / "documents.jsonl", self._docs)
        (out / "bm25.json").write_text(json.dumps(self.params(), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BM25Retriever:
        import bm25s

        src = Path(path)
        params_file = src / "bm25.json"
        if not params_file.is_file():
            raise DataError(f"{src} is not a saved BM25 index (no bm25.json); rebuild it with 'selfrag index build'")
        params = json.loads(params_file.read_text(encoding="utf-8"))
        retriever = cls(**params)
        retriever._bm25 = bm25s.BM25.load(str(src / "bm25"), show_progress=False)
        retriever._docs = read_documents(src / "documents.jsonl")
        return retriever


def _doc_text(doc: Document) -> str:
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _make_stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    try:
        return Stemmer.Stemmer(language)
    except KeyError as exc:
        raise ConfigError(f"unknown stemmer language {language!r}; try 'english'") from exc
