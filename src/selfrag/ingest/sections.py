"""What a reader makes of a file: its text cut at its headings.

Every format's reader returns a list of :class:`Section`: the heading a run of
text sits under (``None`` before the first heading) and that text, with
paragraphs separated by blank lines. Chunking (:mod:`.chunking`) turns
sections into passages titled ``file § heading``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    heading: str | None
    text: str


class Unreadable(Exception):
    """A file that its reader cannot turn into text (damaged, encrypted, no text layer); the message says why."""


_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def clean_heading(text: str) -> str:
    return " ".join(text.replace("§", " ").split())


def markdown_sections(text: str) -> list[Section]:
    """Sections of Markdown: ATX (``## Heading``) and setext (underlined) headings; none inside code fences."""
    sections: list[Section] = []
    heading: str | None = None
    lines: list[str] = []
    fenced = False

    def close() -> None:
        body = "\n".join(lines).strip()
        if body or heading is not None:
            sections.append(Section(heading, body))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(line)
            continue
        match = None if fenced else _ATX.match(line)
        if match and match.group(2).strip():
            close()
            heading = clean_heading(match.group(2))
            continue
        if not fenced and _SETEXT.match(line) and lines and lines[-1].strip() and (
                len(lines) == 1 or not lines[-2].strip()):
            # "Title\n=====": the line above is the heading (a lone "---" after a blank line is a rule).
            title = lines.pop()
            close()
            heading = clean_heading(title)
            continue
        lines.append(line)
    close()
    return [s for s in sections if s.text]


def text_sections(text: str) -> list[Section]:
    """A plain text file: one section, no heading (a first line ``# Title`` is read as Markdown)."""
    if text.lstrip().startswith("#"):
        return markdown_sections(text)
    body = text.strip()
    return [Section(None, body)] if body else []
