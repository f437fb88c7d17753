"""JSONL document files: one ``{"id"?, "title"?, "text"}`` object per line, read and written."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..errors import DataError
from ..types import Document
from ..validation import load_json


def not_utf8(path: Path, exc: UnicodeDecodeError, where: str = "") -> DataError:
    byte = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes | bytearray) else "?"
    return DataError(f"{path}{where}: not UTF-8 text (byte 0x{byte}); save it as UTF-8 or remove it")


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
        raise not_utf8(p, exc, f":{_first_bad_line(p)}") from None
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
