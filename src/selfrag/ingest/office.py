"""PDF and Word (.docx) files, read through the ``docs`` extra (``pypdf``, ``python-docx``).

A PDF has no headings as such, only text drawn in fonts of some size: a line
set noticeably larger than the body text (at least :data:`HEADING_RATIO` times
the size most of the page's characters use) and short enough to be a title is
read as a heading. Lines of the body are joined into paragraphs. A page with
no text layer (a scan) gives nothing; a file with no text at all is refused
as unreadable, as is an encrypted or damaged one.

A Word document's headings are its paragraphs styled ``Heading N`` or
``Title``; tables are read row by row. Before python-docx parses anything,
the package's parts are sized (:mod:`.docx_package`: a 1.4 MB file can hold
400 MB of XML). python-docx opens the file (its parser refuses entities);
the paragraphs are then read from its parsed XML in one pass, each style
name from a table built once (see :func:`_docx_blocks`).
"""

from __future__ import annotations

import io
import logging
from collections import Counter

from ..errors import require
from .docx_package import check_package
from .limits import IngestLimits, TooLarge
from .sections import Section, Unreadable, clean_heading

HEADING_RATIO = 1.15
MAX_HEADING_CHARS = 120

# pypdf reports recoverable oddities of a file as warnings: one line per file is enough.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def pdf_sections(data: bytes, limits: IngestLimits | None = None) -> list[Section]:
    pypdf = require("pypdf", "docs", "Reading PDF files")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                reader.decrypt("")
            except Exception:  # noqa: BLE001 - pypdf raises several kinds here
                raise Unreadable("encrypted; save an unencrypted copy") from None
        _check_page_content(reader, limits or IngestLimits())
        lines: list[tuple[str, float]] = []
        for page in reader.pages:
            lines.extend(_page_lines(page))
    except (Unreadable, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged PDF fails in many ways inside pypdf
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    return _lines_to_sections(lines)


def _check_page_content(reader, limits: IngestLimits) -> None:
    """Refuse a PDF whose pages' content streams decode to more than ``data.max_unpacked_mb`` together.

    Text extraction parses every page's drawing operators (about 1 MB a second here), and one small
    stream can be the content of every page: 6.6 KB of PDF whose 20 pages share a 1 MB stream took 28 s.
    A stream shared by several pages counts once per page, as it is parsed once per page.
    """
    total = 0
    for page in reader.pages:
        contents = page.get_contents()
        total += len(contents.get_data()) if contents is not None else 0
        limits.check_unpacked(total, "its pages' content decodes")


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


def docx_sections(data: bytes, limits: IngestLimits | None = None) -> list[Section]:
    docx = require("docx", "docs", "Reading Word (.docx) files")
    check_package(data, limits or IngestLimits())
    try:
        document = docx.Document(io.BytesIO(data))
        return _docx_blocks(document.element.body, _paragraph_styles(document))
    except Exception as exc:  # noqa: BLE001 - python-docx raises zipfile, KeyError, ValueError, lxml errors
        raise Unreadable(f"not a readable Word document ({type(exc).__name__})") from None


# WordprocessingML element names, as lxml spells them.
_NS = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P, _TBL, _TR, _TC, _TCPR, _VMERGE = (f"{_NS}{t}" for t in ("p", "tbl", "tr", "tc", "tcPr", "vMerge"))
_R, _HYPERLINK, _T, _PPR, _PSTYLE, _VAL = (f"{_NS}{t}" for t in ("r", "hyperlink", "t", "pPr", "pStyle", "val"))
# What a run holds besides its text, as the text reads it (a tab or a line break separates words).
_RUN_MARKS = {f"{_NS}{t}": " " for t in ("tab", "ptab", "br", "cr")} | {f"{_NS}noBreakHyphen": "-"}


def _docx_blocks(body, style_names: dict[str, str]) -> list[Section]:
    """The body's paragraphs and tables, read from the parsed XML in one pass.

    This is what python-docx's ``paragraph.text``, ``paragraph.style`` and ``row.cells`` give, read
    directly: those compile an XPath expression or search the styles part for every paragraph, and
    ``row.cells`` searches the table for the row above every vertically merged cell, which made a
    document of a few hundred thousand paragraphs take minutes.
    """
    out = _Sections()
    paragraphs = out.paragraphs
    default_style = style_names.get("", "")
    for block in body:
        if block.tag == _TBL:  # a table: one line per row, cells joined by " | "
            table = _table_text(block)
            if table:
                paragraphs.append(table)
            continue
        if block.tag != _P:
            continue
        text = _paragraph_text(block)
        if not text:
            continue
        style = _style_id(block)
        name = style_names.get(style, default_style) if style else default_style
        if name.lower().startswith(("heading", "title")):
            out.start(clean_heading(text))
        else:
            paragraphs.append(text)
    return out.done()


def _paragraph_text(p) -> str:
    """A paragraph's text as python-docx reads it (its runs and the runs of its hyperlinks), whitespace
    collapsed."""
    parts: list[str] = []
    for child in p:
        if child.tag == _R:
            runs = (child,)
        elif child.tag == _HYPERLINK:
            runs = child.iterchildren(_R)
        else:
            continue
        for run in runs:
            for item in run:
                if item.tag == _T:
                    parts.append(item.text or "")
                elif item.tag in _RUN_MARKS:
                    parts.append(_RUN_MARKS[item.tag])
    return " ".join("".join(parts).split())


def _style_id(p) -> str | None:
    ppr = p.find(_PPR)
    style = ppr.find(_PSTYLE) if ppr is not None else None
    return style.get(_VAL) if style is not None else None


def _table_text(table) -> str:
    """A table's rows, one line each, cells joined by " | ".

    Each cell is read where it is written: a cell that continues a vertical merge holds no text of
    its own and is left out (python-docx's ``row.cells`` repeats the merge's first cell there).
    """
    rows = []
    for tr in table.iterchildren(_TR):
        cells = []
        for tc in tr.iterchildren(_TC):
            tcpr = tc.find(_TCPR)
            merge = tcpr.find(_VMERGE) if tcpr is not None else None
            if merge is not None and merge.get(_VAL, "continue") == "continue":
                continue
            cells.append(" ".join(t for t in map(_paragraph_text, tc.iterchildren(_P)) if t))
        rows.append(" | ".join(cells))
    return "\n".join(r for r in rows if r.strip(" |"))


def _paragraph_styles(document) -> dict[str, str]:
    """Style id -> name of the document's paragraph styles, built once ("": the default paragraph style,
    which a paragraph without a style, or with one the document does not define, has)."""
    from docx.enum.style import WD_STYLE_TYPE

    names = {s.style_id: s.name or "" for s in document.styles if s.type == WD_STYLE_TYPE.PARAGRAPH}
    default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    names[""] = (default.name or "") if default is not None else ""
    return names
