"""Persistent index directories with a manifest.

``save_index(retriever, dir)`` writes the retriever's own files plus
``manifest.json`` (retriever, its parameters, embedding model, document count,
corpus checksum); it builds in a temporary sibling directory and swaps it in,
so an interrupted rebuild never leaves a half-written index. ``load_index(dir)``
refuses a directory whose manifest is missing, names another retriever or
embedding model than the one asked for, or whose checksum no longer matches the
documents given, and says how to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..types import Document
from .base import Retriever

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def corpus_checksum(documents: Sequence[Document]) -> str:
    h = hashlib.sha256()
    for d in documents:
        for part in (d.id, d.title, d.text):
            h.update(part.encode("utf-8"))
            h.update(b"\x1f")
        h.update(b"\x1e")
    return h.hexdigest()


def _bm25_loader(path: Path, **options: Any) -> Retriever:
    from .bm25 import BM25Retriever

    return BM25Retriever.load(path)  # BM25 has no query-time options


def _dense_loader(path: Path, **options: Any) -> Retriever:
    from .dense import DenseRetriever

    return DenseRetriever.load(path, vector_store=options.get("vector_store"))


def _hybrid_loader(path: Path, **options: Any) -> Retriever:
    from .hybrid import HybridRetriever

    return HybridRetriever.load(path, **options)


# retriever name -> loader(dir, **query-time options); other retrievers add themselves here.
LOADERS: dict[str, Callable[..., Retriever]] = {
    "bm25": _bm25_loader,
    "dense": _dense_loader,
    "hybrid": _hybrid_loader,
}


def rebuild_command(path: str | Path, retriever: str | None, embedding_model: str | None = None) -> str:
    from .encoders import DEFAULT_MODEL

    cmd = f"selfrag index build --docs PATH --retriever {retriever or 'bm25'} --out {path}"
    if embedding_model and embedding_model != DEFAULT_MODEL:
        cmd += f" --embedding-model {embedding_model}"
    return cmd


def save_index(retriever: Retriever, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``retriever`` and its manifest to ``path`` (replacing an index already there)."""
    out = Path(path).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise DataError(f"{out} is a file; give a directory for the index")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise DataError(f"{out} is not empty and is not a selfrag index; choose a new or empty directory")
    params = retriever.params() if hasattr(retriever, "params") else {}
    manifest = {
        "format": FORMAT_VERSION,
        "retriever": retriever.name,
        "embedding_model": params.get("embedding_model"),
        "params": params,
        "document_count": len(retriever.documents),
        "corpus_checksum": corpus_checksum(retriever.documents),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        retriever.save(tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def read_manifest(path: str | Path) -> dict[str, Any]:
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise DataError(
            f"{Path(path)} is not a selfrag index (no {MANIFEST}); build one with "
            "'selfrag index build --docs PATH --retriever bm25 --out DIR'"
        )
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise DataError(f"{p} is corrupt; rebuild the index with 'selfrag index build'") from None


def load_index(
    path: str | Path,
    *,
    documents: Sequence[Document] | None = None,
    expected_method: str | None = None,
    options: dict[str, Any] | None = None,
) -> Retriever:
    """Load a saved index, refusing one that does not match what is asked for.

    ``options`` are the configured retriever options: ``embedding_model`` must
    match the one the index was built with; query-time options (hybrid fusion,
    ``vector_store``) are applied to the loaded retriever.
    """
    src = Path(path)
    manifest = read_manifest(src)
    name = manifest.get("retriever")
    built_with = manifest.get("embedding_model")
    rebuild = f"rebuild it: {rebuild_command(src, expected_method or name, built_with)}"
    if expected_method and name != expected_method:
        raise DataError(
            f"index {src} was built with retriever '{name}', not '{expected_method}'; "
            f"use --retriever {name}, or {rebuild}"
        )
    if manifest.get("format") != FORMAT_VERSION:
        raise DataError(f"index {src} has format {manifest.get('format')}, expected {FORMAT_VERSION}; {rebuild}")
    if name not in LOADERS:
        raise DataError(f"index {src} uses unknown retriever '{name}'; {rebuild}")
    opts = dict(options or {})
    wanted = opts.pop("embedding_model", None)
    if wanted and built_with:
        from .encoders import canonical_model_name

        if canonical_model_name(wanted) != built_with:
            raise DataError(
                f"index {src} was built with embedding model '{built_with}', not '{wanted}'; "
                f"rebuild it: {rebuild_command(src, name, wanted)}"
            )
    if documents is not None and corpus_checksum(documents) != manifest.get("corpus_checksum"):
        raise DataError(f"index {src} is stale: the documents changed since it was built; {rebuild}")
    retriever = LOADERS[name](src, **opts)
    if len(retriever.documents) != manifest.get("document_count"):
        raise DataError(f"index {src} is damaged: document count does not match its manifest; {rebuild}")
    return retriever
