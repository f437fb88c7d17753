"""Reading a file or a folder into passages, file by file, reusing what has not changed.

:func:`collect` reads every file of a folder (:mod:`.folder` says which) in
its format (:mod:`.formats`), cuts it into passages (:mod:`.chunking`) and
keeps, per file, the sha256 of its bytes and its passages. Given the files of
an earlier collection (``previous``, e.g. from a saved index's manifest), a
file whose hash is unchanged is not parsed again: its passages are taken as
they were. ``Collection.parsed`` counts the files that were parsed.

In a folder, a file that cannot be read is skipped and named in one warning
line with its reason: a text file that is not UTF-8 (a byte-order mark is
fine), one a reader cannot turn into text (a damaged or scanned PDF), one
over a size cap (:mod:`.limits`), a FIFO or device, one whose format needs a
missing extra, one with no text and one in a format selfrag does not read.
A single file given by itself that cannot be read is an error naming it.

Each file's id is checked against the ids taken so far in constant time, so
a folder of many small files costs linear time.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import DataError
from ..types import Document
from .chunking import ChunkSettings, chunk_file
from .files import NotRegular, kind_of, read_capped, sha256_of
from .folder import SkippedEntries, folder_files
from .formats import JSONL_SUFFIXES, format_for, known_suffix
from .jsonl import read_documents
from .limits import IngestLimits, TooLarge
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


def read_from(documents: Sequence[Document], built_from: str | None = None) -> str | None:
    """The file or folder ``documents`` were read from, as it was given: each passage's ``path`` ends
    with its ``file`` (its path inside the folder), and a file given by itself names its passages
    after its whole name (``tea.md#1``, where a folder's file gives ``tea#1``). Else ``built_from``
    (where a saved index says it was built from); None when neither is known."""
    roots: set[str] = set()
    single: set[str] = set()
    for d in documents:
        path, file = d.metadata.get("path"), d.metadata.get("file")
        if not (isinstance(path, str) and isinstance(file, str) and path.endswith(file)):
            return built_from  # e.g. a JSONL file given by itself: its passages do not say where they came from
        roots.add(path[: -len(file)].rstrip("/") or ".")
        if d.id == file or d.id.startswith(f"{file}#"):
            single.add(path)
    if len(roots) != 1:
        return built_from
    if len(single) == 1 and all(d.metadata["path"] in single for d in documents):
        return single.pop()
    return roots.pop()


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_file(path: Path, rel: PurePosixPath, data: bytes, chunks: ChunkSettings, *,
              id_base: str | None = None, limits: IngestLimits | None = None) -> list[Document]:
    """The passages of one file in a format of :mod:`.formats` (Unreadable when its reader cannot read it,
    TooLarge past a cap of ``limits``)."""
    fmt = format_for(path.suffix)
    if fmt is None:
        raise Unreadable("not a format selfrag reads")
    if fmt.binary:
        limits = limits or IngestLimits()
        sections = fmt.read(data, limits)
        limits.check_text(sum(len(s.text.encode("utf-8")) for s in sections))
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            byte = exc.object[exc.start : exc.start + 1].hex()
            raise Unreadable(f"not UTF-8 text (byte 0x{byte}); save it as UTF-8") from None
        sections = fmt.read(text)
    return chunk_file(rel.as_posix(), sections, chunks, id_base=id_base,
                      metadata={"path": str(path), "file": rel.as_posix()},
                      limit=(limits or IngestLimits()).check_passages)


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
    limits: IngestLimits | None = None,
) -> Collection:
    """The passages of a file or folder, per file (see the module docstring)."""
    chunks = chunks or ChunkSettings()
    limits = limits or IngestLimits()
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise DataError(
            f"documents not found: {p} (give a folder or a file: .txt, .md, .html, .jsonl, .pdf, .docx)"
        ) from None
    except OSError as exc:
        raise DataError(f"documents {p}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        return _collect_folder(p, include_hidden, follow_external_links, chunks, previous or {}, limits)
    if not stat.S_ISREG(mode):
        raise DataError(f"documents {p}: {kind_of(mode)}, not a file or folder; give a folder or a regular file")
    return _collect_file(p, chunks, previous or {}, limits)


def _collect_file(p: Path, chunks: ChunkSettings, previous: Mapping[str, FileDocs],
                  limits: IngestLimits) -> Collection:
    """A single file: read in its format (an unknown suffix as JSONL); any problem is an error."""
    fmt = format_for(p.suffix)
    rel = PurePosixPath(p.name)
    try:
        data = read_capped(p, limits, text=not fmt.binary) if fmt is not None else None
        digest = _sha256(data) if data is not None else sha256_of(p)
    except TooLarge as exc:
        raise DataError(f"{p}: {exc}; raise the limit or split the file") from None
    except NotRegular as exc:
        raise DataError(f"documents {p}: {exc}, not a file or folder; give a folder or a regular file") from None
    old = previous.get(rel.as_posix())
    if old is not None and old.sha256 == digest:
        return Collection([FileDocs(rel.as_posix(), digest, list(old.documents), reused=True)])
    if fmt is None or data is None:
        docs = _jsonl(p, rel, in_folder=False)
    else:
        if not fmt.available():
            raise DataError(f"{p}: reading {fmt.name} files needs pip install 'selfrag[{fmt.extra}]'")
        try:
            docs = read_file(p, rel, data, chunks, limits=limits)
        except (Unreadable, TooLarge) as exc:
            raise DataError(f"{p}: cannot be read: {exc}") from None
    return Collection([FileDocs(rel.as_posix(), digest, docs)], parsed=1)


class _TakenIds:
    """The passage ids taken so far, and every prefix of one that ends before a "#" (so "is ``a``
    or ``a#...`` taken" is one set lookup, not a scan of every id)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.numbered: set[str] = set()

    def add(self, doc_id: str) -> None:
        self.ids.add(doc_id)
        at = doc_id.find("#")
        while at >= 0:
            self.numbered.add(doc_id[:at])
            at = doc_id.find("#", at + 1)

    def base_taken(self, base: str) -> bool:
        return base in self.ids or base in self.numbered


def _collect_folder(folder: Path, include_hidden: bool, follow_external_links: bool, chunks: ChunkSettings,
                    previous: Mapping[str, FileDocs], limits: IngestLimits) -> Collection:
    files, skipped = folder_files(folder, include_hidden=include_hidden,
                                  follow_external_links=follow_external_links, readable=known_suffix)
    out = Collection([], skipped)
    taken = _TakenIds()
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
        try:
            data = read_capped(file, limits, text=not fmt.binary) if fmt is not None else None
            digest = _sha256(data) if data is not None else sha256_of(file)
        except TooLarge as exc:
            skipped.too_large.append((key, str(exc)))
            continue
        except NotRegular as exc:
            skipped.special.append((key, str(exc)))
            continue
        old = previous.get(key)
        if old is not None and old.sha256 == digest and not any(d.id in taken.ids for d in old.documents):
            entry = FileDocs(key, digest, list(old.documents), reused=True)
        else:
            # A file's id is its path without the suffix, unless another file took it (a.md and a.txt).
            base = rel.with_suffix("").as_posix()
            if taken.base_taken(base):
                base = key
            try:
                if data is None:
                    docs = _jsonl(file, rel, True)
                else:
                    docs = read_file(file, rel, data, chunks, id_base=base, limits=limits)
            except TooLarge as exc:
                skipped.too_large.append((key, str(exc)))
                continue
            except Unreadable as exc:
                skipped.unreadable.append((key, str(exc)))
                continue
            except DataError as exc:  # a JSONL file that is not a documents file
                skipped.unreadable.append((key, f"not a documents file ({str(exc).split(': ', 1)[-1]})"))
                continue
            entry = FileDocs(key, digest, docs)
            out.parsed += 1
        if not entry.documents:
            skipped.empty.append(key)
            continue
        for d in entry.documents:
            taken.add(d.id)
        out.files.append(entry)
    return out
