"""Reading and writing document collections.

``load_corpus(path)`` accepts a folder of ``.txt`` / ``.md`` files (one
document each; a leading ``# Title`` line becomes the title) or a JSONL file
with one ``{"id"?, "title"?, "text"}`` object per line. Files must be UTF-8
(a byte-order mark is allowed); one that is not stops the load with its name.

In a folder, hidden entries (any path component starting with ``.``, such as
``.git/``) and symbolic links that resolve outside the folder are skipped
unless ``include_hidden`` / ``follow_external_links`` say otherwise; one
warning line says how many entries were skipped and why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import DataError
from ..types import Document
from ..validation import load_json

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}


def load_corpus(
    path: str | Path,
    *,
    include_hidden: bool = False,
    follow_external_links: bool = False,
) -> list[Document]:
    """The documents of a folder or JSONL file (see the module docstring for the folder rules)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"documents not found: {p} (give a folder of .txt/.md files or a .jsonl file)")
    if p.is_dir():
        docs = _load_folder(p, include_hidden=include_hidden, follow_external_links=follow_external_links)
    else:
        docs = read_documents(p)
    if not docs:
        raise DataError(f"no documents in {p}: add .txt/.md files or JSONL lines with a 'text' field")
    return docs


@dataclass
class SkippedEntries:
    """Entries of a documents folder left out, by reason (relative paths; folders end in "/")."""

    hidden: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hidden) + len(self.external) + len(self.broken)

    def summary(self, folder: Path) -> str:
        """One line: how many entries were skipped, why, a few of them, and how to read them."""

        def part(items: list[str], one: str, many: str) -> str:
            shown = ", ".join(items[:3]) + (", ..." if len(items) > 3 else "")
            return f"{len(items)} {one if len(items) == 1 else many} ({shown})"

        parts, hints = [], []
        if self.hidden:
            parts.append(part(self.hidden, "hidden entry", "hidden entries"))
            hints.append("--include-hidden (data.include_hidden)")
        if self.external:
            parts.append(part(self.external, "symbolic link to outside the folder", "symbolic links to outside the folder"))
            hints.append("--follow-external-links (data.follow_external_links)")
        if self.broken:
            parts.append(part(self.broken, "broken symbolic link", "broken symbolic links"))
        hint = f"; to read them use {' / '.join(hints)}" if hints else ""
        return f"{folder}: skipped {'; '.join(parts)}{hint}"


def folder_files(
    folder: Path, *, include_hidden: bool = False, follow_external_links: bool = False
) -> tuple[list[tuple[Path, PurePosixPath]], SkippedEntries]:
    """The text files of ``folder`` as (path, path relative to the folder), sorted, and what was skipped.

    Only entries that could hold documents (folders, links to folders, files with
    a text suffix) count as skipped. A link to a folder inside ``folder`` is not
    descended into (its files are read under their own path); a linked folder is
    entered once, so link cycles end.
    """
    root = folder.resolve()
    found: list[tuple[Path, PurePosixPath]] = []
    skipped = SkippedEntries()
    entered = {root}

    def relevant(entry: Path, is_dir: bool) -> bool:
        return is_dir or entry.suffix.lower() in TEXT_SUFFIXES

    def walk(directory: Path, rel_dir: PurePosixPath) -> None:
        try:
            entries = sorted(directory.iterdir(), key=lambda e: e.name)
        except OSError as exc:
            raise DataError(f"cannot read the folder {directory} ({exc.strerror or exc})") from None
        for entry in entries:
            rel = rel_dir / entry.name
            if entry.name.startswith(".") and not include_hidden:
                is_dir = entry.is_dir()
                if relevant(entry, is_dir):
                    skipped.hidden.append(f"{rel}/" if is_dir else str(rel))
                continue
            if entry.is_symlink():
                try:
                    target = entry.resolve()
                    exists = target.exists()
                except (OSError, RuntimeError):  # a link cycle
                    exists = False
                if not exists:
                    if relevant(entry, False):
                        skipped.broken.append(str(rel))
                    continue
                outside = not target.is_relative_to(root)
                if outside and not follow_external_links:
                    if relevant(entry, target.is_dir()):
                        skipped.external.append(f"{rel}/" if target.is_dir() else str(rel))
                    continue
                if not outside and not include_hidden and _hidden(target.relative_to(root)):
                    # a visible link to a hidden entry of the folder (notes.md -> .private/notes.md)
                    if relevant(entry, target.is_dir()):
                        skipped.hidden.append(f"{rel}/" if target.is_dir() else str(rel))
                    continue
                if target.is_dir():
                    if outside and target not in entered:
                        entered.add(target)
                        walk(entry, rel)
                    continue
            if entry.is_dir():
                real = entry.resolve()
                if real not in entered:
                    entered.add(real)
                    walk(entry, rel)
            elif entry.is_file() and entry.suffix.lower() in TEXT_SUFFIXES:
                found.append((entry, rel))

    walk(folder, PurePosixPath())
    found.sort(key=lambda item: item[1].parts)
    return found, skipped


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def _not_utf8(path: Path, exc: UnicodeDecodeError, where: str = "") -> DataError:
    byte = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes | bytearray) else "?"
    return DataError(f"{path}{where}: not UTF-8 text (byte 0x{byte}); save it as UTF-8 or remove it")


