"""The file formats selfrag reads, by suffix, and what each needs.

Plain text, Markdown and HTML are read with the standard library; PDF and
Word files through the ``docs`` extra (``pip install 'selfrag[docs]'``:
``pypdf`` and ``python-docx``). JSONL document files are read by
:func:`selfrag.retrieval.store.read_documents` and are not listed here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from .html import html_sections
from .office import docx_sections, pdf_sections
from .sections import Section, markdown_sections, text_sections

JSONL_SUFFIXES = (".jsonl",)


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]
    # (the file's bytes, IngestLimits) -> its sections; text formats get the decoded text instead
    # (``binary`` False)
    read: Callable[..., list[Section]]
    binary: bool = False
    extra: str | None = None  # the extra that installs ``modules``
    modules: tuple[str, ...] = ()

    def available(self) -> bool:
        """Whether the packages this format needs are installed (checked without importing them)."""
        return all(importlib.util.find_spec(m) is not None for m in self.modules)


FORMATS: tuple[Format, ...] = (
    Format("text", (".txt", ".text"), text_sections),
    Format("Markdown", (".md", ".markdown"), markdown_sections),
    Format("HTML", (".html", ".htm", ".xhtml"), html_sections),
    Format("PDF", (".pdf",), pdf_sections, binary=True, extra="docs", modules=("pypdf",)),
    Format("Word", (".docx",), docx_sections, binary=True, extra="docs", modules=("docx",)),
)
_BY_SUFFIX = {suffix: f for f in FORMATS for suffix in f.suffixes}


def format_for(suffix: str) -> Format | None:
    return _BY_SUFFIX.get(suffix.lower())


def known_suffix(suffix: str) -> bool:
    """Whether selfrag reads files with this suffix (with or without an extra)."""
    return suffix.lower() in _BY_SUFFIX or suffix.lower() in JSONL_SUFFIXES


def described() -> str:
    """The formats as the help and errors name them."""
    plain = ", ".join(s for f in FORMATS if f.extra is None for s in f.suffixes[:1])
    extras = ", ".join(s for f in FORMATS if f.extra for s in f.suffixes[:1])
    return f"{plain}, .jsonl (and {extras} with pip install 'selfrag[docs]')"
