"""The Milvus side of the milvus retriever: connecting, the collection's schema, resumable inserts.

A collection holds one row per document: ``pk`` (the document's position in
the corpus), ``doc_id``, ``title``, ``text``, ``source`` and ``section`` (from
the document's metadata, for filters), ``metadata`` (all of it, as JSON),
``hash`` (of the id, title, text and metadata: what tells an inserted document
from a changed one) and ``vector``; with full-text search also ``sparse``, the
engine's BM25 terms of ``title`` and ``text`` (``lexical``), filled by a BM25
function on insert.

:func:`sync_rows` makes a collection hold exactly a document list: rows whose
position and hash match are kept (a build killed midway resumes where it
stopped, without embedding or inserting anything twice), changed or surplus
rows are deleted, and the missing ones are embedded and inserted in batches.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError, require
from ..types import Document
from .milvus_quiet import QuietClient, silenced

SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://", "unix:")
# Milvus's limits for a VARCHAR field, in bytes.
MAX_TEXT = 65_535
MAX_SHORT = 4_096
OUTPUT_FIELDS = ["pk", "doc_id", "title", "text", "metadata"]
TOKEN_ENV = "SELFRAG_MILVUS_TOKEN"  # a server's token ("user:password" or an API key), never stored
PROPERTY = "selfrag.embedding_model"  # the collection property naming the model its vectors came from


def is_server(uri: str) -> bool:
    return uri.startswith(SERVER_SCHEMES)


def local_path(uri: str) -> Path:
    """A Milvus Lite location as an absolute path ending in ``.db`` (what pymilvus opens locally)."""
    path = Path(uri).expanduser().absolute()
    if path.suffix != ".db":
        raise ConfigError(
            f"retrieval.uri {uri!r}: a local Milvus Lite database is a path ending in .db "
            "(e.g. corpus.db), or use http://HOST:19530 for a Milvus server"
        )
    return path


def quiet_pymilvus() -> None:
    """pymilvus logs every failed call at ERROR level, and the embedded server each call it does not
    implement (which pymilvus then does without); selfrag reports errors as one line instead."""
    for name in ("pymilvus", "grpc._server"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.CRITICAL)


def _held_here(path: Path) -> bool:
    try:
        from milvus_lite.server_manager import server_manager_instance

        return str(path) in getattr(server_manager_instance, "_servers", {})
    except ImportError:
        return False


def check_not_locked(path: Path) -> None:
    """Refuse a Milvus Lite database another process has open (Milvus Lite serves one process)."""
    lock = path / "LOCK"
    if not lock.is_file() or _held_here(path):
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        raise DataError(
            f"the Milvus Lite database {path} is open in another process, and Milvus Lite serves one "
            f"process at a time; stop that process, or serve it to several with "
            f"'milvus-lite server --data-dir {path}' and retrieval.uri: http://127.0.0.1:19530"
        ) from None
    finally:
        os.close(fd)


def connect(uri: str) -> Any:
    """A ``MilvusClient`` for a server URL or a local Milvus Lite path; a one-line error when it fails."""
    # gRPC's C core logs keepalive chatter between client and embedded server on stderr.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    pymilvus = require("pymilvus", "milvus", "the milvus retriever")
    quiet_pymilvus()
    target = uri
    if not is_server(uri):
        path = local_path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        check_not_locked(path)
        target = str(path)
        require("milvus_lite", "milvus", "a local Milvus Lite database")
    try:
        with silenced():  # pymilvus's own [ERROR] lines and tracebacks: selfrag says it in one line
            return QuietClient(pymilvus.MilvusClient(uri=target, token=os.environ.get(TOKEN_ENV, "")))
    except Exception as exc:  # pymilvus raises its own exception types, and grpc's
        raise DataError(f"cannot open Milvus at {uri}: {one_line(exc)}") from None


def release_local(uri: str) -> None:
    """Close this process's embedded Milvus Lite server for ``uri`` (flushes it; its files stop changing)."""
    if is_server(uri):
        return
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return
    server_manager_instance.release_server(str(local_path(uri)))


