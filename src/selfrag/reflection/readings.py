"""Critique readings and candidate drafts: probabilities in, scores out (pure, no model calls).

A :class:`Reading` is one critique (the probability of each label of a
group, as read from a model); a :class:`Draft` is a candidate answer or
segment with its readings, scored by :mod:`selfrag.reflection.score`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..types import Document, Generation
from . import score as S

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")



@dataclass(frozen=True)
class Reading:
    """One critique: the probability of each label of a group.

    ``raw`` holds summed probabilities as read; ``probs`` the same normalised
    within the group (``None`` when the group had no mass); ``source`` says
    how it was read (``reflection_tokens``, ``label_probs`` or ``text``).
    """

    group: str
    raw: dict[str, float]
    source: str
    note: str = ""

    @property
    def probs(self) -> dict[str, float] | None:
        return S.normalise(self.raw)

    @property
    def value(self) -> float | None:
        probs = self.probs
        return None if probs is None else S.group_score(self.group, probs)

    @property
    def label(self) -> str | None:
        return S.argmax_label(self.probs)

    def details(self) -> dict[str, Any]:
        probs = self.probs
        out: dict[str, Any] = {
            "critique": self.group,
            "critique_source": self.source,
            "probs": {k: round(v, 4) for k, v in probs.items()} if probs else "none (no probability mass)",
            "value": None if self.value is None else round(self.value, 4),
            "label": self.label,
        }
        if self.group == "retrieve":
            out["logprobs"] = {k: (round(math.log(v), 4) if v > 0 else None) for k, v in self.raw.items()}
        if self.note:
            out["note"] = self.note
        return out

    def summary(self) -> str:
        value = "unknown" if self.value is None else f"{self.value:.3f}"
        return f"{self.group}={value} ({self.label or 'no label'}; {self.source})"


@dataclass
class Draft:
    """A candidate (an answer, or the next segment of one) and its critique."""

    text: str
    passage: Document | None
    readings: dict[str, Reading] = field(default_factory=dict)
    seq: float | None = None
    final: bool = True
    index: int = 0

    def value(self, group: str) -> float | None:
        reading = self.readings.get(group)
        return None if reading is None else reading.value

    @property
    def rel(self) -> float | None:
        return self.value("relevance")

    @property
    def sup(self) -> float | None:
        return self.value("support")

    @property
    def use(self) -> float | None:
        return self.value("utility")

    @property
    def rating(self) -> float | None:
        """Expected utility rating on the 1..5 scale."""
        use = self.use
        return None if use is None else 3.0 + 2.0 * use

    def label(self, group: str) -> str | None:
        reading = self.readings.get(group)
        return None if reading is None else reading.label

    def score(self, weights: S.Weights) -> S.ScoreBreakdown:
        return S.segment_score(seq=self.seq, rel=self.rel, sup=self.sup, use=self.use, weights=weights)

    def critic_score(self, weights: S.Weights) -> S.ScoreBreakdown:
        return S.critic_score(rel=self.rel, sup=self.sup, use=self.use, weights=weights)


@dataclass(frozen=True)
class Feedback:
    """What a regeneration is told about the previous attempt (self-reflection)."""

    previous: str
    rating: float


def first_sentence(text: str) -> str:
    """The text up to and including its first sentence end (all of it when there is none)."""
    text = text.strip()
    match = _SENTENCE_END.search(text)
    return text[: match.end()].strip() if match else text


def prefix_logprobs(gen: Generation, text: str) -> list[float]:
    """Log-probabilities of the generated tokens that produced ``text`` (a prefix of the output)."""
    if not gen.logprobs:
        return []
    target = len(text.strip())
    out: list[float] = []
    acc = ""
    for pos in gen.logprobs:
        if len(acc.strip()) >= target:
            break
        acc += pos.token
        out.append(pos.logprob)
    return out
