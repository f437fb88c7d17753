"""HTML pages, read with selfrag's own tokenizer (:mod:`.html_tokens`).

A saved web page carries menus, banners, scripts and footers around the text
that matters. The reader keeps the page's ``<main>`` (or, without one, its
``<article>`` elements, or else its ``<body>``), drops what is never content
(``script``, ``style``, ``nav``, ``header``, ``footer``, ``aside``, ``form``,
``template``, ``noscript``, ``svg``) and cuts the text at ``<h1>``-``<h6>``
headings. docs/documents.md says why this reader rather than a converter
library (measured there on the same pages).

Every step costs the same however the page nests: open elements are counted
by tag (an end tag with none open is ignored without scanning the stack),
and each piece of text is kept once, in segments that record which regions
were open and the heading above; the chosen region's segments are joined
once at the end.
"""

from __future__ import annotations

from collections import Counter

from .html_tokens import tokenize
from .sections import Section, clean_heading

SKIP = frozenset({"script", "style", "nav", "header", "footer", "aside", "form", "template", "noscript", "svg",
                  "head", "button", "select", "iframe"})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCKS = frozenset({"p", "div", "li", "tr", "br", "section", "article", "main", "blockquote", "pre", "dd", "dt",
                    "table", "ul", "ol", "figcaption", "hr"}) | HEADINGS
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"})
REGIONS = ("main", "article", "body")
_PAGE = ""  # the whole page, for a page with none of the regions


class _Segment:
    """A stretch of the page's text pieces with the same open regions and heading."""

    __slots__ = ("regions", "heading", "start", "visible")

    def __init__(self, regions: tuple[str, ...], heading: str | None, start: int) -> None:
        self.regions, self.heading, self.start, self.visible = regions, heading, start, False


class _Reader:
    """Gathers the page's text pieces, in segments by open region and heading (see the module docstring)."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.open: Counter[str] = Counter()
        self.skipping = 0
        self.in_heading = False
        self.heading_text: list[str] = []
        self.pieces: list[str] = []
        self.segments = [_Segment((_PAGE,), None, 0)]

    def _segment(self, regions: tuple[str, ...], heading: str | None) -> None:
        """Start a segment with these regions and heading (the current one, when it holds nothing yet)."""
        current = self.segments[-1]
        if current.start == len(self.pieces):
            current.regions, current.heading = regions, heading
        else:
            self.segments.append(_Segment(regions, heading, len(self.pieces)))

    def start(self, tag: str) -> None:
        if tag in VOID:
            if tag in ("br", "hr") and not self.skipping:
                self._text("\n")
            return
        self.stack.append(tag)
        self.open[tag] += 1
        if tag in REGIONS and self.open[tag] == 1:
            self._regions_changed()
        if tag in SKIP:
            self.skipping += 1
        elif tag in HEADINGS and not self.skipping:
            self.in_heading, self.heading_text = True, []
        elif tag in BLOCKS and not self.skipping:
            self._text("\n\n")

    def end(self, tag: str) -> None:
        if tag in VOID or not self.open[tag]:
            return
        while self.stack:  # close anything left open inside (HTML allows unclosed <p>, <li>)
            top = self.stack.pop()
            self.open[top] -= 1
            if top in REGIONS and not self.open[top]:
                self._regions_changed()
            if top in SKIP:
                self.skipping -= 1
            if top in HEADINGS and self.in_heading and not self.skipping:
                self.in_heading = False
                heading = clean_heading("".join(self.heading_text)) or self.segments[-1].heading
                self._segment(self.segments[-1].regions, heading)
            if top == tag:
                break
        if tag in BLOCKS and not self.skipping:
            self._text("\n\n")

    def _regions_changed(self) -> None:
        self._segment((*(r for r in REGIONS if self.open[r]), _PAGE), self.segments[-1].heading)

    def data(self, data: str) -> None:
        if self.skipping:
            return
        if self.in_heading:
            self.heading_text.append(data)
        else:
            self._text(data)

    def _text(self, data: str) -> None:
        self.pieces.append(data)
        if data and not data.isspace():
            self.segments[-1].visible = True

    def runs(self) -> list[tuple[str | None, str]]:
        """(heading, text) of the first region that holds visible text (main, article, body, else the
        whole page), consecutive segments under one heading joined."""
        region = next((r for r in REGIONS if any(s.visible and r in s.regions for s in self.segments)), _PAGE)
        ends = [s.start for s in self.segments[1:]] + [len(self.pieces)]
        runs: list[tuple[str | None, list[str]]] = []
        for segment, stop in zip(self.segments, ends, strict=True):
            if region not in segment.regions or segment.start == stop:
                continue
            if not runs or runs[-1][0] != segment.heading:
                runs.append((segment.heading, []))
            runs[-1][1].extend(self.pieces[segment.start : stop])
        return [(heading, "".join(pieces)) for heading, pieces in runs]


def html_sections(text: str) -> list[Section]:
    """Sections of an HTML page (see the module docstring for what is kept)."""
    reader = _Reader()
    tokenize(text, reader.start, reader.end, reader.data)
    out = []
    for heading, text_run in reader.runs():
        paragraphs = [" ".join(p.split()) for p in text_run.split("\n\n")]
        body = "\n\n".join(p for p in paragraphs if p)
        if body:
            out.append(Section(heading, body))
    return out
