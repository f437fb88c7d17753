"""Critique readings: label probabilities in, verdicts and scores out (pure, no model calls).

:func:`reading` turns the probability of each label of a group, as read from
a model, into a :class:`~selfrag.types.Verdict`; a
:class:`~selfrag.types.Candidate` carries its verdicts and is scored by
:mod:`selfrag.reflection.score`'s formulas (:func:`segment_score`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..types import Candidate, Generation, Verdict
from . import score as S

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
# A support label in the words every surface shows.
SUPPORT_WORDS = {"fully": "fully supported", "partially": "partially supported", "no": "no support"}


def reading(aspect: str, raw: Mapping[str, float], source: str, note: str = "", *, default: bool = False) -> Verdict:
    """A verdict read as label probabilities (``raw``: the summed probability of each label as read;
    a written label counts as probability 1): its value by the paper's formulas, its most probable
    label. No probability mass: value and label are None."""
    probs = S.normalise(raw)
    label = S.argmax_label(probs)
    return Verdict(
        aspect=aspect,
        value=None if probs is None else S.group_score(aspect, probs),
        label=SUPPORT_WORDS.get(label, label) if aspect == "support" and label else label,
        source=source,
        probs=dict(raw),
        default=default,
        note=note,
    )


# The value of a label as written, on the scale of the same aspect read as probabilities.
_WRITTEN = {
    "relevance": {"relevant": 1.0, "irrelevant": 0.0},
    "support": {"fully supported": 1.0, "partially supported": 0.5, "no support": 0.0},
    "retrieve": {"yes": 1.0, "no": 0.0},
}


def written(aspect: str, label: Any, source: str, *, default: bool = False, note: str = "") -> Verdict:
    """A verdict the model wrote as a label (``relevant``, ``fully_supported``, a 1-5 rating, a yes/no):
    its value on the scale a probability reading of the same aspect has (relevance and retrieval 1 / 0,
    support 1 / 0.5 / 0, utility ``(rating - 3) / 2`` in [-1, 1]). ``default``: the reply held no
    usable verdict and ``label`` is the parser's default, so it is no judgement."""
    if isinstance(label, bool):
        label = "yes" if label else "no"
    if aspect == "utility":
        shown = str(label)
        value = (float(label) - 3.0) / 2.0 if shown.strip().lstrip("-").replace(".", "", 1).isdigit() else None
    else:
        shown = str(label)
        value = _WRITTEN.get(aspect, {}).get(shown.replace("_", " "))
    return Verdict(aspect=aspect, value=value, label=shown, source=source, default=default, note=note)


def normalised(verdict: Verdict) -> dict[str, float] | None:
    """The verdict's label probabilities, summing to 1 (None: no probability mass, or a written label)."""
    return None if verdict.probs is None else S.normalise(verdict.probs)


def verdict_details(verdict: Verdict) -> dict[str, Any]:
    """A verdict as its trace step shows it."""
    probs = normalised(verdict)
    out: dict[str, Any] = {
        "critique": verdict.aspect,
        "critique_source": verdict.source,
        "probs": {k: round(v, 4) for k, v in probs.items()} if probs else "none (no probability mass)",
        "value": None if verdict.value is None else round(verdict.value, 4),
        "label": verdict.label,
    }
    if verdict.aspect == "retrieve" and verdict.probs is not None:
        out["logprobs"] = {k: (round(math.log(v), 4) if v > 0 else None) for k, v in verdict.probs.items()}
    if verdict.note:
        out["note"] = verdict.note
    return out


def verdict_summary(verdict: Verdict) -> str:
    value = "unknown" if verdict.value is None else f"{verdict.value:.3f}"
    return f"{verdict.aspect}={value} ({verdict.label or 'no label'}; {verdict.source})"


def rating(candidate: Candidate) -> float | None:
    """The expected utility rating on the 1..5 scale (from the utility value in [-1, 1])."""
    use = candidate.value("utility")
    return None if use is None else 3.0 + 2.0 * use


def segment_score(candidate: Candidate, weights: S.Weights) -> S.ScoreBreakdown:
    """The paper's segment score of a candidate: seq + w_rel·rel + w_sup·sup + w_use·use."""
    return S.segment_score(seq=candidate.seq, rel=candidate.value("relevance"), sup=candidate.value("support"),
                           use=candidate.value("utility"), weights=weights)


def critic_score(candidate: Candidate, weights: S.Weights) -> S.ScoreBreakdown:
    """The critic reranker's score of a candidate: w_rel·rel + w_sup·sup + w_use·use."""
    return S.critic_score(rel=candidate.value("relevance"), sup=candidate.value("support"),
                          use=candidate.value("utility"), weights=weights)


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
