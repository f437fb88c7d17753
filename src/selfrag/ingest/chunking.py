"""Cutting a file's sections into passages of about ``size`` tokens, with a small overlap.

Tokens are counted without a model's tokenizer (the index is built before any
model is loaded): a word or a punctuation mark is one token
(:func:`count_tokens`), which runs within about a third of what the
models' BPE tokenizers count for English prose, so a passage of the default
200 tokens fits four or five times over in a method's context budget.

A section is cut at paragraph boundaries first, then at sentence ends, then
(for a sentence longer than a passage) at words. Each passage after the first
of a section starts with the last sentences of the one before, up to
``overlap`` tokens, so a fact split across the cut is whole in one of them.
Every passage is titled ``file § heading`` (``file`` alone before a file's
first heading); a file's passages are numbered ``#1``, ``#2`` ... in their ids
when there is more than one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice

from ..errors import ConfigError
from ..types import Document
from .sections import Section

DEFAULT_CHUNK_SIZE = 200
DEFAULT_CHUNK_OVERLAP = 20
MIN_CHUNK_SIZE = 16
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class ChunkSettings:
    size: int = DEFAULT_CHUNK_SIZE
    overlap: int = DEFAULT_CHUNK_OVERLAP

    def __post_init__(self) -> None:
        if self.size < MIN_CHUNK_SIZE:
            raise ConfigError(f"chunk size must be at least {MIN_CHUNK_SIZE} tokens, got {self.size}")
        if not 0 <= self.overlap < self.size // 2:
            raise ConfigError(
                f"chunk overlap must be at least 0 and under half the chunk size ({self.size}), got {self.overlap}"
            )

    def as_dict(self) -> dict[str, int]:
        return {"size": self.size, "overlap": self.overlap}


def count_tokens(text: str) -> int:
    """Words and punctuation marks in ``text`` (the chunker's token count)."""
    return len(_TOKEN.findall(text))


def _fits(text: str, size: int) -> bool:
    """Whether ``text`` holds at most ``size`` tokens, reading no further than token ``size + 1`` (a
    paragraph of megabytes is not tokenized whole to find out that it does not fit)."""
    if len(text) <= size:  # a token is at least one character
        return True
    return sum(1 for _ in islice(_TOKEN.finditer(text), size + 1)) <= size


def _between(pattern: re.Pattern[str], text: str) -> Iterator[str]:
    """``pattern.split(text)`` one piece at a time (``pattern`` has no groups)."""
    start = 0
    for match in pattern.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    yield text[start:]


def _units(text: str, size: int) -> Iterator[tuple[str, bool]]:
    """(unit, whether it opens a paragraph): paragraphs no longer than ``size`` tokens; longer ones cut
    into sentences, then into word runs. Pieces are produced one at a time, so a file of one long
    line costs its length once, not once per list of its sentences and words."""
    for paragraph in _between(_PARAGRAPH_BREAK, text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if _fits(paragraph, size):
            yield paragraph, True
            continue
        first = True
        for sentence in _between(_SENTENCE_END, paragraph):
            if _fits(sentence, size):
                yield sentence, first
                first = False
                continue
            run: list[str] = []
            tokens = 0
            for match in _WORD.finditer(sentence):
                word = match.group()
                n = count_tokens(word) or 1
                if run and tokens + n > size:
                    yield " ".join(run), first
                    first = False
                    run, tokens = [], 0
                run.append(word)
                tokens += n
            if run:
                yield " ".join(run), first
                first = False


def _tail(text: str, budget: int) -> str:
    """The last sentences of ``text`` within ``budget`` tokens (else its last ``budget`` words)."""
    if budget <= 0:
        return ""
    sentences = _SENTENCE_END.split(text)
    kept: list[str] = []
    used = 0
    for sentence in reversed(sentences):
        n = count_tokens(sentence)
        if used + n > budget:
            break
        kept.insert(0, sentence)
        used += n
    if kept and len(kept) < len(sentences):
        return " ".join(kept)
    words = text.split()
    out: list[str] = []
    for word in reversed(words):
        used_now = count_tokens(" ".join([word, *out]))
        if used_now > budget:
            break
        out.insert(0, word)
    return " ".join(out) if len(out) < len(words) else ""


def chunk_section(text: str, settings: ChunkSettings) -> list[str]:
    """The passages of one section's text (see the module docstring)."""
    chunks: list[str] = []
    current = ""
    tokens = 0
    for unit, opens_paragraph in _units(text, settings.size - settings.overlap):
        n = count_tokens(unit)
        if current and tokens + n > settings.size:
            chunks.append(current)
            current = _tail(current, settings.overlap)
            tokens = count_tokens(current)
        joiner = "\n\n" if opens_paragraph else " "
        current = f"{current}{joiner}{unit}" if current else unit
        tokens += n
    if current:
        chunks.append(current)
    return chunks


HEADING_MARK = " § "


def title_for(name: str, heading: str | None) -> str:
    return f"{name}{HEADING_MARK}{heading}" if heading else name


def heading_of(title: str) -> str | None:
    """The heading of a title made by :func:`title_for` (None: the title names a whole file, or was not made here)."""
    return title.rsplit(HEADING_MARK, 1)[1] if HEADING_MARK in title else None


def chunk_file(name: str, sections: list[Section], settings: ChunkSettings, *, id_base: str | None = None,
               metadata: dict | None = None, limit: Callable[[int], None] | None = None) -> list[Document]:
    """The passages of one file, in order, titled ``name § heading``; ids ``id_base`` (default ``name``)
    for a file of one passage, else ``id_base#1``, ``id_base#2`` ... ``limit(count)`` is called as the
    passages are cut, so a cap stops the cutting once it is passed."""
    base = id_base or name
    pieces: list[tuple[str, str]] = []
    for s in sections:
        title = title_for(name, s.heading)  # one string for the section's passages
        for chunk in chunk_section(s.text, settings):
            pieces.append((title, chunk))
            if limit is not None and len(pieces) % 1000 == 1:
                limit(len(pieces))
    if limit is not None:
        limit(len(pieces))
    docs = []
    for i, (title, text) in enumerate(pieces, start=1):
        doc_id = base if len(pieces) == 1 else f"{base}#{i}"
        docs.append(Document(id=doc_id, title=title, text=text, metadata=dict(metadata or {})))
    return docs
