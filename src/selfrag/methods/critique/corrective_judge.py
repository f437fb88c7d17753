"""``self_corrective``'s judge: can the retrieved documents answer the question completely?

One call shows the documents and the question and asks for YES or NO and a
one-sentence reason (``prompts/self_corrective_reflect.txt``). The verdict is
read one of two ways (``self_corrective.judge``):

* ``text``: the verdict the reply writes (JSON, a ``DECISION:`` label or a
  leading Yes/No; an unreadable reply is NO), seed 004's judge;
* ``label_probs``: P(YES) among YES and NO at the reply's first token (every
  surface form summed: "YES", " Yes", "yes"), accepted at
  ``judge_threshold`` or above. A small model may write the same verdict to
  every search, so the written verdict cannot tell a good search from a bad
  one, while its probability can still rank a search that holds the evidence
  above one stripped of it; the threshold is where that ranking is cut for one
  model (measured per model: docs/results.md). It falls back to the written
  verdict when the backend gives no log-probabilities or the first token is
  not a YES/NO word (the labels hold less than ``MIN_MASS`` of it).

Either way the reply's reason is kept: a rejected search is rewritten from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection.decisions import NO, YES, Decision, parse_decision
from ...types import Document, Question
from ..core.context import build_context
from ..core.trace import Run, StepRecord
from ..steps.choice_reading import MIN_MASS, TOP_LOGPROBS, first_top, label_probs, normalised


class JudgeReading(StrEnum):
    """``self_corrective.judge``: the verdict as written, or read from the first token's label probabilities."""

    TEXT = "text"
    LABEL_PROBS = "label_probs"
LABELS = ("YES", "NO")


@dataclass(frozen=True)
class Judgement:
    """The verdict used (``decision``), the written one, and P(YES) when it decided (else None)."""

    decision: Decision
    written: Decision
    p_yes: float | None
    label_mass: float | None


def read_p_yes(step: StepRecord) -> tuple[float | None, float]:
    """P(YES) among YES/NO at the reply's first token, and the share of that token the two labels hold."""
    raw = label_probs(first_top(step), LABELS)
    probs = normalised(raw)
    return (None if probs is None else probs["YES"]), sum(raw.values())


async def judge_documents(
    run: Run, question: Question, docs: Sequence[Document], *, max_context_tokens: int, max_tokens: int,
    reading: JudgeReading = JudgeReading.TEXT, threshold: float = 0.5, thought_prefix: str = "",
) -> tuple[StepRecord, Judgement]:
    """The judging step (its details name the documents that fitted in the context) and its judgement."""
    context, used = build_context(docs, max_context_tokens, run.llm.count_tokens)
    prompt = render(load_prompt("self_corrective_reflect"), context=context, question=question.text)
    wants_probs = reading == JudgeReading.LABEL_PROBS and run.llm.supports_logprobs
    ask = f"can the {len(used)} retrieved document(s) answer the question completely?"
    step = await run.generate(
        chat(load_prompt("self_corrective_reflect_system"), prompt), action="reflect",
        thought=thought_prefix + ask if thought_prefix else ask[0].upper() + ask[1:],
        action_input=question.text, max_tokens=max_tokens, **({"top_logprobs": TOP_LOGPROBS} if wants_probs else {}),
    )
    written = parse_decision(step.text)
    judgement = Judgement(written, written, None, None)
    if reading == JudgeReading.LABEL_PROBS and not wants_probs:
        step.details["judge_note"] = "the backend gives no log-probabilities: the written verdict is used"
    elif wants_probs:
        p_yes, mass = read_p_yes(step)
        step.details.update(p_yes=None if p_yes is None else round(p_yes, 4), label_mass=round(mass, 4))
        if p_yes is not None and mass >= MIN_MASS:
            verdict = YES if p_yes >= threshold else NO
            decision = Decision(verdict, written.reason, True, "label_probs")
            judgement = Judgement(decision, written, p_yes, mass)
        else:
            step.details["judge_note"] = (f"YES/NO hold {mass:.2f} of the first token (< {MIN_MASS}): "
                                          "the written verdict is used")
    step.details["documents_shown"] = len(used)
    return step, judgement


def describe(judgement: Judgement, threshold: float) -> str:
    """The judging step's observation."""
    decision = judgement.decision
    if judgement.p_yes is not None:
        head = f"{decision.verdict} (P(YES) {judgement.p_yes:.3f} vs threshold {threshold}; wrote {judgement.written.verdict})"
    elif not decision.parsed:
        return "NO (the reflection could not be read; raw output kept)"
    else:
        head = decision.verdict
    return f"{head}: {decision.reason}" if decision.reason else head
