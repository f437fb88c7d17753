"""Which of the passages an answer was written from it cites, and after which sentence.

A method reports the passages its final answer was written from (read); not
every one of them supports the answer. A read passage is cited when it:

* **holds the answer**: the normalised answer occurs in its title or text, as
  whole words (a yes/no answer holds nothing to find);
* **is named in the question**: its title (without a trailing "(film)"-style
  parenthesis) occurs in the question, the passage a question is about; or
* **bridges to the answer**: it names the title of a passage that holds the
  answer, or that passage names its title (the first hop of a two-hop
  question).

When none qualifies, the first read passage (the one the method ranked best)
is cited, so an answer never stands without a source it was written from.
Measured on recorded HotpotQA answers against the gold supporting paragraphs
(lab/citations.py, docs/results.md), this keeps most of the recall of citing
everything read at about twice its precision.

Markers go after the sentence they support: each cited passage is attached to
the answer sentence sharing the most content words with it (ties: the last).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..normalize import normalize_answer
from ..types import Document

_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"')\]]*|$)")
_WORD = re.compile(r"[a-z0-9]+")
_UNCHECKABLE = {"", "yes", "no", "noanswer"}


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def _title(doc: Document) -> str:
    return normalize_answer(_PAREN.sub("", doc.title or ""))


def supporting(question: str, answer: str, read: Sequence[Document]) -> list[int]:
    """Indices (into ``read``, in order) of the passages that support ``answer`` (see the module docstring)."""
    if not read:
        return []
    wanted = normalize_answer(answer)
    texts = [normalize_answer(f"{d.title}\n{d.text}") for d in read]
    titles = [_title(d) for d in read]
    q = normalize_answer(question)
    holds = [i for i, t in enumerate(texts) if wanted not in _UNCHECKABLE and _contains(t, wanted)]
    chosen = set(holds) | {i for i, t in enumerate(titles) if _contains(q, t)}
    for i in holds:
        for j in range(len(read)):
            if j != i and (_contains(texts[i], titles[j]) or _contains(texts[j], titles[i])):
                chosen.add(j)
    return sorted(chosen) or [0]


def sentences(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``answer`` (the whole answer when it has no sentence end)."""
    spans = []
    for match in _SENTENCE.finditer(answer):
        start, end = match.span()
        while start < end and answer[start].isspace():
            start += 1
        while end > start and answer[end - 1].isspace():
            end -= 1
        if start < end:
            spans.append((start, end))
    return spans or [(0, len(answer))]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def sentence_of_each(answer: str, cited: Sequence[Document]) -> list[int]:
    """For each cited passage, the index of the answer sentence it supports."""
    spans = sentences(answer)
    out = []
    for doc in cited:
        words = _words(f"{doc.title} {doc.text}")
        overlap = [len(_words(answer[s:e]) & words) for s, e in spans]
        best = max(overlap, default=0)
        out.append(max(i for i, n in enumerate(overlap) if n == best) if spans else 0)
    return out


def with_markers(answer: str, cited: Sequence[Document]) -> str:
    """``answer`` with ``[n]`` after the sentence each cited passage supports (n: 1-based citation number)."""
    if not cited or not answer:
        return answer
    spans = sentences(answer)
    marks: dict[int, list[int]] = {}
    for n, sentence in enumerate(sentence_of_each(answer, cited), start=1):
        marks.setdefault(sentence, []).append(n)
    out, at = [], 0
    for index, (_, end) in enumerate(spans):
        out.append(answer[at:end])
        if index in marks:
            out.append(" " + "".join(f"[{n}]" for n in marks[index]))
        at = end
    out.append(answer[at:])
    return "".join(out)
