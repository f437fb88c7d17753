"""Rebuilding a saved index over a folder that changed: only the changed files are read and embedded.

An index built from files records, in its manifest, each file's sha256 and
the ids of its passages (``sources``) and the chunk settings (``chunking``).
``selfrag index build`` over the same ``--out`` reads that manifest first:
a file whose bytes hash the same keeps its passages without being parsed
(:func:`selfrag.ingest.loading`), and for ``dense`` and ``hybrid`` those
passages keep their embeddings from the old index, so only the passages of
new or changed files are encoded. A different retriever, embedding model or
chunk setting, or an old index that fails its checks, is rebuilt from
scratch (one log line says why).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..ingest import ChunkSettings, FileDocs
from ..types import Document
from .embedding_cache import EmbeddingCache, resolve_cache, text_key

log = logging.getLogger(__name__)


def sources_manifest(files: Sequence[FileDocs]) -> dict[str, dict[str, Any]]:
    """The manifest's ``sources``: per file, its sha256 and the ids of its passages."""
    return {f.rel: {"sha256": f.sha256, "passages": [d.id for d in f.documents]} for f in files}


@dataclass
class Previous:
    """What an earlier index over the same documents can give a rebuild."""

    files: dict[str, FileDocs]
    # (embedding model, text as embedded) -> vector, for dense and hybrid indexes.
    vectors: dict[bytes, np.ndarray]


def previous_build(out: str | Path, retriever: str, options: Mapping[str, Any], chunks: ChunkSettings) -> Previous | None:
    """The files and vectors of the index at ``out``, when a rebuild can reuse them (else None)."""
    from .encoders import canonical_model_name
    from .persist import MANIFEST, load_index, read_manifest

    path = Path(out).expanduser()
    if not (path / MANIFEST).is_file():
        return None
    try:
        manifest = read_manifest(path)
    except DataError:
        return None
    sources = manifest.get("sources")
    why = None
    if not isinstance(sources, dict):
        why = "it records no per-file hashes"
    elif manifest.get("retriever") != retriever:
        why = f"it was built with retriever {manifest.get('retriever')!r}"
    elif manifest.get("chunking") != chunks.as_dict():
        why = "it was built with other chunk settings"
    elif options.get("embedding_model") and manifest.get("embedding_model") != canonical_model_name(
            options["embedding_model"]):
        why = "it was built with another embedding model"
    if why:
        log.info("index %s: rebuilding every file (%s)", path, why)
        return None
    try:
        query_options = {k: v for k, v in options.items() if k not in ("show_progress", "cache")}
        old = load_index(path, expected_method=retriever, options=query_options)
    except DataError as exc:
        log.warning("index %s: rebuilding every file, the old index fails its checks (%s)", path, exc)
        return None
    by_id = {d.id: d for d in old.documents}
    files: dict[str, FileDocs] = {}
    for rel, entry in sources.items():
        ids = entry.get("passages") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if isinstance(ids, list) and isinstance(digest, str) and all(i in by_id for i in ids):
            files[rel] = FileDocs(rel, digest, [by_id[i] for i in ids])
    return Previous(files, _vectors(old))


def _vectors(retriever: Any) -> dict[bytes, np.ndarray]:
    """(model, embedded text) key -> the saved vector of every passage of a dense or hybrid index."""
    from .dense import document_text

    dense = getattr(retriever, "dense", retriever)
    if not hasattr(dense, "embeddings") or not hasattr(dense, "embedding_model"):
        return {}
    matrix = dense.embeddings
    return {text_key(dense.embedding_model, document_text(d)): matrix[i] for i, d in enumerate(dense.documents)}


class PriorVectors(EmbeddingCache):
    """An embedding cache that answers first from an old index's vectors, then from ``inner`` (or none)."""

    def __init__(self, vectors: dict[bytes, np.ndarray], inner: EmbeddingCache | None) -> None:
        super().__init__(inner.path if inner is not None else Path("(old index)"))
        self.vectors = vectors
        self.inner = inner

    def get_many(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        out = {i: self.vectors[k] for i, t in enumerate(texts) if (k := text_key(model, t)) in self.vectors}
        rest = [i for i in range(len(texts)) if i not in out]
        if self.inner is not None and rest:
            found = self.inner.get_many(model, [texts[i] for i in rest])
            out.update({rest[j]: v for j, v in found.items()})
        self.hits += len(out)
        self.misses += len(texts) - len(out)
        return out

    def put_many(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        if self.inner is not None:
            self.inner.put_many(model, texts, vectors)


def with_prior_vectors(options: dict[str, Any], previous: Previous | None) -> dict[str, Any]:
    """Build options whose embedding cache answers from the old index first (dense and hybrid only)."""
    if previous is None or not previous.vectors:
        return options
    return {**options, "cache": PriorVectors(previous.vectors, resolve_cache(options.get("cache", True)))}


def passages_of(files: Sequence[FileDocs]) -> list[Document]:
    return [d for f in files for d in f.documents]
