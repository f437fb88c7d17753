"""Lexical evidence that a retrieved passage belongs to a question.

A multi-hop question names one thing and asks about another: "In which city was
the director of Alien born?" needs the passage about *Alien* (named in the
question) and the one about *Ridley Scott* (named in the first passage, not in
the question). The retriever's score finds the first and often misses the
second; a small model's relevance verdict finds neither reliably (it calls
nearly every passage relevant). Three cheap signals, each in [0, 1]:

* ``score``: the passage's retrieval score over the best score of the same
  retrieval (0 when every score is 0 or negative);
* ``named``: the passage's title occurs in the question;
* ``linked``: the passage's title occurs in another of the ``link_depth``
  best-scored passages (a bridge to a second hop).

:func:`evidence_prior` is their mean; it ranks gold supporting paragraphs
above distractors much better than the retrieval score alone
(docs/results.md). Passages without
titles get only the score signal. Titles are compared after the answer
normalisation (lower case, no punctuation or articles) with any trailing
parenthetical ("Alien (film)") removed. A passage cut from a user's file is
titled ``file § heading`` (:mod:`selfrag.ingest.chunking`): its heading is the
name a question would use, so only the heading is compared (a file name such as
``museum.html`` is not how anyone asks).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..ingest.chunking import heading_of
from ..normalize import normalize_answer as _norm
from ..types import Document

LINK_DEPTH = 3
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


def title_name(title: str | None) -> str:
    """The normalised name a question would call a passage by: its title, or the heading of a
    ``file § heading`` title, without a trailing parenthetical."""
    text = title or ""
    return _norm(_PAREN.sub("", heading_of(text) or text))


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


@dataclass(frozen=True)
class Evidence:
    """The three signals of one passage and their mean."""

    score: float
    named: bool
    linked: bool

    @property
    def prior(self) -> float:
        return (self.score + float(self.named) + float(self.linked)) / 3


def evidence(
    question: str, docs: Sequence[Document], scores: Sequence[float] | None = None,
    *, link_depth: int = LINK_DEPTH,
) -> list[Evidence]:
    """The signals of each passage, in the order given (``scores`` aligned with ``docs``).

    Without scores every passage gets score 1 (no retrieval preference).
    """
    if scores is not None and len(scores) != len(docs):
        raise ValueError(f"{len(scores)} scores for {len(docs)} documents")
    values = list(scores) if scores is not None else [1.0] * len(docs)
    best = max(values, default=0.0)
    q = _norm(question)
    top = sorted(range(len(docs)), key=lambda i: -values[i])[:link_depth]
    texts = {i: _norm(docs[i].text) for i in top}
    out = []
    for i, doc in enumerate(docs):
        title = title_name(doc.title)
        out.append(Evidence(
            score=max(values[i], 0.0) / best if best > 0 else 0.0,
            named=_contains(q, title),
            linked=any(_contains(texts[j], title) for j in top if j != i),
        ))
    return out


def evidence_prior(
    question: str, docs: Sequence[Document], scores: Sequence[float] | None = None,
    *, link_depth: int = LINK_DEPTH,
) -> list[float]:
    """:attr:`Evidence.prior` of each passage, in the order given."""
    return [e.prior for e in evidence(question, docs, scores, link_depth=link_depth)]
