"""Seed 002's augmentation stages (Self-BioRAG), built on the critic.

* :func:`adaptive_retrieval` — ``mode: adaptive | always | never``; adaptive
  retrieves exactly when the retrieval probability exceeds ``threshold``.
* :func:`critic_rerank` — one candidate per retrieved passage, scored by
  ``w_rel·rel + w_sup·sup + w_use·use``; keeps ``top_k`` and records the
  scores before and after.
* :func:`self_reflect` — regenerates while the expected utility rating is
  below ``min_utility`` (4), at most ``max_iterations`` times, and returns the
  best answer seen by segment score.

Each records a stage step in the run's trace with the numbers behind its
decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field

from ...reflection import score as S
from ...reflection.readings import Feedback, critic_score, normalised, rating, segment_score
from ...types import Candidate, Document, RetrievalResult, Verdict
from ...validation import StrictModel
from ..core.trace import Run, shorten
from .critic import Critic, Task
from .decision import RetrievalMode
from .drafts import drafts as write_drafts
from .relevance import known_relevance


class AdaptiveConfig(StrictModel):
    """When to retrieve. Paper threshold: 0.2."""

    mode: RetrievalMode = RetrievalMode.ADAPTIVE
    threshold: float = Field(S.PAPER_THRESHOLD, ge=0.0, le=1.0)


class WeightsConfig(StrictModel):
    """Weights of the critique terms (paper: 1.0 / 1.0 / 0.5) and the sequence score switch."""

    w_rel: float = 1.0
    w_sup: float = 1.0
    w_use: float = 0.5
    use_seq_score: bool = True

    def weights(self) -> S.Weights:
        return S.Weights(
            w_rel=self.w_rel, w_sup=self.w_sup, w_use=self.w_use, use_seq_score=self.use_seq_score
        )


class RerankConfig(StrictModel):
    enabled: bool = True
    top_k: int = Field(3, ge=1)


class ReflectionConfig(StrictModel):
    enabled: bool = False
    max_iterations: int = Field(2, ge=1, le=10)
    min_utility: float = Field(4.0, ge=1.0, le=5.0)


# -- adaptive retrieval --------------------------------------------------------


@dataclass(frozen=True)
class RetrievalChoice:
    decision: str  # yes | no | continue
    p: float | None  # the probability compared with the threshold
    mode: str
    reading: Verdict | None = None

    @property
    def retrieve(self) -> bool:
        return self.decision == "yes"

    @property
    def uses_passages(self) -> bool:
        return self.decision in ("yes", "continue")


async def adaptive_retrieval(
    critic: Critic,
    run: Run,
    task: Task,
    *,
    mode: str,
    threshold: float,
    have_passages: bool = False,
) -> RetrievalChoice:
    """Decide whether to retrieve (a segment ``task`` adds "continue": reuse the passages at hand)."""
    stage = "adaptive retrieval"
    if mode != RetrievalMode.ADAPTIVE:
        decision = "yes" if mode == RetrievalMode.ALWAYS else "no"
        run.note(
            "retrieval_decision",
            thought=f"Stage: {stage} (mode={mode}): no model call.",
            observation="RETRIEVE" if decision == "yes" else "NO RETRIEVAL",
            details={"stage": stage, "mode": mode, "decision": decision},
        )
        return RetrievalChoice(decision, None, mode)
    reading, step = await critic.retrieval(run, task)
    probs = normalised(reading)
    p_ret = S.p_retrieve(probs) if probs is not None else None
    details: dict[str, Any] = {"stage": stage, "mode": mode, "threshold": threshold, "p_retrieve": _r(p_ret)}
    if task.segment:
        # The evidence probability counts "continue" with "yes" (see score.segment_decision).
        decision, p = S.segment_decision(probs, threshold, have_passages=have_passages)
        details["p_evidence"] = _r(p)
        details["answer_so_far"] = shorten(task.answer_so_far, 120) if task.answer_so_far else "(nothing yet)"
        name = "p_evidence"
    else:
        p = p_ret
        decision = "yes" if S.should_retrieve(p, threshold) else "no"
        name = "p_retrieve"
    details["decision"] = decision
    if p is None:
        details["decision_note"] = "retrieval probability unknown: retrieving"
    step.thought = f"Stage: {stage} (mode=adaptive, threshold={threshold})."
    step.details.update(details)
    label = {"yes": "RETRIEVE", "no": "NO RETRIEVAL", "continue": "CONTINUE WITH THE SAME PASSAGES"}[decision]
    shown = "unknown" if p is None else f"{p:.3f}"
    step.observation = f"{label} ({name}={shown} vs threshold {threshold}; {reading.source})"
    return RetrievalChoice(decision, p, mode, reading)


# -- critic reranking ------------------------------------------------------------


@dataclass
class Scored:
    """A candidate with its place in retrieval order and its scores."""

    draft: Candidate
    rank: int  # 0-based position in the retrieval result
    retrieval_score: float | None
    rerank: S.ScoreBreakdown

    @property
    def doc(self) -> Document | None:
        return self.draft.passage


@dataclass
class RerankResult:
    ranked: list[Scored]  # every candidate, best first
    kept: list[Scored]  # the top_k


async def critic_rerank(
    critic: Critic,
    run: Run,
    question: str,
    result: RetrievalResult,
    *,
    weights: S.Weights,
    top_k: int,
    known: Sequence[Verdict | None] | None = None,
) -> RerankResult:
    """Write and critique one candidate per retrieved passage; order by the critic score; keep ``top_k``.

    ``known``: relevance readings already made for the passages (None: made here as the critic's
    ``relevance`` setting asks)."""
    docs: list[Document | None] = list(result.documents)
    if known is None:
        known = await known_relevance(critic, run, question, result)
    drafts = await write_drafts(critic, run, Task(question), docs, known=known)
    scored = [
        Scored(d, i, result.scores[i] if i < len(result.scores) else None, critic_score(d, weights))
        for i, d in enumerate(drafts)
    ]
    order = S.rank([s.rerank.total for s in scored], len(scored))
    ranked = [scored[i] for i in order]
    kept = ranked[:top_k]
    run.note(
        "rerank",
        thought=(
            f"Stage: critic reranking: score = {weights.w_rel}·rel + {weights.w_sup}·sup + "
            f"{weights.w_use}·use; keep the top {top_k}."
        ),
        observation=f"kept {len(kept)} of {len(scored)}: " + ", ".join(_doc_name(s.doc) for s in kept),
        details={
            "stage": "critic reranking",
            "before": [
                {"doc": _doc_name(s.doc), "retrieval_score": _r(s.retrieval_score)} for s in scored
            ],
            "after": [
                {
                    "doc": _doc_name(s.doc),
                    "retrieval_score": _r(s.retrieval_score),
                    "rerank": _r(s.rerank.total),
                    "rel": _r(s.draft.value('relevance')),
                    "sup": _r(s.draft.value('support')),
                    "use": _r(s.draft.value('utility')),
                }
                for s in ranked
            ],
            "kept": [_doc_name(s.doc) for s in kept],
        },
    )
    return RerankResult(ranked=ranked, kept=kept)


# -- self-reflection --------------------------------------------------------------


@dataclass
class ReflectionResult:
    best: Candidate
    best_score: S.ScoreBreakdown
    iterations: list[dict[str, Any]] = field(default_factory=list)
    changed: bool = False
    stop: str = ""


async def self_reflect(
    critic: Critic,
    run: Run,
    question: str,
    start: Candidate,
    *,
    weights: S.Weights,
    max_iterations: int,
    min_utility: float,
) -> ReflectionResult:
    """Regenerate while the expected utility rating is below ``min_utility``; keep the best by segment score."""
    current = start
    best, best_score = start, segment_score(start, weights)
    iterations = [_iteration(0, start, best_score, changed=False)]
    stop = ""
    for i in range(1, max_iterations + 1):
        expected = rating(current)
        if expected is None:
            stop = "utility unknown: no basis for regenerating"
            break
        if expected >= min_utility:
            stop = f"utility {expected:.2f} >= {min_utility}"
            break
        known: Sequence[Verdict | None] = [current.verdicts.get("relevance")]
        [draft] = await write_drafts(
            critic, run, Task(question, feedback=Feedback(current.text, expected)), [current.passage], known=known
        )
        draft_score = segment_score(draft, weights)
        iterations.append(_iteration(i, draft, draft_score, changed=draft.text.strip() != current.text.strip()))
        if draft_score.total > best_score.total:
            best, best_score = draft, draft_score
        current = draft
    else:
        expected = rating(current)
        stop = (
            f"utility {expected:.2f} >= {min_utility}"
            if expected is not None and expected >= min_utility
            else f"max_iterations ({max_iterations}) reached"
        )
    changed = best.text.strip() != start.text.strip()
    run.note(
        "self_reflection",
        thought=(
            f"Stage: self-reflection: regenerate while utility < {min_utility}, "
            f"at most {max_iterations} times; keep the best answer seen."
        ),
        observation=("answer changed: " + shorten(best.text, 120)) if changed else "answer unchanged",
        details={
            "stage": "self-reflection",
            "iterations": iterations,
            "utility_ratings": [it["rating"] for it in iterations],
            "scores": [it["score"] for it in iterations],
            "improved": best is not start,
            "answer_changed": changed,
            "final_score": _r(best_score.total),
            "stop": stop,
        },
    )
    return ReflectionResult(best=best, best_score=best_score, iterations=iterations, changed=changed, stop=stop)


def _iteration(i: int, draft: Candidate, breakdown: S.ScoreBreakdown, *, changed: bool) -> dict[str, Any]:
    return {
        "iteration": i,
        "rating": _r(rating(draft)),
        "score": _r(breakdown.total),
        "sup": _r(draft.value('support')),
        "changed": changed,
        "answer": shorten(draft.text, 80),
    }


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _doc_name(doc: Document | None) -> str:
    if doc is None:
        return "(no passage)"
    return doc.id


def as_candidate(draft: Candidate, breakdown: S.ScoreBreakdown, **details: Any) -> Candidate:
    """A scored draft as the response lists it: its score, and the score's terms in its details."""
    return replace(draft, score=_r(breakdown.total), details={**breakdown.as_dict(), **details})
