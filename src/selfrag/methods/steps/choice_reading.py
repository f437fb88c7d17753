"""A choice question's answer read from label probabilities, with the prompt's own label bias divided out.

Small models answer choice questions with a label prior that has little to
do with the question (the same option letter, or "yes", for most questions
whatever their gold label). No choice of passages can fix that.

Contextual calibration (Zhao et al., 2021, "Calibrate Before Use") measures
the prior by asking the same prompt with its content replaced by
content-free strings, and divides it out::

    p_cal(label) ∝ p(label | prompt) / p̄(label | content-free prompts)

with ``p̄`` the mean over :data:`CONTENT_FREE`, each normalised over the
labels. The reading is one call with a one-token reply and the first
position's top log-probabilities (every surface form of a label summed: "A",
" A", "a."). The content-free probabilities are measured once per prompt
shape and label set and kept for the reader's lifetime (three short calls,
charged to the first question that needs them).

It gives no answer (the caller writes the answer as text instead) when the
question is not a choice question, the backend has no log-probabilities, or
the labels hold less than :data:`MIN_MASS` of the first token's probability
(the model was about to write something else).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ...llm.base import Message
from ...reflection.score import prob
from ...reflection.tokens import normalise_word
from ...types import Document, Question
from ..core.answer_format import choice_labels
from ..core.context import answer_prompt, build_context
from ..core.trace import Run, StepRecord, shorten

CONTENT_FREE = ("N/A", "", "[MASK]")
TOP_LOGPROBS = 20
# Below this share of the first token's probability on the labels, the reading is not trusted.
MIN_MASS = 0.2
# A content-free prior is floored here before dividing, so a label the template never
# writes cannot win by a division by almost nothing.
PRIOR_FLOOR = 0.02

class AnswerReading(StrEnum):
    """A method's ``answer_reading`` setting."""

    TEXT = "text"  # the written answer
    CALIBRATED = "calibrated"  # label probabilities with the prompt's content-free bias divided out
# (question text, content) -> the prompt; content is the passages or notes the answer rests on.
PromptBuilder = Callable[[str, str], Sequence[Message]]


@dataclass(frozen=True)
class Reading:
    """One calibrated reading: the chosen label, or None when the reading is not usable."""

    answer: str | None
    probs: dict[str, float] | None  # normalised over the labels
    prior: dict[str, float] | None  # the content-free mean (None: not measured or unusable)
    calibrated: dict[str, float] | None
    why: str


def label_probs(top: Mapping[str, float] | None, labels: Sequence[str]) -> dict[str, float]:
    """Summed probability of each label among one position's top log-probabilities.

    A token counts for a label when, stripped of spaces, quotes and punctuation
    and lower-cased, it is the label itself, or at least three characters that
    begin exactly one label ("may" for "maybe").
    """
    wanted = {label.lower(): label for label in labels}
    out = dict.fromkeys(labels, 0.0)
    for token, logprob in (top or {}).items():
        word = normalise_word(token)
        if not word:
            continue
        if word in wanted:
            out[wanted[word]] += prob(logprob)
            continue
        starts = [name for low, name in wanted.items() if len(word) >= 3 and low.startswith(word)]
        if len(starts) == 1:
            out[starts[0]] += prob(logprob)
    return out


def normalised(probs: Mapping[str, float]) -> dict[str, float] | None:
    total = sum(probs.values())
    return {k: v / total for k, v in probs.items()} if total > 0 else None


def calibrate(probs: Mapping[str, float], prior: Mapping[str, float] | None) -> dict[str, float]:
    """``probs`` divided by the content-free ``prior`` (floored at PRIOR_FLOOR), renormalised."""
    if prior is None:
        return dict(probs)
    scaled = {k: p / max(prior.get(k, 0.0), PRIOR_FLOOR) for k, p in probs.items()}
    return normalised(scaled) or dict(probs)


def _best(probs: Mapping[str, float]) -> str:
    # Ties go to the label listed first, so a reading is deterministic.
    return max(probs, key=lambda k: probs[k])


def _rounded(probs: Mapping[str, float] | None) -> dict[str, float] | None:
    return None if probs is None else {k: round(v, 4) for k, v in probs.items()}


