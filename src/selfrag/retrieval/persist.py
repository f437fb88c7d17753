"""Persistent index directories with a manifest.

``save_index(retriever, dir)`` writes the retriever's own files plus
``manifest.json`` (retriever, its parameters, document count, corpus
checksum). ``load_index(dir)`` refuses a directory whose manifest is missing,
names another retriever than the one asked for, or whose checksum no longer
matches the documents given, and says how to rebuild.
"""

from __future__ import annotations

import hashlib
import json
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


def _bm25_loader(path: Path) -> Retriever:
    from .bm25 import BM25Retriever

    return BM25Retriever.load(path)


# retriever name -> loader(dir); other retrievers add themselves here.
LOADERS: dict[str, Callable[[Path], Retriever]] = {"bm25": _bm25_loader}


def save_index(retriever: Retriever, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    retriever.save(out)
    params = retriever.params() if hasattr(retriever, "params") else {}
    manifest = {
        "format": FORMAT_VERSION,
        "retriever": retriever.name,
        "params": params,
        "document_count": len(retriever.documents),
        "corpus_checksum": corpus_checksum(retriever.documents),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
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
) -> Retriever:
    src = Path(path)
    manifest = read_manifest(src)
    name = manifest.get("retriever")
    rebuild = f"rebuild it: selfrag index build --docs PATH --retriever {expected_method or name} --out {src}"
    if expected_method and name != expected_method:
        raise DataError(f"index {src} was built with retriever '{name}', not '{expected_method}'; {rebuild}")
    if manifest.get("format") != FORMAT_VERSION:
        raise DataError(f"index {src} has format {manifest.get('format')}, expected {FORMAT_VERSION}; {rebuild}")
    if name not in LOADERS:
        raise DataError(f"index {src} uses unknown retriever '{name}'; {rebuild}")
    if documents is not None and corpus_checksum(documents) != manifest.get("corpus_checksum"):
        raise DataError(f"index {src} is stale: the documents changed since it was built; {rebuild}")
    retriever = LOADERS[name](src)
    if len(retriever.documents) != manifest.get("document_count"):
        raise DataError(f"index {src} is damaged: document count does not match its manifest; {rebuild}")
    return retriever
