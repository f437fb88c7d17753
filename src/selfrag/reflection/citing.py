"""Which of the passages an answer was written from it cites, and after which sentence.

A method reports the passages its final answer was written from (read); not
every one of them supports the answer. A read passage is cited when it:

* **holds the answer**: the normalised answer occurs in its title or text, as
  whole words (a yes/no answer holds nothing to find); for a written answer
  (two sentences or more, or :data:`LONG_ANSWER_WORDS` words), also a passage
  that shares at least half, and at least two, of the content words of one
  of its sentences;
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
Sentences end where a sentence really ends, not inside ``4.5`` or after
``Dr.`` (:mod:`selfrag.reflection.sentences`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..normalize import names_nothing, normalize_answer
from ..types import Document
from .sentences import sentences

_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_WORD = re.compile(r"[a-z0-9]+")
# From this many words on, an answer is read sentence by sentence too (_states_a_sentence).
LONG_ANSWER_WORDS = 8
_STOP = frozenset(
    ["the", "and", "for", "are", "was", "were", "has", "have", "had", "its", "his", "her", "their", "they", "this", "that", "these", "those", "with", "from", "into", "not", "but", "can", "could", "would", "should", "will", "may", "might", "been", "being", "also", "than", "then", "there", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "does", "did", "about", "over", "after", "before"]
)


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def _title(doc: Document) -> str:
    return normalize_answer(_PAREN.sub("", doc.title or ""))


def supporting(question: str, answer: str, read: Sequence[Document]) -> list[int]:
    """Indices (into ``read``, in order) of the passages that support ``answer`` (see the module docstring)."""
    if not read:
        return []
    wanted, unnamed = normalize_answer(answer), names_nothing(answer)
    texts = [normalize_answer(f"{d.title}\n{d.text}") for d in read]
    titles = [_title(d) for d in read]
    q = normalize_answer(question)
    holds = [i for i, t in enumerate(texts) if not unnamed and _contains(t, wanted)]
    if _long(answer):  # a written answer: a passage that states one of its sentences holds that much
        holds = sorted(set(holds) | set(_states_a_sentence(answer, read)))
    chosen = set(holds) | {i for i, t in enumerate(titles) if _contains(q, t)}
    # A bridge names the other passage's title in its own text (not in its title: "Doc A" and "Doc B"
    # share a word, not a link).
    bodies = [normalize_answer(d.text) for d in read]
    for i in holds:
        for j in range(len(read)):
            if j != i and (_contains(bodies[i], titles[j]) or _contains(bodies[j], titles[i])):
                chosen.add(j)
    return sorted(chosen) or [0]


def _long(answer: str) -> bool:
    """An answer of several sentences, or of :data:`LONG_ANSWER_WORDS` words or more."""
    return len(sentences(answer)) > 1 or len(answer.split()) >= LONG_ANSWER_WORDS


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


def _states_a_sentence(answer: str, read: Sequence[Document]) -> list[int]:
    """Passages sharing at least half (and at least two) of the content words of one answer sentence."""
    out = []
    for i, doc in enumerate(read):
        words = _content(f"{doc.title} {doc.text}")
        for s, e in sentences(answer):
            wanted = _content(answer[s:e])
            if wanted and len(wanted & words) >= max(2, -(-len(wanted) // 2)):
                out.append(i)
                break
    return out


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
