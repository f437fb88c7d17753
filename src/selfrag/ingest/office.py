"""PDF and Word (.docx) files, read through the ``docs`` extra (``pypdf``, ``python-docx``).

A PDF has no headings as such, only text drawn in fonts of some size: a line
set noticeably larger than the body text (at least :data:`HEADING_RATIO` times
the size most of the page's characters use) and short enough to be a title is
read as a heading. Lines of the body are joined into paragraphs. A page with
no text layer (a scan) gives nothing; a file with no text at all is refused
as unreadable, as is an encrypted or damaged one.

A Word document's headings are its paragraphs styled ``Heading N`` or
``Title``; tables are read row by row.
"""

from __future__ import annotations

import io
import logging
from collections import Counter

from ..errors import require
from .sections import Section, Unreadable, clean_heading

HEADING_RATIO = 1.15
MAX_HEADING_CHARS = 120

# pypdf reports recoverable oddities of a file as warnings: one line per file is enough.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def pdf_sections(data: bytes) -> list[Section]:
    pypdf = require("pypdf", "docs", "Reading PDF files")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                reader.decrypt("")
            except Exception:  # noqa: BLE001 - pypdf raises several kinds here
                raise Unreadable("encrypted; save an unencrypted copy") from None
        lines: list[tuple[str, float]] = []
        for page in reader.pages:
            lines.extend(_page_lines(page))
    except Unreadable:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged PDF fails in many ways inside pypdf
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    return _lines_to_sections(lines)


def _page_lines(page) -> list[tuple[str, float]]:
    """(text, font size) per line of a page, in reading order."""
    lines: list[tuple[str, float]] = []
    current: list[str] = []
    size = 0.0

    def flush() -> None:
        nonlocal size
        text = " ".join("".join(current).split())
        if text:
            lines.append((text, size))
        current.clear()
        size = 0.0

    def visit(text, cm, tm, font, font_size) -> None:
        nonlocal size
        scale = abs(tm[3]) if tm and tm[3] else 1.0
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                flush()
            if part.strip():
                current.append(part)
                size = max(size, float(font_size or 0) * scale)
            elif part:
                current.append(part)

    page.extract_text(visitor_text=visit)
    flush()
    return lines


class _Sections:
    """Sections as a reader meets them: paragraphs gather under the last heading until the next one."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.heading: str | None = None
        self.paragraphs: list[str] = []

    def close(self) -> None:
        body = "\n\n".join(self.paragraphs).strip()
        if body:
            self.sections.append(Section(self.heading, body))
        self.paragraphs.clear()

    def start(self, heading: str) -> None:
        self.close()
        self.heading = heading

    def done(self) -> list[Section]:
        self.close()
        return self.sections


def _lines_to_sections(lines: list[tuple[str, float]]) -> list[Section]:
    if not lines:
        raise Unreadable("no text layer (a scanned PDF?); convert it with OCR first")
    weights: Counter[float] = Counter()
    for text, size in lines:
        weights[round(size, 1)] += len(text)
    body_size = weights.most_common(1)[0][0]
    out = _Sections()
    paragraphs = out.paragraphs

    for text, size in lines:
        if body_size and size >= body_size * HEADING_RATIO and len(text) <= MAX_HEADING_CHARS:
            out.start(clean_heading(text))
            continue
        if paragraphs and not paragraphs[-1].endswith((".", "!", "?", ":")):
            paragraphs[-1] += " " + text  # a wrapped line continues its paragraph
        else:
            paragraphs.append(text)
    return out.done()


def docx_sections(data: bytes) -> list[Section]:
    docx = require("docx", "docs", "Reading Word (.docx) files")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-docx raises zipfile, KeyError, lxml errors
        raise Unreadable(f"not a readable Word document ({type(exc).__name__})") from None
    out = _Sections()
    paragraphs = out.paragraphs

    blocks = document.iter_inner_content() if hasattr(document, "iter_inner_content") else document.paragraphs
    for block in blocks:
        if hasattr(block, "rows"):  # a table: one line per row, cells joined by " | "
            rows = [" | ".join(" ".join(c.text.split()) for c in row.cells) for row in block.rows]
            body = "\n".join(r for r in rows if r.strip(" |"))
            if body:
                paragraphs.append(body)
            continue
        text = " ".join(block.text.split())
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        if style.lower().startswith(("heading", "title")):
            out.start(clean_heading(text))
        else:
            paragraphs.append(text)
    return out.done()