class ChoiceReader:
    """Reads choice answers by calibrated label probabilities; keeps the content-free priors it measured."""

    def __init__(self) -> None:
        self._priors: dict[tuple[tuple[Message, ...], tuple[str, ...]], dict[str, float] | None] = {}
        self._lock = asyncio.Lock()

    async def read(
        self, run: Run, question: Question, build: PromptBuilder, content: str, *,
        action: str = "read_choice", thought: str = "Read the answer from the label probabilities.",
    ) -> tuple[StepRecord | None, Reading]:
        """The reading step (None when no call was made) and the reading of ``build(question.text, content)``."""
        labels = choice_labels(question)
        if labels is None:
            return None, Reading(None, None, None, None, "not a choice question")
        if not run.llm.supports_logprobs:
            return None, Reading(None, None, None, None, "the backend gives no log-probabilities")
        step = await run.generate(
            tuple(build(question.text, content)), action=action, thought=thought,
            action_input=shorten(question.text), max_tokens=1, top_logprobs=TOP_LOGPROBS,
        )
        raw = label_probs(first_top(step), labels)
        mass = sum(raw.values())
        probs = normalised(raw)
        if probs is None or mass < MIN_MASS:
            reading = Reading(None, probs, None, None,
                              f"the labels hold {mass:.2f} of the first token (< {MIN_MASS}): read the text")
        else:
            prior = await self.prior(run, build, labels)
            calibrated = calibrate(probs, prior)
            why = "calibrated by the content-free prior" if prior is not None else \
                "the content-free prompts gave the labels no probability: uncalibrated"
            reading = Reading(_best(calibrated), probs, prior, calibrated, why)
        step.details.update(
            labels=list(labels), label_mass=round(mass, 4), label_probs=_rounded(reading.probs),
            prior=_rounded(reading.prior), calibrated=_rounded(reading.calibrated), final=reading.answer,
        )
        shown = f"{reading.answer} " if reading.answer else ""
        step.observation = f"{shown}({reading.why}; p={_rounded(reading.probs)}, calibrated={_rounded(reading.calibrated)})"
        return step, reading

    async def prior(self, run: Run, build: PromptBuilder, labels: Sequence[str]) -> dict[str, float] | None:
        """The mean label distribution over the content-free prompts (measured once per prompt shape)."""
        key = (tuple(build(CONTENT_FREE[0], CONTENT_FREE[0])), tuple(labels))
        async with self._lock:
            if key in self._priors:
                return self._priors[key]
            found: list[dict[str, float]] = []
            for filler in CONTENT_FREE:
                step = await run.generate(
                    tuple(build(filler, filler)), action="calibrate_choice",
                    thought="Measure the prompt's label bias on content-free input.",
                    action_input=repr(filler), max_tokens=1, top_logprobs=TOP_LOGPROBS,
                )
                probs = normalised(label_probs(first_top(step), labels))
                step.observation = f"content-free {filler!r}: {_rounded(probs)}"
                if probs is not None:
                    found.append(probs)
            prior = {k: sum(p[k] for p in found) / len(found) for k in labels} if found else None
            self._priors[key] = prior
            return prior


def reader_for(answer_reading: AnswerReading) -> ChoiceReader | None:
    """The reader an ``answer_reading`` setting asks for (None: read the written answer)."""
    return ChoiceReader() if AnswerReading(answer_reading) is AnswerReading.CALIBRATED else None


def first_top(step: StepRecord) -> Mapping[str, float] | None:
    """The top log-probabilities at the first position of a step's reply (None: none were returned)."""
    gen = step.gen
    if gen is None or not gen.logprobs:
        return None
    return gen.logprobs[0].top


async def read_over_passages(
    run: Run, reader: ChoiceReader, question: Question, docs: Sequence[Document], max_tokens: int, *,
    thought: str = "Read the answer from the label probabilities over the passages.",
) -> tuple[StepRecord | None, Reading, str, list[Document]]:
    """A calibrated reading of ``vanilla_rag``'s answer prompt over ``docs``: step, reading, context, passages used."""
    context, used = build_context(docs, max_tokens, run.llm.count_tokens)
    step, reading = await reader.read(run, question, answer_prompt(question), context, thought=thought)
    return step, reading, context, used
