"""Cutting HTML into start tags, end tags and text, in one pass over any input.

The standard library's ``html.parser`` rescans the rest of the page for every
malformed construct it meets at the end of its input, so a few megabytes of
``<a `` or ``</`` or ``<!`` took minutes. This tokenizer reads the page
once: every search it makes starts where the last one ended and what it
scans is consumed, so it costs time linear in the page whatever the page
holds. It follows the HTML standard's tokenizer where that matters for text:

- a tag ends at the first ``>`` outside a quoted attribute value (a quote
  opens a value only right after ``=``); a tag, comment or declaration that
  the page never closes takes the rest of the page, as in a browser;
- ``<!-- ... -->`` comments, ``<!...>`` declarations and ``<?...>`` are
  dropped; a ``<`` that starts none of these is text;
- ``script`` and ``style`` hold raw text up to their own end tag;
- character references in text are decoded (``html.unescape``).

Attributes are never parsed: the reader needs only tag names.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

# A "<" that opens something: a start tag (group 1: its name), an end tag (group 2), or a comment,
# declaration, processing instruction or malformed end tag ("<!", "<?", "</" and no name).
_OPENING = re.compile(r"<(?:([a-zA-Z][^\s/>]*)|/([a-zA-Z][^\s/>]*)|[/!?])")
_TAG_STOP = re.compile(r"[>\"']")
_RAW_TEXT = frozenset({"script", "style"})
_SPACE = " \t\n\r\f"


def _tag_end(text: str, at: int) -> int:
    """The index just past the ``>`` that closes the tag whose attributes start at ``at`` (-1: the tag
    runs to the end of the page)."""
    while True:
        stop = _TAG_STOP.search(text, at)
        if stop is None:
            return -1
        if stop.group() == ">":
            return stop.end()
        quote = stop.start()
        before = quote - 1
        while before >= at and text[before] in _SPACE:
            before -= 1
        if before >= at and text[before] == "=":  # a quoted value: it may hold ">"
            close = text.find(stop.group(), quote + 1)
            if close < 0:
                return -1
            at = close + 1
        else:
            at = quote + 1


def tokenize(
    text: str,
    start: Callable[[str], None],
    end: Callable[[str], None],
    data: Callable[[str], None],
) -> None:
    """Call ``start(name)``, ``end(name)`` (lower-case names) and ``data(text)`` for the page in order; a
    self-closing tag (``<div/>``) is a start and an end."""
    pending = 0  # where the text not yet passed to ``data`` starts
    at = 0
    size = len(text)

    def flush(upto: int) -> None:
        if upto > pending:
            data(html.unescape(text[pending:upto]))

    while (found := _OPENING.search(text, at)) is not None:
        lt = found.start()
        flush(lt)
        if found.group(1) or found.group(2):
            close = _tag_end(text, found.end())
            if close < 0:
                return  # a tag the page never closes takes the rest of it
            if found.group(2):
                end(found.group(2).lower())
            else:
                tag = found.group(1).lower()
                start(tag)
                if text[close - 2] == "/":
                    end(tag)
                elif tag in _RAW_TEXT:
                    closing = re.compile(rf"</{tag}[\s/>]", re.IGNORECASE).search(text, close)
                    if closing is None:
                        return  # a script never closed: the rest of the page is its code
                    data(text[close : closing.start()])
                    close = _tag_end(text, closing.start() + 2 + len(tag))
                    end(tag)
                    if close < 0:
                        return
        elif text.startswith(("<!-->", "<!--->"), lt):  # an empty comment, closed at once
            close = text.index(">", lt) + 1
        elif text.startswith("<!--", lt):
            close = text.find("-->", lt + 4)
            if close < 0:
                return
            close += 3
        else:  # a declaration, a processing instruction, a malformed end tag: up to ">"
            close = text.find(">", lt + 2)
            if close < 0:
                return
            close += 1
        pending = at = close
    flush(size)
