"""BM25 retrieval with English stemming and stop-word removal, scored over numpy postings.

Text is analysed as bm25s analyses it (lower-case, tokens of two or more word
characters, stop words removed, then PyStemmer stems), and documents are scored
with the Lucene variant of Okapi BM25 as bm25s computes it::

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d, q) = sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))

The per-(term, document) scores are precomputed at indexing time into a
term-major sparse matrix (CSC: ``indptr``, ``indices``, ``data``), built with
vectorised numpy instead of per-document Python loops, so a query costs one
slice-and-add per query token plus a partial sort for the top k. Saved indexes
use bm25s's file layout (``data/indices/indptr.csc.index.npy``,
``vocab.index.json``, ``params.index.json``): indexes saved by earlier versions
load unchanged, and ``bm25s.BM25.load`` reads the ones saved here.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from itertools import chain, count
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..types import Document, RetrievalResult
from .base import RetrieverKind
from .persist import read_index_json
from .store import read_documents, write_documents

# bm25s's token pattern is r"(?u)\b\w\w+\b"; on a findall scan a greedy \w\w+ only
# ever matches whole runs of word characters, so the word boundaries are implied
# (same tokens, about a fifth faster).
_WORDS = re.compile(r"\w\w+").findall

# File names of bm25s's index layout.
_DATA, _INDICES, _INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"
_VOCAB, _PARAMS = "vocab.index.json", "params.index.json"
# bm25.json: parameter -> accepted types.
_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "k1": (int, float), "b": (int, float), "stemmer": (str, type(None)), "stopwords": (str, type(None)),
}  # fmt: skip


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
        self._stopwords = _stopword_set(stopwords)
        self._docs: list[Document] = []
        self._vocab: dict[str, int] | None = None  # term -> column of the score matrix
        self._data = np.zeros(0, dtype=np.float32)  # BM25 score of each (term, document) posting
        self._indices = np.zeros(0, dtype=np.intp)  # document of each posting (int32 on disk)
        self._indptr: list[int] = [0]  # postings of term t: [indptr[t], indptr[t + 1])
        if documents is not None:
            self.index(documents)

    @property
    def documents(self) -> Sequence[Document]:
        return self._docs

    # -- analysis -------------------------------------------------------------------
    def _analyze(self, words: list[str]) -> list[str]:
        """Stop words removed, then stemmed (``words`` are already lower-case)."""
        if self._stopwords:
            stop = self._stopwords
            words = [w for w in words if w not in stop]
        if self._stemmer is not None and words:
            words = self._stemmer.stemWords(words)
        return words

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """The index terms of each text: the same tokens as ``bm25s.tokenize(..., return_ids=False)``."""
        split = [_WORDS(t.lower()) for t in texts]
        unique = list(dict.fromkeys(chain.from_iterable(split)))
        terms = self._word_terms(unique)
        return [[t for t in map(terms.__getitem__, words) if t is not None] for words in split]

    def _word_terms(self, unique_words: list[str]) -> dict[str, str | None]:
        """Each distinct lower-case word mapped to its term, or to None for a stop word."""
        stop = self._stopwords
        kept = [w for w in unique_words if w not in stop]
        stems = self._stemmer.stemWords(kept) if self._stemmer is not None and kept else kept
        terms: dict[str, str | None] = dict.fromkeys(unique_words)
        terms.update(zip(kept, stems, strict=True))
        return terms

    # -- indexing -------------------------------------------------------------------
    def index(self, documents: Sequence[Document]) -> None:
        docs = list(documents)
        if not docs:
            raise DataError("cannot build a BM25 index over zero documents; give at least one")
        split = [_WORDS(document_text(d).lower()) for d in docs]
        # Stop-word removal and stemming run once per distinct word, not once per token.
        self._build(docs, split, self._word_terms)

    def index_tokens(self, documents: Sequence[Document], corpus_tokens: Sequence[Sequence[str]]) -> None:
        """Index ``documents`` from terms already produced by :meth:`tokenize` (one list per document)."""
        docs = list(documents)
        if not docs:
            raise DataError("cannot build a BM25 index over zero documents; give at least one")
        if len(corpus_tokens) != len(docs):
            raise DataError(f"got {len(corpus_tokens)} token lists for {len(docs)} documents")
        self._build(docs, corpus_tokens, lambda unique: dict(zip(unique, unique, strict=True)))

    def _build(self, docs: list[Document], token_lists: Sequence[Sequence[str]], to_terms) -> None:
        n = len(docs)
        counts = np.fromiter(map(len, token_lists), dtype=np.int64, count=n)
        # Number the distinct words by first occurrence in one C-level pass: a missing
        # key gets the next number from the counter.
        word_id: defaultdict[str, int] = defaultdict(count().__next__)
        token_words = np.fromiter(
            map(word_id.__getitem__, chain.from_iterable(token_lists)), dtype=np.int64, count=int(counts.sum())
        )
        unique = list(word_id)  # in id order
        terms = to_terms(unique)
        vocab: dict[str, int] = {}
        # word id -> term id (-1: a stop word)
        word_term = np.fromiter(
            (-1 if (t := terms[w]) is None else vocab.setdefault(t, len(vocab)) for w in unique),
            dtype=np.int64,
            count=len(unique),
        )
        token_terms = word_term[token_words]
        token_docs = np.repeat(np.arange(n, dtype=np.int64), counts)
        kept = token_terms >= 0
        token_terms, token_docs = token_terms[kept], token_docs[kept]
        doc_len = np.bincount(token_docs, minlength=n)

        # One posting per distinct (term, document), sorted by term then document.
        keys, tf = np.unique(token_terms * n + token_docs, return_counts=True)
        post_terms, post_docs = np.divmod(keys, n)
        df = np.bincount(post_terms, minlength=len(vocab))
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        # The same float32 / float64 steps as bm25s's Lucene scorer, so the scores match it bit for bit.
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        avg_len = doc_len.mean() if doc_len.size else 0.0
        norm = self.k1 * ((1 - self.b) + self.b * doc_len / avg_len) if avg_len > 0 else np.zeros(n)
        tf = tf.astype(np.float32).astype(np.float64)
        data = idf[post_terms].astype(np.float64) * (tf / (norm[post_docs] + tf))

        self._docs = docs
        self._vocab = vocab
        self._data = data.astype(np.float32)
        self._indices = post_docs.astype(np.intp)
        self._indptr = indptr.tolist()

    # -- querying -------------------------------------------------------------------
    def _require_index(self) -> None:
        if self._vocab is None:
            raise DataError("the BM25 retriever has no index yet; call index(documents) first")

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed document for ``query``."""
        self._require_index()
        return self._score_terms(self._analyze(_WORDS(query.lower())))

    def scores_for_tokens(self, tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every indexed document for query terms already produced by :meth:`tokenize`."""
        self._require_index()
        return self._score_terms(tokens)

    def _score_terms(self, terms: Sequence[str]) -> np.ndarray:
        scores = np.zeros(len(self._docs), dtype=np.float32)
        vocab, indptr, data, indices = self._vocab, self._indptr, self._data, self._indices
        assert vocab is not None
        for term in terms:  # a repeated query term counts each time, as in bm25s
            t = vocab.get(term)
            if t is not None:
                lo, hi = indptr[t], indptr[t + 1]
                # float32 additions in query-term order, as bm25s sums; with native-width
                # indices np.add.at is the fastest scatter-add numpy has (2.5x fancy +=).
                np.add.at(scores, indices[lo:hi], data[lo:hi])
        return scores

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        return self.retrieve_sync(query, top_k)

    def retrieve_sync(self, query: str, top_k: int) -> RetrievalResult:
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        start = time.perf_counter()
        scores = self.scores(query)
        order = top_k_indices(scores, top_k)
        return RetrievalResult(
            documents=tuple(map(self._docs.__getitem__, order.tolist())),
            scores=tuple(scores[order].tolist()),
            query=query,
            retrieval_time_ms=(time.perf_counter() - start) * 1000,
            method=self.name,
        )

    # -- persistence ----------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "stemmer": self.stemmer_language, "stopwords": self.stopwords}

    def save(self, path: str | Path) -> None:
        if self._vocab is None:
            raise DataError("nothing to save: the BM25 retriever has no index yet")
        out = Path(path)
        idx = out / "bm25"
        idx.mkdir(parents=True, exist_ok=True)
        np.save(idx / _DATA, self._data, allow_pickle=False)
        np.save(idx / _INDICES, self._indices.astype(np.int32), allow_pickle=False)
        np.save(idx / _INDPTR, np.asarray(self._indptr, dtype=np.int64), allow_pickle=False)
        (idx / _VOCAB).write_text(json.dumps(self._vocab, ensure_ascii=False), encoding="utf-8")
        bm25s_params = {
            "k1": self.k1, "b": self.b, "delta": 0.5, "method": "lucene", "idf_method": "lucene",
            "dtype": "float32", "int_dtype": "int32", "num_docs": len(self._docs), "backend": "numpy",
        }  # fmt: skip
        (idx / _PARAMS).write_text(json.dumps(bm25s_params, indent=4), encoding="utf-8")
        write_documents(out / "documents.jsonl", self._docs)
        (out / "bm25.json").write_text(json.dumps(self.params(), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BM25Retriever:
        """Load an index :meth:`save` wrote; a missing, unparsable or inconsistent file is a one-line DataError."""
        src = Path(path)
        params_file = src / "bm25.json"
        if not params_file.is_file():
            raise DataError(f"{src} is not a saved BM25 index (no bm25.json); rebuild it with 'selfrag index build'")

        def damaged(why: str) -> DataError:
            return DataError(f"{src} holds a damaged BM25 index ({why}); rebuild it with 'selfrag index build'")

        params = read_index_json(params_file, src)
        if set(params) - set(_PARAM_TYPES) or not all(isinstance(v, _PARAM_TYPES[k]) for k, v in params.items()):
            raise damaged("bm25.json holds unknown or mistyped parameters")
        try:
            retriever = cls(**params)
        except ConfigError as exc:
            raise damaged(f"bm25.json: {exc}") from None
        idx = src / "bm25"
        vocab = read_index_json(idx / _VOCAB, src)
        try:
            data = np.load(idx / _DATA, allow_pickle=False)
            indices = np.load(idx / _INDICES, allow_pickle=False)
            indptr = np.load(idx / _INDPTR, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise damaged(" ".join(str(exc).split())) from None
        docs = read_documents(src / "documents.jsonl")
        if not all(isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype.kind in "iuf" for a in (data, indices, indptr)):
            raise damaged("its arrays have the wrong shape or type")
        if indices.dtype.kind == "f" or indptr.dtype.kind == "f":
            raise damaged("its posting arrays are not integers")
        if (
            len(indptr) < 1
            or len(data) != len(indices)
            or indptr[0] != 0
            or indptr[-1] != len(data)
            or np.any(np.diff(indptr) < 0)
            or (len(indices) and (indices.min() < 0 or indices.max() >= len(docs)))
        ):
            raise damaged("its posting arrays do not fit together or do not fit its documents")
        n_terms = len(indptr) - 1
        if not all(isinstance(t, str) and isinstance(i, int) for t, i in vocab.items()):
            raise damaged(f"{_VOCAB} is not a map of terms to numbers")
        # bm25s adds an empty-string term with no postings column; queries never produce it.
        retriever._vocab = {t: i for t, i in vocab.items() if 0 <= i < n_terms}
        retriever._data = np.asarray(data, dtype=np.float32)
        retriever._indices = np.asarray(indices, dtype=np.intp)
        retriever._indptr = [int(x) for x in indptr]
        retriever._docs = docs
        return retriever


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, highest first, ties in corpus order.

    The same as ``np.argsort(-scores, kind="stable")[:k]``, but sorts only the k
    best (found with ``argpartition``) instead of the whole collection.
    """
    n = len(scores)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    kth = scores[np.argpartition(-scores, k - 1)[k - 1]]  # the k-th highest score
    above = np.flatnonzero(scores > kth)
    ties = np.flatnonzero(scores == kth)[: k - len(above)]  # the first tied documents in corpus order
    candidates = np.concatenate([above, ties])
    return candidates[np.argsort(-scores[candidates], kind="stable")]


def document_text(doc: Document) -> str:
    """The text BM25 indexes for a document: its title, a newline and its text (the text alone if untitled)."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _make_stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    try:
        stemmer = Stemmer.Stemmer(language)
    except KeyError as exc:
        raise ConfigError(f"unknown stemmer language {language!r}; try 'english'") from exc
    # Words are stemmed once per distinct word per call already; PyStemmer's own cache
    # (10,000 words) only slows a corpus-sized vocabulary down, about threefold.
    stemmer.maxCacheSize = 0
    return stemmer


def _stopword_set(stopwords: str | None) -> frozenset[str]:
    """The stop-word list bm25s uses for ``stopwords`` ("en", "english", "de", ..., or None)."""
    if not stopwords:
        return frozenset()
    from bm25s.tokenization import _infer_stopwords

    try:
        return frozenset(_infer_stopwords(stopwords))
    except ValueError as exc:
        raise ConfigError(f"unknown stop-word list {stopwords!r}; try 'en' or none") from exc


# The registry's entry (see selfrag.retrieval.registry): BM25 takes no config options and no query-time ones.
KIND = RetrieverKind(
    name=BM25Retriever.name,
    build=BM25Retriever,
    load=BM25Retriever.load,
    files=frozenset({"bm25.json", "documents.jsonl", *(f"bm25/{f}" for f in (_DATA, _INDICES, _INDPTR, _VOCAB, _PARAMS))}),
)
