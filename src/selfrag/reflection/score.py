"""Self-RAG's scoring formulas as pure functions of probabilities.

Everything here works on *probabilities*, never on raw log-probabilities:

* :func:`group_probs` turns one position's top log-probabilities into the
  summed probability of each label of a group (every surface form of a label
  word counts: "Yes", " yes", "yes"). A token absent from the top
  log-probabilities contributes probability 0.
* :func:`normalise` divides by the group's total. **A group with zero mass**
  (none of its tokens among the top log-probabilities, or an unparsed text
  label) **normalises to ``None``**, and every score built on it is ``None``:
  there is no evidence either way. Callers decide what ``None`` means and
  the trace says so: :func:`segment_score` counts a ``None`` term as 0 (no
  bonus, no penalty) and lists it under ``missing``; :func:`should_retrieve`
  retrieves when the retrieval probability is unknown.

Formulas (Asai et al., 2024, and the paper's released code):

* ``p_retrieve = P(yes) / (P(yes) + P(no))`` over ``[Retrieval]`` /
  ``[No Retrieval]``; adaptive retrieval retrieves when ``p_retrieve > threshold``
  (paper: 0.2);
* ``rel = P(relevant) / (P(relevant) + P(irrelevant))``;
* ``sup = (P(fully) + 0.5 P(partially)) / (P(fully) + P(partially) + P(no))``;
* ``use = Σ u_i P(i) / Σ P(i)`` with ``u = -1, -0.5, 0, 0.5, 1`` for ratings 1..5;
* ``seq = exp(mean log-probability of the generated tokens)``;
* ``score = seq + w_rel·rel + w_sup·sup + w_use·use`` (paper: 1.0, 1.0, 0.5;
  the sequence term is optional).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .tokens import TokenGroup

PAPER_THRESHOLD = 0.2
PAPER_BEAM_WIDTH = 2
UTILITY_VALUES = (-1.0, -0.5, 0.0, 0.5, 1.0)


def prob(logprob: float) -> float:
    """A log-probability as a probability (``-inf`` and NaN give 0)."""
    if logprob is None or math.isnan(logprob):
        return 0.0
    return math.exp(min(float(logprob), 0.0))


def group_probs(top: Mapping[str, float] | None, group: TokenGroup) -> dict[str, float]:
    """Summed probability of each label of ``group`` among ``top`` (token -> log-probability).

    Every label is present in the result; a label none of whose tokens are in
    ``top`` has probability 0.
    """
    out = {label: 0.0 for label in group.labels}
    for token, logprob in (top or {}).items():
        label = group.label_of(token)
        if label is not None:
            out[label] += prob(logprob)
    return out


def label_probs(label: str | None, group: TokenGroup) -> dict[str, float]:
    """A parsed text label as probabilities: 1 for the label, 0 for the rest (all 0 when unparsed)."""
    return {name: 1.0 if name == label else 0.0 for name in group.labels}


def normalise(probs: Mapping[str, float]) -> dict[str, float] | None:
    """Probabilities divided by their sum; ``None`` when the sum is 0."""
    total = sum(probs.values())
    if total <= 0.0:
        return None
    return {label: p / total for label, p in probs.items()}


def _masses(probs: Mapping[str, float], labels: Iterable[str]) -> tuple[list[float], float]:
    values = [float(probs.get(label, 0.0)) for label in labels]
    return values, sum(values)


def p_retrieve(probs: Mapping[str, float]) -> float | None:
    """``P(yes) / (P(yes) + P(no))``; ``None`` when both are 0."""
    (yes, no), total = _masses(probs, ("yes", "no"))
    return yes / total if total > 0 else None


def relevance(probs: Mapping[str, float]) -> float | None:
    """``P(relevant) / (P(relevant) + P(irrelevant))``."""
    (rel, _), total = _masses(probs, ("relevant", "irrelevant"))
    return rel / total if total > 0 else None


def support(probs: Mapping[str, float]) -> float | None:
    """``(P(fully) + 0.5 P(partially)) / (P(fully) + P(partially) + P(no))``."""
    (full, partial, _), total = _masses(probs, ("fully", "partially", "no"))
    return (full + 0.5 * partial) / total if total > 0 else None


def utility(probs: Mapping[str, float]) -> float | None:
    """``Σ u_i P(i) / Σ P(i)`` with ``u = -1, -0.5, 0, 0.5, 1``: a value in [-1, 1]."""
    values, total = _masses(probs, ("1", "2", "3", "4", "5"))
    if total <= 0:
        return None
    return sum(u * p for u, p in zip(UTILITY_VALUES, values, strict=True)) / total


def expected_rating(probs: Mapping[str, float]) -> float | None:
    """The expected utility rating on the 1..5 scale (``3 + 2·use``)."""
    use = utility(probs)
    return None if use is None else 3.0 + 2.0 * use


def p_yes(probs: Mapping[str, float]) -> float | None:
    """``P(yes) / (P(yes) + P(no))`` for a yes/no question (e.g. "is the answer complete?")."""
    return p_retrieve(probs)


GROUP_SCORES = {
    "retrieve": p_retrieve,
    "relevance": relevance,
    "support": support,
    "utility": utility,
    "final": p_yes,
}


def group_score(group: str, probs: Mapping[str, float]) -> float | None:
    return GROUP_SCORES[group](probs)


def sequence_score(logprobs: Sequence[float]) -> float | None:
    """``exp(mean token log-probability)``: the per-token geometric-mean probability, in [0, 1]."""
    if not logprobs:
        return None
    return math.exp(sum(logprobs) / len(logprobs))


@dataclass(frozen=True)
class Weights:
    """Weights of the critique terms (paper: 1.0, 1.0, 0.5) and whether the sequence score is added."""

    w_rel: float = 1.0
    w_sup: float = 1.0
    w_use: float = 0.5
    use_seq_score: bool = True


@dataclass(frozen=True)
class ScoreBreakdown:
    """A segment score and the terms it was made of."""

    total: float
    seq: float | None
    rel: float | None
    sup: float | None
    use: float | None
    missing: tuple[str, ...]

    def as_dict(self, digits: int = 4) -> dict[str, float | None | list[str]]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, digits)

        out: dict[str, float | None | list[str]] = {
            "score": r(self.total),
            "seq": r(self.seq),
            "rel": r(self.rel),
            "sup": r(self.sup),
            "use": r(self.use),
        }
        if self.missing:
            out["missing"] = list(self.missing)
        return out


def critic_score(
    *, rel: float | None, sup: float | None, use: float | None, weights: Weights
) -> ScoreBreakdown:
    """``w_rel·rel + w_sup·sup + w_use·use`` (the reranker's score); ``None`` terms count 0."""
    terms = {"rel": (rel, weights.w_rel), "sup": (sup, weights.w_sup), "use": (use, weights.w_use)}
    total = sum(w * v for v, w in terms.values() if v is not None)
    missing = tuple(name for name, (v, _) in terms.items() if v is None)
    return ScoreBreakdown(total=total, seq=None, rel=rel, sup=sup, use=use, missing=missing)


def segment_score(
    *,
    seq: float | None,
    rel: float | None,
    sup: float | None,
    use: float | None,
    weights: Weights,
) -> ScoreBreakdown:
    """``seq + w_rel·rel + w_sup·sup + w_use·use``; ``None`` terms count 0 and are listed as missing.

    The sequence term is added only when ``weights.use_seq_score``.
    """
    base = critic_score(rel=rel, sup=sup, use=use, weights=weights)
    if not weights.use_seq_score:
        return base
    missing = base.missing if seq is not None else ("seq", *base.missing)
    return ScoreBreakdown(
        total=base.total + (seq or 0.0), seq=seq, rel=rel, sup=sup, use=use, missing=missing
    )


def should_retrieve(p: float | None, threshold: float) -> bool:
    """Adaptive retrieval: retrieve when ``p > threshold``; an unknown probability retrieves."""
    return True if p is None else p > threshold


def segment_decision(
    probs: Mapping[str, float] | None, threshold: float, *, have_passages: bool
) -> tuple[str, float | None]:
    """The retrieval decision before a segment: ``"yes"``, ``"no"`` or ``"continue"``.

    Evidence is wanted when ``(P(yes) + P(continue)) / (P(yes) + P(no) + P(continue))``
    exceeds ``threshold`` (with no "continue" mass this is exactly ``p_retrieve``);
    then passages already at hand are reused when ``P(continue) >= P(yes)``,
    otherwise new ones are retrieved. Unknown probabilities retrieve. Returns
    the decision and the evidence probability.
    """
    if probs is None:
        return "yes", None
    yes, no, cont = (float(probs.get(k, 0.0)) for k in ("yes", "no", "continue"))
    total = yes + no + cont
    if total <= 0:
        return "yes", None
    p_evidence = (yes + cont) / total
    if p_evidence <= threshold:
        return "no", p_evidence
    if have_passages and cont >= yes:
        return "continue", p_evidence
    return "yes", p_evidence


def argmax_label(probs: Mapping[str, float] | None) -> str | None:
    """The most probable label (the first on ties); ``None`` without mass."""
    if not probs:
        return None
    best = max(probs.values())
    if best <= 0:
        return None
    return next(label for label, p in probs.items() if p == best)


def rank(scores: Sequence[float], width: int) -> list[int]:
    """Indices of the ``width`` highest scores, best first; ties keep the earlier index."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return order[: max(width, 0)]