def _load_folder(folder: Path, *, include_hidden: bool = False, follow_external_links: bool = False) -> list[Document]:
    files, skipped = folder_files(folder, include_hidden=include_hidden, follow_external_links=follow_external_links)
    if skipped:
        log.warning(skipped.summary(folder))
    docs = []
    for file, rel in files:
        try:
            raw = file.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _not_utf8(file, exc) from None
        except OSError as exc:
            raise DataError(f"{file}: cannot be read ({exc.strerror or exc})") from None
        text = raw.strip()
        if not text:
            continue
        title = file.stem.replace("_", " ")
        first, _, rest = text.partition("\n")
        if first.startswith("#"):
            title = first.lstrip("#").strip() or title
            text = rest.strip() or text
        doc_id = rel.with_suffix("").as_posix()
        docs.append(Document(id=doc_id, title=title, text=text, metadata={"path": str(file)}))
    return docs


def read_documents(path: str | Path) -> list[Document]:
    """Documents from a JSONL file; a malformed line fails with its line number."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"documents file not found: {p}")
    docs: list[Document] = []
    seen: set[str] = set()
    try:
        # utf-8-sig: a byte-order mark at the start is dropped, not a JSON error on line 1.
        with p.open(encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                docs.append(_document(p, lineno, line, seen))
    except UnicodeDecodeError as exc:
        raise _not_utf8(p, exc, f":{_first_bad_line(p)}") from None
    except OSError as exc:
        raise DataError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    return docs


def _document(p: Path, lineno: int, line: str, seen: set[str]) -> Document:
    try:
        obj = load_json(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{p}:{lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{p}:{lineno}: expected a JSON object with a 'text' field")
    text = obj.get("text", obj.get("contents"))
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{p}:{lineno}: missing or empty 'text' field")
    doc_id = str(obj.get("id", obj.get("_id", f"doc{lineno}")))
    if doc_id in seen:
        raise DataError(f"{p}:{lineno}: duplicate document id {doc_id!r}")
    seen.add(doc_id)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return Document(id=doc_id, title=str(obj.get("title") or ""), text=text, metadata=meta)


def _first_bad_line(path: Path) -> int:
    """The number of the first line of ``path`` that is not UTF-8 (only called once decoding failed)."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return lineno
    return 1


def write_documents(path: str | Path, docs: Iterable[Document]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for d in docs:
            row = {"id": d.id, "title": d.title, "text": d.text}
            if d.metadata:
                row["metadata"] = d.metadata
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
