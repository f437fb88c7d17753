"""Persistent index directories with a manifest.

``save_index(retriever, dir)`` writes the retriever's own files plus
``manifest.json`` (a selfrag marker, the retriever, its parameters, embedding
model, document count, corpus checksum and the sha256 of every file it wrote);
it builds in a temporary sibling directory and swaps it in in one step
(:mod:`.swap`), so an interrupted or killed rebuild never leaves a half-written
or missing index. It only ever replaces a directory
that is a selfrag index (a selfrag manifest and nothing but the files that
retriever writes) or an empty one; anything else is refused untouched.

``load_index(dir)`` refuses a directory whose manifest is missing or not a
selfrag manifest, names another retriever or embedding model than the one
asked for, whose files were edited, damaged, removed or added to since it was
built, or whose checksum no longer matches the documents given, and says how
to rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError, SelfragError
from ..ingest import read_from
from ..types import Document
from ..validation import load_json
from . import swap
from .base import Retriever
from .registry import available_retrievers, find_kind

MANIFEST = "manifest.json"
KIND = "selfrag-index"  # the manifest's "kind": what tells a selfrag index from any other manifest.json
FORMAT_VERSION = 2  # 2: "kind" marker and per-file sha256 ("files"); 1: neither (refused on load)


def corpus_checksum(documents: Sequence[Document]) -> str:
    h = hashlib.sha256()
    for d in documents:
        for part in (d.id, d.title, d.text):
            h.update(part.encode("utf-8"))
            h.update(b"\x1f")
        h.update(b"\x1e")
    return h.hexdigest()


class _IndexFiles(Mapping[str, frozenset[str]]):
    """retriever name -> every file (relative, "/"-separated) its save() may write, besides manifest.json,
    as its registry entry lists them. An existing directory is replaced only when it holds nothing
    else; a loaded index may hold nothing else."""

    def __getitem__(self, name: str) -> frozenset[str]:
        if (kind := find_kind(name)) is None:
            raise KeyError(name)
        return kind.files

    def __iter__(self) -> Iterator[str]:
        return iter(available_retrievers())

    def __len__(self) -> int:
        return len(available_retrievers())


INDEX_FILES: Mapping[str, frozenset[str]] = _IndexFiles()


def rebuild_command(path: str | Path, retriever: str | None, embedding_model: str | None = None,
                    docs: str | None = None) -> str:
    """The command that rebuilds the index at ``path`` from ``docs`` (the placeholder PATH when unknown)."""
    from .encoders import DEFAULT_MODEL

    source = shlex.quote(docs) if docs else "PATH"
    cmd = f"selfrag index build --docs {source} --retriever {retriever or 'bm25'} --out {shlex.quote(str(path))}"
    if embedding_model and embedding_model != DEFAULT_MODEL:
        cmd += f" --embedding-model {embedding_model}"
    return cmd


# -- reading an index's own files -------------------------------------------------------


def read_index_json(path: Path, index: Path) -> dict[str, Any]:
    """A JSON object file of a saved index, or a one-line DataError naming the file and the fix."""
    try:
        value = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"index {index} is damaged: {path.name} is missing; rebuild it with 'selfrag index build'") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            reason = exc.msg
        else:
            reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else exc.strerror
        raise DataError(
            f"index {index} is damaged: {path.name} is not valid JSON ({reason}); rebuild it with 'selfrag index build'"
        ) from None
    if not isinstance(value, dict):
        raise DataError(
            f"index {index} is damaged: {path.name} is not a JSON object; rebuild it with 'selfrag index build'"
        )
    return value


def file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _walk(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(regular files, folders, other entries: links, sockets, ...) under ``root``, relative and "/"-separated.

    Symbolic links are reported, never followed.
    """
    files: list[str] = []
    folders: list[str] = []
    other: list[str] = []

    def unreadable(exc: OSError) -> None:
        raise DataError(f"cannot read {exc.filename} ({exc.strerror})")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        base = Path(dirpath)
        for name in list(dirnames):
            rel = (base / name).relative_to(root).as_posix()
            if (base / name).is_symlink():
                other.append(rel)
                dirnames.remove(name)
            else:
                folders.append(rel)
        for name in filenames:
            p = base / name
            rel = p.relative_to(root).as_posix()
            (files if p.is_file() and not p.is_symlink() else other).append(rel)
    return sorted(files), sorted(folders), sorted(other)


def _in_files(rel: str, allowed: frozenset[str]) -> bool:
    """Whether ``rel`` is one of ``allowed``, or lies under an allowed folder (an entry ending in "/",
    for an engine's own data folder whose file names it chooses)."""
    return rel in allowed or any(rel.startswith(entry) for entry in allowed if entry.endswith("/"))