def one_line(exc: BaseException) -> str:
    """An engine error as one line (Milvus messages span several, with a caret diagram)."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).splitlines()[0].split())


# -- the collection -------------------------------------------------------------------


def create_collection(client: Any, name: str, *, dimension: int, lexical: bool, model: str,
                      index_type: str, index_params: dict[str, Any], stopwords: Sequence[str]) -> None:
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=MAX_SHORT)
    schema.add_field("title", DataType.VARCHAR, max_length=MAX_SHORT)
    text = {"enable_analyzer": True, "analyzer_params": {
        "tokenizer": "standard", "filter": ["lowercase", {"type": "stop", "stop_words": list(stopwords)}]}}
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT, **(text if lexical else {}))
    schema.add_field("source", DataType.VARCHAR, max_length=MAX_SHORT)
    schema.add_field("section", DataType.VARCHAR, max_length=MAX_SHORT)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("hash", DataType.VARCHAR, max_length=64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    indexes = client.prepare_index_params()
    indexes.add_index(field_name="vector", index_type=index_type, metric_type="IP", params=index_params)
    if lexical:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                     input_field_names=["text"], output_field_names=["sparse"]))
        indexes.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    try:
        client.create_collection(name, schema=schema, index_params=indexes, properties={PROPERTY: model})
    except Exception as exc:
        hint = "; this server has no full-text search (Milvus 2.5 or later has it): use retrieval.search: dense" \
            if lexical and "function" in one_line(exc).lower() else ""
        raise DataError(f"cannot create the Milvus collection {name!r}: {one_line(exc)}{hint}") from None


def check_collection(client: Any, name: str, *, dimension: int, lexical: bool, model: str, where: str) -> None:
    """Refuse a collection that another set-up wrote (other fields, size of vector or embedding model)."""
    info = client.describe_collection(name)
    fields = {f["name"]: f for f in info.get("fields", [])}
    fix = f"use another retrieval.collection, or drop {name!r} at {where}"
    wanted = {"pk", "doc_id", "title", "text", "source", "section", "metadata", "hash", "vector"}
    if not wanted <= set(fields):
        raise DataError(f"the Milvus collection {name!r} at {where} was not written by selfrag; {fix}")
    dim = int((fields["vector"].get("params") or {}).get("dim", 0))
    if dim != dimension:
        raise DataError(f"the Milvus collection {name!r} at {where} holds {dim}-dimensional vectors, "
                        f"the embedding model gives {dimension}; {fix}")
    built_with = (info.get("properties") or {}).get(PROPERTY)
    if built_with and built_with != model:
        raise DataError(f"the Milvus collection {name!r} at {where} was built with embedding model "
                        f"{built_with!r}, not {model!r}; {fix}")
    if lexical and "sparse" not in fields:
        raise DataError(f"the Milvus collection {name!r} at {where} has no full-text field (it was built "
                        f"with retrieval.search: dense); {fix}, or use search: dense")


def stored_model(client: Any, name: str) -> str | None:
    value = (client.describe_collection(name).get("properties") or {}).get(PROPERTY)
    return value if isinstance(value, str) else None


# -- rows -------------------------------------------------------------------------------


def content_hash(doc: Document) -> str:
    h = hashlib.sha256()
    for part in (doc.id, doc.title, doc.text, json.dumps(doc.metadata or {}, sort_keys=True, default=str)):
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def _fits(value: str, limit: int, what: str, doc: Document) -> str:
    if len(value.encode("utf-8")) > limit:
        raise DataError(f"document {doc.id!r}: its {what} is longer than {limit:,} bytes, Milvus's limit "
                        "for a text field; split it into shorter passages")
    return value


def row(pk: int, doc: Document, vector: np.ndarray, digest: str) -> dict[str, Any]:
    meta = dict(doc.metadata or {})
    source = meta.get("source", meta.get("path", ""))
    return {
        "pk": pk,
        "doc_id": _fits(doc.id, MAX_SHORT, "id", doc),
        "title": _fits(doc.title or "", MAX_SHORT, "title", doc),
        "text": _fits(doc.text, MAX_TEXT, "text", doc),
        "source": _fits(str(source or ""), MAX_SHORT, "source", doc),
        "section": _fits(str(meta.get("section", "") or ""), MAX_SHORT, "section", doc),
        "metadata": json.loads(json.dumps(meta, default=str)),
        "hash": digest,
        "vector": vector.astype(np.float32).tolist(),
    }


def document(entity: dict[str, Any]) -> Document:
    meta = entity.get("metadata")
    return Document(id=str(entity["doc_id"]), title=entity.get("title") or "", text=entity["text"],
                    metadata=meta if isinstance(meta, dict) else {})


def scan(client: Any, name: str, fields: list[str], start: int, stop: int, step: int = 2_000) -> Iterator[dict]:
    """Rows with ``start <= pk < stop`` in pk order, fetched ``step`` at a time."""
    for lo in range(start, stop, step):
        hi = min(lo + step, stop)
        rows = client.query(name, filter=f"pk >= {lo} and pk < {hi}", output_fields=fields, limit=hi - lo)
        yield from sorted(rows, key=lambda r: r["pk"])


def row_count(client: Any, name: str) -> int:
    rows = client.query(name, filter="", output_fields=["count(*)"])
    return int(rows[0]["count(*)"]) if rows else 0


class StoredDocuments(Sequence[Document]):
    """The documents of a loaded collection, in corpus order, read from Milvus when asked for."""

    def __init__(self, retriever: Any, count: int) -> None:
        self._retriever = retriever
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        return next(iter(self._rows(i, i + 1)))

    def __iter__(self):
        return self._rows(0, self._count)

    def _rows(self, start: int, stop: int):
        r = self._retriever
        for entity in scan(r.client, r.collection, OUTPUT_FIELDS, start, stop):
            yield document(entity)


def sync_rows(client: Any, name: str, docs: Sequence[Document], embed: Callable[[list[Document]], np.ndarray], *,
              batch_size: int, progress: Any) -> int:
    """Make the collection hold exactly ``docs`` (see the module docstring); returns how many were inserted."""
    digests = [content_hash(d) for d in docs]
    present: dict[int, str] = {}
    if row_count(client, name):
        present = {r["pk"]: r["hash"] for r in scan(client, name, ["pk", "hash"], 0, len(docs))}
        client.delete(name, filter=f"pk >= {len(docs)}")  # rows of a longer corpus built here before
    stale = [pk for pk, digest in present.items() if digest != digests[pk]]
    if stale:
        client.delete(name, ids=stale)
    missing = [i for i in range(len(docs)) if present.get(i) != digests[i]]
    progress.update(len(docs) - len(missing))
    for lo in range(0, len(missing), batch_size):
        batch = missing[lo: lo + batch_size]
        vectors = embed([docs[i] for i in batch])
        client.insert(name, [row(i, docs[i], vectors[n], digests[i]) for n, i in enumerate(batch)])
        progress.update(len(batch))
    client.flush(name)
    return len(missing)
