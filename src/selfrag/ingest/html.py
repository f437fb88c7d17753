"""HTML pages, read with the standard library's parser.

A saved web page carries menus, banners, scripts and footers around the text
that matters. The reader keeps the page's ``<main>`` (or, without one, its
``<article>`` elements, or else its ``<body>``), drops what is never content
(``script``, ``style``, ``nav``, ``header``, ``footer``, ``aside``, ``form``,
``template``, ``noscript``, ``svg``) and cuts the text at ``<h1>``-``<h6>``
headings. docs/documents.md says why this reader rather than a converter
library (measured there on the same pages).
"""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

from .sections import Section, clean_heading

SKIP = frozenset({"script", "style", "nav", "header", "footer", "aside", "form", "template", "noscript", "svg",
                  "head", "button", "select", "iframe"})
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCKS = frozenset({"p", "div", "li", "tr", "br", "section", "article", "main", "blockquote", "pre", "dd", "dt",
                    "table", "ul", "ol", "figcaption", "hr"}) | HEADINGS
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"})
REGIONS = ("main", "article", "body")


class _Reader(HTMLParser):
    """Collects (regions, heading, text) pieces; regions are the open "main", "article" and "body".

    Every step costs the same however deep the page nests: the open elements are counted by tag
    (an end tag with none open is ignored without scanning the stack), and the set of open regions
    is kept, not recomputed from the stack for each piece of text.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.open: Counter[str] = Counter()
        self.regions: frozenset[str] = frozenset()
        self.skipping = 0
        self.in_heading = False
        self.heading_text: list[str] = []
        self.pieces: list[tuple[frozenset[str], str | None, str]] = []
        self.heading: str | None = None
        self.title: list[str] = []
        self.in_title = False

    def _push(self, tag: str) -> None:
        self.stack.append(tag)
        self.open[tag] += 1
        if tag in REGIONS and self.open[tag] == 1:
            self.regions = self.regions | {tag}

    def _pop(self) -> str:
        tag = self.stack.pop()
        self.open[tag] -= 1
        if tag in REGIONS and not self.open[tag]:
            self.regions = self.regions - {tag}
        return tag

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "title":
            self.in_title = True
        if tag in VOID:
            if tag in ("br", "hr") and not self.skipping:
                self._text("\n")
            return
        self._push(tag)
        if tag in SKIP:
            self.skipping += 1
        elif tag in HEADINGS and not self.skipping:
            self.in_heading, self.heading_text = True, []
        elif tag in BLOCKS and not self.skipping:
            self._text("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in VOID or not self.open[tag]:
            return
        while self.stack:  # close anything left open inside (HTML allows unclosed <p>, <li>)
            top = self._pop()
            if top in SKIP:
                self.skipping -= 1
            if top in HEADINGS and self.in_heading and not self.skipping:
                self.in_heading = False
                self.heading = clean_heading("".join(self.heading_text)) or self.heading
                self.pieces.append((self.regions | {top}, self.heading, ""))
            if top == tag:
                break
        if tag in BLOCKS and not self.skipping:
            self._text("\n\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        if self.skipping:
            return
        if self.in_heading:
            self.heading_text.append(data)
        else:
            self._text(data)

    def _text(self, data: str) -> None:
        self.pieces.append((self.regions, self.heading, data))


def html_sections(text: str) -> list[Section]:
    """Sections of an HTML page (see the module docstring for what is kept)."""
    reader = _Reader()
    reader.feed(text)
    reader.close()
    for region in REGIONS:
        kept = [(h, t) for regions, h, t in reader.pieces if region in regions]
        if any(t.strip() for _, t in kept):
            break
    else:
        kept = [(h, t) for _, h, t in reader.pieces]
    # Runs of pieces under one heading, joined once (not text + piece per piece: that is quadratic).
    runs: list[tuple[str | None, list[str]]] = []
    for heading, piece in kept:
        if runs and runs[-1][0] == heading:
            runs[-1][1].append(piece)
        else:
            runs.append((heading, [piece]))
    out = []
    for heading, pieces in runs:
        paragraphs = [" ".join(p.split()) for p in "".join(pieces).split("\n\n")]
        body = "\n\n".join(p for p in paragraphs if p)
        if body:
            out.append(Section(heading, body))
    return out