def _folders_of(files: frozenset[str]) -> set[str]:
    """Every folder (relative) that holds one of ``files``, at any depth."""
    return {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _manifest_problem(manifest: Any) -> str | None:
    """Why ``manifest`` (parsed JSON) is not a selfrag index manifest, or None when it is one."""
    if not isinstance(manifest, dict):
        return f"it holds a JSON {type(manifest).__name__}, not an object"
    if manifest.get("format") == 1 and "kind" not in manifest:
        # Indexes written before the marker: recognised (so a rebuild may replace them), not loaded.
        ok = manifest.get("retriever") in INDEX_FILES and isinstance(manifest.get("corpus_checksum"), str)
        return None if ok else "it is not a selfrag index manifest"
    if manifest.get("kind") != KIND:
        return "it is not a selfrag index manifest"
    if not isinstance(manifest.get("retriever"), str):
        return "it names no retriever"
    return None


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the index at ``path``; a one-line DataError when it is not a selfrag index."""
    p = Path(path) / MANIFEST
    if not p.is_file():
        swap.recover(Path(path).expanduser().absolute())  # a rebuild killed mid-swap: put the old index back
    if not p.is_file():
        raise DataError(
            f"{Path(path)} is not a selfrag index (no {MANIFEST}); build one with "
            "'selfrag index build --docs PATH --retriever bm25 --out DIR'"
        )
    try:
        manifest = load_json(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise DataError(f"{p} is corrupt; rebuild the index with 'selfrag index build'") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise DataError(
            f"{Path(path)} is not a selfrag index: {p.name} is not a selfrag index manifest ({problem}); "
            "build one with 'selfrag index build --docs PATH --retriever bm25 --out DIR'"
        )
    return manifest


# -- where an index may be written -----------------------------------------------------------


def _not_an_index(out: Path, why: str) -> DataError:
    return DataError(f"{out} is not empty and is not a selfrag index ({why}); choose a new or empty directory")


def check_replaceable(out: Path) -> None:
    """Refuse ``out`` unless it is missing, empty, or a selfrag index holding only the files its retriever writes."""
    if not out.exists():
        return
    if not out.is_dir():
        raise DataError(f"{out} is a file; give a directory for the index")
    files, folders, other = _walk(out)
    if not files and not folders and not other:
        return
    if MANIFEST not in files:
        raise _not_an_index(out, f"no {MANIFEST}; it holds {(files or folders or other)[0]}")
    try:
        manifest = load_json((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise _not_an_index(out, f"its {MANIFEST} is not valid JSON") from None
    if _manifest_problem(manifest):
        raise _not_an_index(out, f"its {MANIFEST} is not a selfrag index manifest")
    allowed = INDEX_FILES.get(manifest["retriever"])
    if allowed is None:
        raise _not_an_index(out, f"its {MANIFEST} names an unknown retriever {manifest['retriever']!r}")
    if other:
        raise _not_an_index(out, f"it holds {other[0]}, which is not a regular file or folder")
    allowed_folders = _folders_of(allowed)
    foreign = [f for f in files if f != MANIFEST and not _in_files(f, allowed)]
    foreign += [f"{d}/" for d in folders if d not in allowed_folders and not _in_files(f"{d}/", allowed)]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise _not_an_index(out, f"it holds {foreign[0]}{more}, which a {manifest['retriever']} index does not write")


def _is_within(inner: Path, outer: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def check_build_paths(out: str | Path, source: str | Path | None = None) -> Path:
    """The resolved index directory, after refusing one that overlaps ``source`` or is not replaceable."""
    target = Path(out).expanduser().resolve()
    if source is not None:
        docs = Path(source).expanduser().resolve()
        if docs == target:
            raise DataError(f"--docs and --out are the same path ({target}); write the index to another directory")
        if _is_within(target, docs):
            raise DataError(f"--out {target} is inside --docs {docs}; write the index outside the documents")
        if _is_within(docs, target):
            raise DataError(
                f"--docs {docs} is inside --out {target}: rebuilding would replace the documents; "
                "copy them elsewhere or write the index to another directory"
            )
    check_replaceable(target)
    return target


# -- saving and loading -------------------------------------------------------------------


def save_index(
    retriever: Retriever,
    path: str | Path,
    extra: dict[str, Any] | None = None,
    *,
    source: str | Path | None = None,
) -> Path:
    """Write ``retriever`` and its manifest to ``path``, replacing an index already there.

    ``source`` (the documents' path) must not overlap ``path``. A directory that
    is not a selfrag index is never touched.
    """
    out = check_build_paths(path, source)
    if retriever.name not in INDEX_FILES:
        raise DataError(f"retriever '{retriever.name}' cannot be saved as an index (no known file set)")
    params = retriever.params() if hasattr(retriever, "params") else {}
    manifest = {
        "kind": KIND,
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
    started = time.time()
    swap.recover(out)  # a rebuild killed mid-swap: put its old index back first
    # A fresh, uniquely named directory, so nothing of the user's is ever removed here.
    tmp = swap.work_dir(out, "building")
    swap.remove_stale(out, started, keep=tmp)
    try:
        retriever.save(tmp)
        files, _, other = _walk(tmp)
        unexpected = [f for f in files if not _in_files(f, INDEX_FILES[retriever.name])] + other
        if unexpected:
            raise RuntimeError(f"{retriever.name}.save wrote {unexpected[0]}, not in INDEX_FILES[{retriever.name!r}]")
        manifest["files"] = {f: file_sha256(tmp / f) for f in files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        # check_replaceable again: the directory may have changed while the index was built.
        swap.replace_dir(tmp, out, check=check_replaceable)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def verify_files(src: Path, manifest: dict[str, Any], rebuild: str) -> None:
    """Refuse an index whose files differ from the ones it wrote (edited, damaged, removed or added)."""
    listed = manifest.get("files")
    allowed = INDEX_FILES.get(manifest.get("retriever"), frozenset())
    if not isinstance(listed, dict) or not listed:
        raise DataError(f"index {src} is damaged: its manifest lists no files; {rebuild}")
    for rel, digest in listed.items():
        if not _in_files(rel, allowed) or not isinstance(digest, str):
            raise DataError(f"index {src} is damaged: its manifest lists an unexpected file {rel!r}; {rebuild}")
    files, _, other = _walk(src)
    if other:
        raise DataError(f"index {src} holds {other[0]}, which is not a regular file; {rebuild}")
    added = [f for f in files if f != MANIFEST and f not in listed]
    if added:
        raise DataError(f"index {src} holds {added[0]}, which it did not write; remove it or {rebuild}")
    present = set(files)
    for rel in sorted(listed):
        if rel not in present:
            raise DataError(f"index {src} is damaged: {rel} is missing; {rebuild}")
        if file_sha256(src / rel) != listed[rel]:
            raise DataError(
                f"index {src} was modified or damaged: {rel} does not match the checksum in its manifest; {rebuild}"
            )


def load_index(
    path: str | Path,
    *,
    documents: Sequence[Document] | None = None,
    expected_method: str | None = None,
    options: dict[str, Any] | None = None,
) -> Retriever:
    """Load a saved index, refusing one that does not match what is asked for.

    Every file the index wrote is checked against the sha256 in its manifest
    first, so an edited ``documents.jsonl`` (text that would reach prompts) or
    a damaged matrix is refused, not loaded. ``options`` are the configured
    retriever options: ``embedding_model`` must match the one the index was
    built with; query-time options (hybrid fusion, ``vector_store``) are
    applied to the loaded retriever.
    """
    src = Path(path)
    manifest = read_manifest(src)
    name = manifest.get("retriever")
    built_with = manifest.get("embedding_model")
    built_with = built_with if isinstance(built_with, str) else None
    built_from = manifest.get("source")
    docs = read_from(documents or (), built_from if isinstance(built_from, str) else None)
    rebuild = f"rebuild it: {rebuild_command(src, expected_method or name, built_with, docs)}"
    if expected_method and name != expected_method:
        raise DataError(
            f"index {src} was built with retriever '{name}', not '{expected_method}'; "
            f"use --retriever {name}, or {rebuild}"
        )
    if manifest.get("format") != FORMAT_VERSION:
        raise DataError(
            f"index {src} has format {manifest.get('format')} (an earlier selfrag), expected {FORMAT_VERSION}; {rebuild}"
        )
    kind = find_kind(name)
    if kind is None:
        raise DataError(f"index {src} uses unknown retriever '{name}'; {rebuild}")
    opts = dict(options or {})
    wanted = opts.pop("embedding_model", None)
    if wanted and built_with:
        from .encoders import canonical_model_name

        if canonical_model_name(wanted) != built_with:
            raise DataError(
                f"index {src} was built with embedding model '{built_with}', not '{wanted}'; "
                f"rebuild it: {rebuild_command(src, name, wanted, docs)}"
            )
    verify_files(src, manifest, rebuild)
    if documents is not None and corpus_checksum(documents) != manifest.get("corpus_checksum"):
        raise DataError(f"index {src} is stale: the documents changed since it was built; {rebuild}")
    try:
        retriever = kind.open(src, opts)
    except SelfragError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OSError, RuntimeError) as exc:
        raise DataError(f"index {src} is damaged ({_one_line(f'{type(exc).__name__}: {exc}')}); {rebuild}") from None
    if len(retriever.documents) != manifest.get("document_count"):
        raise DataError(f"index {src} is damaged: document count does not match its manifest; {rebuild}")
    return retriever
