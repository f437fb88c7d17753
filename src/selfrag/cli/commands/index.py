"""selfrag index: build a persistent retrieval index, or show what one holds."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ...config import ExperimentConfig, validate

NAME = "index"
HELP = "build a saved retrieval index (bm25, dense, hybrid) or show one's manifest"
DESCRIPTION = (
    "Build an index directory that `selfrag ask --index DIR` and `run` load instead of "
    "re-indexing, or show its manifest. A stale or mismatched index is refused with the "
    "command that rebuilds it."
)
ORDER = 40


def add_retriever_options(parser: argparse.ArgumentParser, *, default: str | None = "bm25") -> None:
    """Flags that choose and configure a retriever (shared with eval-retrieval)."""
    parser.add_argument("--retriever", default=default, metavar="NAME", help="bm25 (default), dense, hybrid or milvus")
    parser.add_argument(
        "--embedding-model",
        metavar="M",
        help="dense/hybrid: a sentence-transformers directory or cached name, or openai:MODEL[@URL] "
        "(default: the bundled all-MiniLM-L6-v2)",
    )
    parser.add_argument("--vector-store", choices=("auto", "exact", "faiss"), help="dense/hybrid search (default auto)")
    parser.add_argument("--fusion", choices=("rrf", "weighted"), help="hybrid: rank fusion (default) or weighted scores")
    parser.add_argument("--rrf-k", type=int, metavar="K", help="hybrid rrf: the k in 1/(k + rank) (default 60)")
    parser.add_argument("--bm25-weight", type=float, metavar="W", help="hybrid weighted: BM25 weight (default 0.5)")
    parser.add_argument("--dense-weight", type=float, metavar="W", help="hybrid weighted: dense weight (default 0.5)")
    parser.add_argument("--uri", metavar="URI", help="milvus: a Milvus Lite path ending in .db, or http://HOST:19530 "
                        "(default: Milvus Lite inside the index)")
    parser.add_argument("--collection", metavar="NAME", help="milvus: the collection (default selfrag)")
    parser.add_argument("--search", choices=("dense", "hybrid"), help="milvus: dense, or hybrid with the engine's BM25")
    parser.add_argument("--index-type", choices=("HNSW", "IVF_FLAT", "FLAT", "AUTOINDEX"),
                        help="milvus: the vector index (default HNSW)")


def chunk_settings(args: argparse.Namespace, cfg=None, manifest: dict[str, Any] | None = None):
    """The chunk settings: ``--chunk-size``, else a saved index's own (so its passages match), else the
    config's ``data`` section, else the defaults."""
    from ...ingest import ChunkSettings

    saved = (manifest or {}).get("chunking")
    data = cfg.data if cfg is not None else None
    size = getattr(args, "chunk_size", None)
    if size is None and isinstance(saved, dict) and isinstance(saved.get("size"), int):
        return ChunkSettings(saved["size"], int(saved.get("overlap") or 0))
    if size is None:
        size = data.chunk_size if data is not None else ChunkSettings().size
    overlap = data.chunk_overlap if data is not None else ChunkSettings().overlap
    return ChunkSettings(size, min(overlap, max(0, size // 2 - 1)))


def load_docs(args: argparse.Namespace, cfg=None):
    """The documents ``--docs`` names (None without it), with the folder options of ``args``
    or, where a flag is not given, of the config's ``data`` section."""
    if not args.docs:
        return None
    from ...ingest import IngestLimits
    from ...retrieval.store import load_corpus

    manifest = None
    if cfg is not None and cfg.retrieval.index:
        from ...retrieval.persist import read_manifest

        manifest = read_manifest(cfg.retrieval.index)
    data = cfg.data if cfg is not None else None
    return load_corpus(
        args.docs,
        include_hidden=args.include_hidden or bool(data and data.include_hidden),
        follow_external_links=args.follow_external_links or bool(data and data.follow_external_links),
        chunks=chunk_settings(args, cfg, manifest),
        limits=IngestLimits.of(data),
    )


def docs_help() -> str:
    """``--docs``'s help: every format selfrag reads, from the ingest formats table (never a list kept here)."""
    from ...ingest.formats import FORMATS, JSONL_SUFFIXES

    def named(name: str, suffixes: tuple[str, ...]) -> str:
        return f"{name} ({', '.join(suffixes)})"

    plain = [named(f.name, f.suffixes) for f in FORMATS if f.extra is None]
    plain.append(named("JSONL", JSONL_SUFFIXES) + ": one {id?, title?, text} per line")
    extras: dict[str, list[str]] = {}
    for f in FORMATS:
        if f.extra:
            extras.setdefault(f.extra, []).append(named(f.name, f.suffixes))
    with_extras = "; ".join(f"{' and '.join(names)} with pip install 'selfrag[{extra}]'"
                            for extra, names in extras.items())
    return ("a folder (read recursively) or one file of documents: " + ", ".join(plain)
            + (f"; {with_extras}" if with_extras else ""))


def add_docs_options(parser: argparse.ArgumentParser, *, required: bool = False, help: str | None = None) -> None:
    """``--docs PATH`` and what a documents folder may include (shared with ask, chat and serve)."""
    parser.add_argument("--docs", required=required, metavar="PATH", help=help or docs_help())
    parser.add_argument(
        "--chunk-size", type=int, metavar="N",
        help="cut documents into passages of about N tokens (default 200; sets data.chunk_size)",
    )
    parser.add_argument(
        "--include-hidden",
        action="store_true",
        help="in a --docs folder, also read hidden files and folders (names starting with '.', e.g. .git/)",
    )
    parser.add_argument(
        "--follow-external-links",
        action="store_true",
        help="in a --docs folder, also read symbolic links that point outside the folder",
    )


def retrieval_config(args: argparse.Namespace) -> ExperimentConfig:
    """The flags as a validated config (so flags and config files mean the same thing)."""
    section: dict[str, Any] = {"method": args.retriever}
    for key in ("embedding_model", "vector_store", "fusion", "rrf_k", "bm25_weight", "dense_weight",
                "uri", "collection", "search", "index_type"):
        value = getattr(args, key, None)
        if value is not None:
            section[key] = value
    return validate({"retrieval": section})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="index a folder or JSONL file of documents into DIR")
    add_docs_options(build, required=True)
    build.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the index directory to write: new, empty, or a selfrag index (replaced); anything else is refused",
    )
    add_retriever_options(build)
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    build.add_argument("--json", action="store_true", help="print the manifest as JSON")
    info = sub.add_parser("info", help="show the manifest of an index directory")
    info.add_argument("dir", metavar="DIR")
    info.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.action == "build" else _info(args)


def _build(args: argparse.Namespace) -> int:
    from ...assemble import retriever_options
    from ...ingest import collect
    from ...retrieval.persist import check_build_paths, read_manifest, save_index
    from ...retrieval.rebuild import (
        passages_of,
        previous_build,
        sources_manifest,
        with_prior_vectors,
    )
    from ...retrieval.registry import create_retriever, get_kind
    from ...retrieval.store import log as store_log

    cfg = retrieval_config(args)
    # Refuse an --out that is not an index (or overlaps --docs) before any work is done.
    check_build_paths(args.out, args.docs)
    chunks = chunk_settings(args)
    options = retriever_options(cfg)
    if get_kind(cfg.retrieval.method).takes("show_progress"):
        options["show_progress"] = False if args.quiet else None
    if get_kind(cfg.retrieval.method).takes("build_dir"):
        # A build that keeps its state here resumes where a killed one stopped.
        out = Path(args.out).expanduser().absolute()
        options["build_dir"] = out.parent / f".{out.name}.{cfg.retrieval.method}-build"
    start = time.perf_counter()
    previous = previous_build(args.out, cfg.retrieval.method, options, chunks)
    found = collect(args.docs, include_hidden=args.include_hidden, follow_external_links=args.follow_external_links,
                    chunks=chunks, previous=previous.files if previous else None)
    if found.skipped:
        store_log.warning(found.skipped.summary(Path(args.docs)))
    documents = passages_of(found.files)
    if not documents:
        from ...errors import DataError
        from ...ingest import described

        raise DataError(f"no documents in {args.docs}: add files selfrag reads: {described()}")
    if get_kind(cfg.retrieval.method).takes("cache"):
        options = with_prior_vectors(options, previous)
    retriever = create_retriever(cfg.retrieval.method, documents, **options)
    seconds = time.perf_counter() - start
    source = Path(args.docs).expanduser().resolve()
    extra = {"source": str(source), "chunking": chunks.as_dict(), "sources": sources_manifest(found.files)}
    try:
        out = save_index(retriever, args.out, extra=extra, source=source)
    except OSError as exc:  # a full disk: the build is dropped, the old index stays as it was
        from ...errors import DataError
        from ...eval.disk import why_not_written

        raise DataError(f"cannot write the index {args.out}: {why_not_written(Path(args.out), exc)} "
                        "(an index already there is unchanged)") from None
    manifest = read_manifest(out)
    reread = {"files": len(found.files), "read": found.parsed, "unchanged": len(found.files) - found.parsed}
    if args.json:
        print(json.dumps({**manifest, "index_seconds": round(seconds, 3), "rebuild": reread}, indent=2))
    else:
        model = f" · model {manifest['embedding_model']}" if manifest.get("embedding_model") else ""
        kept = f", {reread['unchanged']} unchanged" if previous is not None else ""
        print(
            f"built {manifest['retriever']} index of {manifest['document_count']} documents "
            f"from {reread['files']} files ({reread['read']} read{kept}) in {seconds:.1f} s{model} -> {out}"
        )
        print(f"use it: selfrag ask \"...\" --index {out}", file=sys.stderr)
    return 0


def _info(args: argparse.Namespace) -> int:
    from ...retrieval.persist import read_manifest

    manifest = read_manifest(args.dir)
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    for key in ("retriever", "embedding_model", "document_count", "corpus_checksum", "created", "source"):
        if manifest.get(key) is not None:
            print(f"{key:16} {manifest[key]}")
    if isinstance(manifest.get("sources"), dict):
        print(f"{'files':16} {len(manifest['sources'])}")
    if isinstance(manifest.get("chunking"), dict):
        print(f"{'chunking':16} {json.dumps(manifest['chunking'])}")
    params = {k: v for k, v in (manifest.get("params") or {}).items() if k != "embedding_model"}
    if params:
        print(f"{'params':16} {json.dumps(params)}")
    return 0
