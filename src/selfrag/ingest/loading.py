"""Reading a file or a folder into passages, file by file, reusing what has not changed.

:func:`collect` reads every file of a folder (:mod:`.folder` says which) in
its format (:mod:`.formats`), cuts it into passages (:mod:`.chunking`) and
keeps, per file, the sha256 of its bytes and its passages. Given the files of
an earlier collection (``previous``, e.g. from a saved index's manifest), a
file whose hash is unchanged is not parsed again: its passages are taken as
they were. ``Collection.parsed`` counts the files that were parsed.

Text formats must be UTF-8 (a byte-order mark is fine): a file that is not
stops with one line naming it, so no document is ever left out silently. A
file a reader cannot turn into text (a damaged or scanned PDF), one whose
format needs a missing extra, one with no text and one in a format selfrag
does not read are skipped and named in one warning line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import DataError
from ..types import Document
from .chunking import ChunkSettings, chunk_file
from .folder import SkippedEntries, folder_files
from .formats import JSONL_SUFFIXES, format_for, known_suffix
from .jsonl import not_utf8, read_documents
from .sections import Unreadable


@dataclass
class FileDocs:
    """One file's passages and the hash of the bytes they were read from."""

    rel: str  # the path relative to the folder ("/"-separated); a single file: its name
    sha256: str
    documents: list[Document]
    reused: bool = False  # taken from ``previous`` without parsing


@dataclass
class Collection:
    files: list[FileDocs]
    skipped: SkippedEntries = field(default_factory=SkippedEntries)
    parsed: int = 0  # files parsed (not reused)

    @property
    def documents(self) -> list[Document]:
        return [d for f in self.files for d in f.documents]


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def read_file(path: Path, rel: PurePosixPath, data: bytes, chunks: ChunkSettings, *,
              id_base: str | None = None) -> list[Document]:
    """The passages of one file in a format of :mod:`.formats` (Unreadable when its reader cannot read it)."""
    fmt = format_for(path.suffix)
    if fmt is None:
        raise Unreadable("not a format selfrag reads")
    if fmt.binary:
        sections = fmt.read(data)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
        sections = fmt.read(text)
    return chunk_file(rel.as_posix(), sections, chunks, id_base=id_base,
                      metadata={"path": str(path), "file": rel.as_posix()})


def _jsonl(path: Path, rel: PurePosixPath, in_folder: bool) -> list[Document]:
    docs = read_documents(path)
    if not in_folder:
        return docs
    base = rel.with_suffix("").as_posix()
    return [Document(id=f"{base}:{d.id}", title=d.title, text=d.text,
                     metadata={**d.metadata, "path": str(path), "file": rel.as_posix()}) for d in docs]


def collect(
    path: str | Path,
    *,
    include_hidden: bool = False,
    follow_external_links: bool = False,
    chunks: ChunkSettings | None = None,
    previous: Mapping[str, FileDocs] | None = None,
) -> Collection:
    """The passages of a file or folder, per file (see the module docstring)."""
    chunks = chunks or ChunkSettings()
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"documents not found: {p} (give a folder or a file: .txt, .md, .html, .jsonl, .pdf, .docx)")
    if p.is_dir():
        return _collect_folder(p, include_hidden, follow_external_links, chunks, previous or {})
    return _collect_file(p, chunks, previous or {})


def _collect_file(p: Path, chunks: ChunkSettings, previous: Mapping[str, FileDocs]) -> Collection:
    """A single file: read in its format (an unknown suffix as JSONL); any problem is an error."""
    data = _read_bytes(p)
    digest = _sha256(data)
    rel = PurePosixPath(p.name)
    old = previous.get(rel.as_posix())
    if old is not None and old.sha256 == digest:
        return Collection([FileDocs(rel.as_posix(), digest, list(old.documents), reused=True)])
    fmt = format_for(p.suffix)
    if fmt is None:
        docs = _jsonl(p, rel, in_folder=False)
    else:
        if not fmt.available():
            raise DataError(f"{p}: reading {fmt.name} files needs pip install 'selfrag[{fmt.extra}]'")
        try:
            docs = read_file(p, rel, data, chunks)
        except Unreadable as exc:
            raise DataError(f"{p}: cannot be read: {exc}") from None
    return Collection([FileDocs(rel.as_posix(), digest, docs)], parsed=1)


def _collect_folder(folder: Path, include_hidden: bool, follow_external_links: bool, chunks: ChunkSettings,
                    previous: Mapping[str, FileDocs]) -> Collection:
    files, skipped = folder_files(folder, include_hidden=include_hidden,
                                  follow_external_links=follow_external_links, readable=known_suffix)
    out = Collection([], skipped)
    used_ids: set[str] = set()
    for file, rel in files:
        key = rel.as_posix()
        suffix = file.suffix.lower()
        fmt = format_for(suffix)
        if fmt is None and suffix not in JSONL_SUFFIXES:
            skipped.unsupported.append(key)
            continue
        if fmt is not None and not fmt.available():
            skipped.needs_extra.setdefault(fmt.extra or "", []).append(key)
            continue
        data = _read_bytes(file)
        digest = _sha256(data)
        old = previous.get(key)
        if old is not None and old.sha256 == digest and not any(d.id in used_ids for d in old.documents):
            entry = FileDocs(key, digest, list(old.documents), reused=True)
        else:
            # A file's id is its path without the suffix, unless another file took it (a.md and a.txt).
            base = rel.with_suffix("").as_posix()
            if base in used_ids or any(i.startswith(f"{base}#") for i in used_ids):
                base = key
            try:
                docs = _jsonl(file, rel, True) if fmt is None else read_file(file, rel, data, chunks, id_base=base)
            except Unreadable as exc:
                skipped.unreadable.append((key, str(exc)))
                continue
            except DataError as exc:
                if fmt is not None:  # not UTF-8: stop, as no text file is ever left out silently
                    raise
                skipped.unreadable.append((key, f"not a documents file ({str(exc).split(': ', 1)[-1]})"))
                continue
            entry = FileDocs(key, digest, docs)
            out.parsed += 1
        if not entry.documents:
            skipped.empty.append(key)
            continue
        used_ids.update(d.id for d in entry.documents)
        out.files.append(entry)
    return out
