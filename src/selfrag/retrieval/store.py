"""Reading and writing document collections.

``load_corpus(path)`` accepts a folder of ``.txt`` / ``.md`` files (one
document each; a leading ``# Title`` line becomes the title) or a JSONL file
with one ``{"id"?, "title"?, "text"}`` object per line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..errors import DataError
from ..types import Document

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}


def load_corpus(path: str | Path) -> list[Document]:
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"documents not found: {p} (give a folder of .txt/.md files or a .jsonl file)")
    docs = _load_folder(p) if p.is_dir() else read_documents(p)
    if not docs:
        raise DataError(f"no documents in {p}: add .txt/.md files or JSONL lines with a 'text' field")
    return docs


def _load_folder(folder: Path) -> list[Document]:
    docs = []
    for file in sorted(folder.rglob("*")):
        if not file.is_file() or file.suffix.lower() not in TEXT_SUFFIXES:
            continue
        try:
            raw = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{file}: not UTF-8 text; convert it or remove it from the folder") from None
        text = raw.strip()
        if not text:
            continue
        title = file.stem.replace("_", " ")
        first, _, rest = text.partition("\n")
        if first.startswith("#"):
            title = first.lstrip("#").strip() or title
            text = rest.strip() or text
        rel = file.relative_to(folder).with_suffix("").as_posix()
        docs.append(Document(id=rel, title=title, text=text, metadata={"path": str(file)}))
    return docs


def read_documents(path: str | Path) -> list[Document]:
    """Documents from a JSONL file; a malformed line fails with its line number."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"documents file not found: {p}")
    docs: list[Document] = []
    seen: set[str] = set()
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
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
            docs.append(Document(id=doc_id, title=str(obj.get("title") or ""), text=text, metadata=meta))
    return docs


def write_documents(path: str | Path, docs: Iterable[Document]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for d in docs:
            row = {"id": d.id, "title": d.title, "text": d.text}
            if d.metadata:
                row["metadata"] = d.metadata
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
