"""Dense and hybrid retrieval in Milvus: embedded Milvus Lite by default, a Milvus server by URL.

``retrieval.uri`` says where the collection lives:

* not set: an embedded Milvus Lite database (no server) in a private temporary
  folder, copied into the index directory by ``save`` (``milvus.db/``, covered
  by the manifest's checksums like any other index file); ``selfrag index
  build`` builds it next to ``--out`` instead, where a killed build resumes;
* a path ending in ``.db``: a Milvus Lite database kept there;
* ``http://HOST:19530`` (or https): a Milvus server or cluster, same code. A
  token, if the server wants one, comes from ``SELFRAG_MILVUS_TOKEN``.

Documents are embedded with selfrag's encoders (the embedding cache included)
and stored with their id, title, text, metadata, and ``source`` / ``section``
for filters. ``retrieval.search: hybrid`` adds the engine's BM25 full-text
search over the same rows, fused with the dense ranking by Milvus
(``fusion: rrf`` with ``rrf_k``, or ``weighted`` with ``dense_weight`` and
``bm25_weight``). ``retrieval.filter`` is a Milvus boolean expression applied to
every search, e.g. ``source like "handbook/%"`` or ``metadata["year"] >= 2020``.

Building inserts in batches with a progress bar and is resumable: documents
already in the collection (same position, same content hash) are neither
embedded nor inserted again (:func:`.milvus_store.sync_rows`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..redaction import redact_url_credentials
from ..types import Document, RetrievalResult
from . import milvus_store as store
from .base import RetrieverKind
from .dense import document_text
from .embedding_cache import EmbeddingCache, encode_documents, resolve_cache
from .encoders import DEFAULT_MODEL, Encoder, canonical_model_name, get_encoder
from .hybrid import FusionSettings
from .persist import read_index_json

SEARCHES = ("dense", "hybrid")
INDEX_TYPES = ("HNSW", "IVF_FLAT", "FLAT", "AUTOINDEX")
# HNSW with these settings reached recall@10 >= 0.95 against exact search at 1M passages (docs/scale.md).
DEFAULT_INDEX = ("HNSW", {"M": 16, "efConstruction": 200}, {"ef": 128})
DEFAULT_COLLECTION = "selfrag"
CANDIDATES = 100  # hybrid: passages each route (dense, BM25) hands to the fusion
BATCH = 512  # documents embedded and inserted per batch
DB_DIR = "milvus.db"


class MilvusRetriever(FusionSettings):
    """Retrieval from a Milvus collection (see the module docstring)."""

    name = "milvus"

    def __init__(
        self,
        documents: Sequence[Document] | None = None,
        *,
        uri: str | None = None,
        collection: str | None = None,
        embedding_model: str | None = None,
        encoder: Encoder | None = None,
        search: str = "dense",
        index_type: str | None = None,
        index_params: dict[str, Any] | None = None,
        search_params: dict[str, Any] | None = None,
        filter: str | None = None,  # noqa: A002 - the config key's name
        fusion: str = "rrf",
        rrf_k: int = 60,
        bm25_weight: float = 0.5,
        dense_weight: float = 0.5,
        batch_size: int | None = None,
        cache: EmbeddingCache | str | Path | bool | None = True,
        show_progress: bool | None = None,
        build_dir: str | Path | None = None,
    ) -> None:
        if search not in SEARCHES:
            raise ConfigError(f"unknown retrieval.search {search!r}; use one of: {', '.join(SEARCHES)}")
        kind = (index_type or DEFAULT_INDEX[0]).upper()
        if kind not in INDEX_TYPES:
            raise ConfigError(f"unknown retrieval.index_type {index_type!r}; use one of: {', '.join(INDEX_TYPES)}")
        self.search = search
        self.index_type = kind
        default_build, default_search = (DEFAULT_INDEX[1], DEFAULT_INDEX[2]) if kind == "HNSW" else ({}, {})
        self.index_params = dict(default_build if index_params is None else index_params)
        self.search_params = dict(default_search if search_params is None else search_params)
        self.filter = filter or None
        self.configure(fusion=fusion, rrf_k=rrf_k, bm25_weight=bm25_weight, dense_weight=dense_weight)
        self.collection = collection or DEFAULT_COLLECTION
        self.embedding_model = encoder.name if encoder is not None else canonical_model_name(embedding_model)
        self.batch_size = batch_size or BATCH
        self.show_progress = show_progress
        self._encoder = encoder
        self._cache = resolve_cache(cache)
        self._client: Any = None
        self._docs: Sequence[Document] | None = None
        # Where a local database lives when no uri is given, and whether save() may move it.
        self._temp: Path | None = None
        self._build_dir = Path(build_dir).expanduser().absolute() if build_dir and not uri else None
        if uri:
            self.uri, self.inside = uri, False
        elif self._build_dir is not None:
            self.uri, self.inside = str(self._build_dir / DB_DIR), True
        else:
            self.uri, self.inside = "", True  # a temporary database, made when first needed
        if documents is not None:
            self.index(documents)

    # -- connection ---------------------------------------------------------------
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = get_encoder(self.embedding_model)
        return self._encoder

    @property
    def client(self) -> Any:
        if self._client is None:
            if not self.uri:
                self._temp = Path(tempfile.mkdtemp(prefix="selfrag-milvus-"))
                self.uri = str(self._temp / DB_DIR)
            elif self.inside and self._docs is not None and not Path(self.uri).exists():
                raise DataError(f"the Milvus Lite database of this retriever was moved by save() from {self.uri}; "
                                "load the saved index instead")
            self._client = store.connect(self.uri)
            if self._docs is not None:  # reopened after close_connection(): searching needs it loaded
                try:
                    self._client.load_collection(self.collection)
                except Exception as exc:  # pymilvus's and grpc's own exception types
                    raise DataError(f"cannot open the milvus collection at {self.where}: {store.one_line(exc)}") from None
        return self._client

    def close(self) -> None:
        """Close the connection (and this process's embedded server for a local database)."""
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None
                if self.uri:
                    store.release_local(self.uri)
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp, self.uri, self._docs = None, "", None

    def __del__(self) -> None:  # a temporary database is removed with its retriever
        if getattr(self, "_temp", None) is not None:
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing to report to
                self.close()

    @property
    def where(self) -> str:
        return redact_url_credentials(self.uri) if self.uri else "a temporary Milvus Lite database"

    # -- building ---------------------------------------------------------------------
    @property
    def documents(self) -> Sequence[Document]:
        return self._docs if self._docs is not None else []

    def _embed(self, docs: list[Document]) -> np.ndarray:
        return encode_documents(self.encoder, [document_text(d) for d in docs], cache=self._cache,
                                batch_size=None, show_progress=False)

    def index(self, documents: Sequence[Document]) -> None:
        docs = list(documents)
        if not docs:
            raise DataError("cannot build a milvus index over zero documents; give at least one")
        from tqdm import tqdm

        from .bm25 import _stopword_set

        dimension = int(self._embed(docs[:1]).shape[1])
        client = self.client
        try:
            if client.has_collection(self.collection):
                store.check_collection(client, self.collection, dimension=dimension, lexical=self.search == "hybrid",
                                       model=self.embedding_model, where=self.where)
                client.load_collection(self.collection)  # reading what an earlier build inserted needs it loaded
            else:
                store.create_collection(client, self.collection, dimension=dimension, lexical=self.search == "hybrid",
                                        model=self.embedding_model, index_type=self.index_type,
                                        index_params=self.index_params, stopwords=sorted(_stopword_set("en")))
            show = self.show_progress if self.show_progress is not None else (len(docs) >= 1000 and sys.stderr.isatty())
            with tqdm(total=len(docs), desc="milvus index", unit="doc", disable=not show) as bar:
                store.sync_rows(client, self.collection, docs, self._embed, batch_size=self.batch_size, progress=bar)
            client.load_collection(self.collection)
        except DataError:
            raise
        except Exception as exc:  # pymilvus's and grpc's own exception types
            raise DataError(f"building the milvus index at {self.where} failed: {store.one_line(exc)}") from None
        self._docs = docs

    # -- searching ------------------------------------------------------------------
    def _check(self, top_k: int) -> None:
        if self._docs is None:
            raise DataError("the milvus retriever has no index yet; call index(documents) first")
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")

    def _params(self, top_k: int) -> dict[str, Any]:
        params = dict(self.search_params)
        if self.index_type == "HNSW":
            params["ef"] = max(int(params.get("ef", 0)), top_k)
        return {"metric_type": "IP", "params": params}

    def search_vector(self, query: str, vector: np.ndarray, top_k: int) -> list[tuple[Document, float, int]]:
        """(document, score, position) of the best ``top_k`` matches, best first (ties by position)."""
        client = self.client
        limit = min(top_k, 16_384)
        vec = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        try:
            if self.search == "hybrid":
                from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

                n = max(limit, CANDIDATES)
                routes = [
                    AnnSearchRequest(data=[vec], anns_field="vector", param=self._params(n), limit=n, expr=self.filter),
                    AnnSearchRequest(data=[query], anns_field="sparse", param={"metric_type": "BM25"}, limit=n,
                                     expr=self.filter),
                ]
                ranker = RRFRanker(self.rrf_k) if self.fusion == "rrf" else \
                    WeightedRanker(self.dense_weight, self.bm25_weight)
                hits = client.hybrid_search(self.collection, routes, ranker=ranker, limit=limit,
                                            output_fields=store.OUTPUT_FIELDS)[0]
            else:
                hits = client.search(self.collection, data=[vec], anns_field="vector", limit=limit,
                                     search_params=self._params(limit), filter=self.filter or "",
                                     output_fields=store.OUTPUT_FIELDS)[0]
        except Exception as exc:  # pymilvus's and grpc's own exception types
            message = store.one_line(exc)
            if self.filter and ("filter" in message.lower() or "field" in message.lower() or "parse" in message.lower()):
                raise ConfigError(f"retrieval.filter {self.filter!r}: {message}") from None
            raise DataError(f"milvus search at {self.where} failed: {message}") from None
        found = [(store.document(h["entity"]), float(h["distance"]), int(h["entity"].get("pk", h.get("id", 0))))
                 for h in hits]
        found.sort(key=lambda item: (-item[1], item[2]))
        return found[:top_k]

    def _result(self, query: str, found: list[tuple[Document, float, int]], start: float) -> RetrievalResult:
        return RetrievalResult(
            documents=tuple(d for d, _, _ in found),
            scores=tuple(s for _, s, _ in found),
            query=query,
            retrieval_time_ms=(time.perf_counter() - start) * 1000,
            method=self.name,
        )

    def retrieve_sync(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self._check(top_k)
        return self._result(query, self.search_vector(query, self.encoder.encode([query], query=True)[0], top_k), start)

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        start = time.perf_counter()
        self._check(top_k)
        vector = (await self.encoder.aencode([query], query=True))[0]
        found = await asyncio.to_thread(self.search_vector, query, vector, top_k)
        return self._result(query, found, start)

    # -- persistence ----------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {
            "embedding_model": self.embedding_model,
            "search": self.search,
            "collection": self.collection,
            "uri": None if self.inside else redact_url_credentials(self.uri),
            "index_type": self.index_type,
            "index_params": self.index_params,
            "search_params": self.search_params,
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "bm25_weight": self.bm25_weight,
            "dense_weight": self.dense_weight,
            "document_count": len(self.documents),
        }

    def save(self, path: str | Path) -> None:
        """Write ``milvus.json``; a database without a uri of its own is copied (or, built for an
        index, moved) into ``milvus.db/`` beside it, closed first so its files are final."""
        if self._docs is None:
            raise DataError("nothing to save: the milvus retriever has no index yet")
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        if self.inside:
            self.client.load_collection(self.collection)  # index files written now, not when first loaded
            self.close_connection()
            source, target = Path(self.uri), out / DB_DIR
            if self._build_dir is not None:
                shutil.move(source, target)
                shutil.rmtree(self._build_dir, ignore_errors=True)
                self._build_dir, self.uri = None, str(target)
            else:
                shutil.copytree(source, target)
        (out / "milvus.json").write_text(json.dumps(self.params(), indent=2), encoding="utf-8")

    def close_connection(self) -> None:
        """Close the connection but keep a temporary database (it reopens when next used)."""
        temp, self._temp = self._temp, None
        uri, docs = self.uri, self._docs
        self.close()
        self._temp, self.uri, self._docs = temp, uri, docs

    @classmethod
    def load(cls, path: str | Path, *, encoder: Encoder | None = None, cache: Any = True, **overrides: Any) -> MilvusRetriever:
        """Open the collection a saved index points to; ``overrides`` are the query-time options."""
        src = Path(path)
        if not (src / "milvus.json").is_file():
            raise DataError(f"{src} is not a saved milvus index (no milvus.json); rebuild it with 'selfrag index build'")
        params = read_index_json(src / "milvus.json", src)
        count = params.get("document_count")
        if not isinstance(count, int) or count < 1 or params.get("search") not in SEARCHES:
            raise DataError(f"{src} holds a damaged milvus index (milvus.json); rebuild it with 'selfrag index build'")
        unknown = set(overrides) - set(QUERY_OPTIONS)
        if unknown:
            raise ConfigError(f"unknown milvus option(s): {', '.join(sorted(unknown))}")
        given = {k: v for k, v in overrides.items() if v is not None}
        if given.get("search") == "hybrid" and params["search"] != "hybrid":
            raise ConfigError(f"index {src} was built with search: dense; rebuild it with search: hybrid for hybrid search")
        retriever = cls(
            uri=params.get("uri") or str(src / DB_DIR),
            collection=params.get("collection"),
            embedding_model=params.get("embedding_model") or DEFAULT_MODEL,
            encoder=encoder,
            index_type=params.get("index_type"),
            index_params=params.get("index_params"),
            cache=cache,
            **{**{key: params[key] for key in QUERY_OPTIONS if params.get(key) is not None}, **given},
        )
        retriever.inside = params.get("uri") is None
        client = retriever.client
        try:
            found = client.has_collection(retriever.collection) and store.row_count(client, retriever.collection)
            if found:
                client.load_collection(retriever.collection)
        except Exception as exc:  # pymilvus's and grpc's own exception types
            raise DataError(f"cannot open the milvus index {src} at {retriever.where}: {store.one_line(exc)}") from None
        if found != count:
            raise DataError(f"index {src}: the Milvus collection {retriever.collection!r} at {retriever.where} holds "
                            f"{found or 0} documents, not the {count} it was built with; rebuild it with 'selfrag index build'")
        retriever._docs = store.StoredDocuments(retriever, count)
        return retriever


# Options a saved index takes at load (query-time settings); the rest are fixed when it is built.
QUERY_OPTIONS = ("search", "search_params", "filter", "fusion", "rrf_k", "bm25_weight", "dense_weight")

# The registry's entry (see selfrag.retrieval.registry).
KIND = RetrieverKind(
    name=MilvusRetriever.name,
    build=MilvusRetriever,
    load=MilvusRetriever.load,
    files=frozenset({"milvus.json", f"{DB_DIR}/"}),
    options={"embedding_model": "", "uri": None, "collection": None, "search": None, "index_type": None,
             "index_params": None, "search_params": None, "filter": None, "fusion": None, "rrf_k": None,
             "bm25_weight": None, "dense_weight": None},
    load_options=QUERY_OPTIONS,
    build_options=frozenset({"cache", "show_progress", "build_dir"}),
)
