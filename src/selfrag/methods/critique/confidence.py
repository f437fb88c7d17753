"""How sure a method is of its answer: the reflection signals read after the answer, and their score.

``confidence`` (a method setting) says what is read:

* ``off``: nothing;
* ``sequence``: the answer's own probability (the mean token log-probability
  of the answer call, mapped to (0, 1) by ``exp``); no call;
* ``p_true``: the model asked whether its answer is correct according to the
  passages, P(True) at the reply's first token (one short call whose prompt
  continues the answer's, so a local backend reuses the passages' evaluation);
* ``reflection``: the signals of :class:`~selfrag.reflection.confidence.Signals`
  that the fitted :class:`~selfrag.reflection.confidence.ConfidenceModel`
  reads, combined by it: ``p_true``'s call; on a backend that scores a given
  reply, the answer scored after the passages and after the question alone
  (the passages' lift); ``drafts`` further answers sampled from the answer's
  own prompt at ``draft_temperature`` (their agreement with the answer: on a
  local backend each draft reuses the whole evaluated prompt, so it costs
  only its own few tokens).

Every call is a trace step (``confidence_*``), and a ``confidence`` step
records the signals and the value of the readings that make calls; the
outcome's details carry them for every reading.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ...errors import BackendError
from ...llm.base import Message, chat
from ...normalize import normalize_answer
from ...prompts import load_prompt, render

# The wording of a confidence lives with the other notes of an answer; importable from here as before.
from ...reflection.answer_text import LOW, LOW_CONFIDENCE_NOTE
from ...reflection.answer_text import confidence_words as confidence_words
from ...reflection.confidence import ConfidenceModel, Signals
from ...reflection.confidence import agreement as agreement_of
from ...retrieval.links import evidence_prior
from ...types import Candidate, Document, Question
from ..core.answer_format import answer_system
from ..core.context import answer_prompt, build_context
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord, shorten
from ..steps.choice_reading import TOP_LOGPROBS, first_top, label_probs, normalised

# Drafts sampled for the agreement signal, and how freely.
DRAFTS = 10
DRAFT_TEMPERATURE = 0.7
# A draft may run this many tokens past the answer's length (a longer one disagrees anyway).
DRAFT_SLACK_TOKENS = 16


class ConfidenceReading(StrEnum):
    OFF = "off"
    SEQUENCE = "sequence"
    P_TRUE = "p_true"
    REFLECTION = "reflection"


@dataclass(frozen=True)
class Confidence:
    value: float | None
    reading: ConfidenceReading
    signals: Signals

    def as_dict(self) -> dict:
        # Four significant digits, not decimals: a rule fitted on another model can put every answer far
        # below 0.0001, and rounding those to 0 would erase the order a report ranks them by.
        return {"confidence": None if self.value is None else float(f"{self.value:.4g}"), "reading": self.reading.value,
                "signals": self.signals.as_dict()}


def mean_logprob(step: StepRecord | None) -> float | None:
    """The mean log-probability of a step's reply tokens (None when the backend gave none)."""
    gen = None if step is None else step.gen
    if gen is None or not gen.logprobs:
        return None
    return sum(t.logprob for t in gen.logprobs) / len(gen.logprobs)


def least_logprob(step: StepRecord | None) -> float | None:
    """The lowest log-probability among a step's reply tokens (None when the backend gave none)."""
    gen = None if step is None else step.gen
    if gen is None or not gen.logprobs:
        return None
    return min(t.logprob for t in gen.logprobs)


def contained(answer: str, docs: Sequence[Document]) -> float | None:
    """The share of the answer's normalised words that occur in the passages (None: no word, or no passage)."""
    words = normalize_answer(answer).split()
    if not words or not docs:
        return None
    seen = set(normalize_answer(" ".join(f"{d.title or ''} {d.text}" for d in docs)).split())
    return sum(w in seen for w in words) / len(words)


def relevance(priors: Sequence[float] | None) -> float | None:
    """The mean evidence prior of the best two passages read (one: its own)."""
    if not priors:
        return None
    best = sorted(priors, reverse=True)[:2]
    return sum(best) / len(best)


async def p_true(run: Run, question: Question, context: str, answer: str) -> float | None:
    """P(True) when asked, right after the answer, whether it is correct according to the passages."""
    prompt = [*answer_prompt(question)(question.text, context), Message("assistant", answer),
              Message("user", load_prompt("confidence_p_true"))]
    step = await run.generate(prompt, action="confidence_p_true", thought="Is the answer correct according to the "
                              "passages? (P(True) at the first token)", action_input=shorten(answer),
                              max_tokens=1, top_logprobs=TOP_LOGPROBS)
    probs = normalised(label_probs(first_top(step), ("True", "False")))
    if probs is None:  # no log-probabilities: the written word
        word = step.text.strip().lower()
        value = 1.0 if word.startswith("true") else 0.0 if word.startswith("false") else None
    else:
        value = probs["True"]
    step.details["p_true"] = None if value is None else round(value, 4)
    step.observation = f"P(True) = {value:.3f}" if value is not None else "no True/False in the reply"
    return value


async def lift(run: Run, question: Question, context: str, answer: str) -> float | None:
    """Mean log-probability of ``answer`` after the passages minus after the question alone (a backend
    that scores a given reply only; None otherwise)."""
    if not run.llm.supports_forced or not answer.strip():
        return None
    with_passages = await run.generate(answer_prompt(question)(question.text, context), forced=answer,
                                       top_logprobs=0, action="confidence_likelihood",
                                       thought="How likely is the answer after the passages?",
                                       action_input=shorten(answer))
    alone = await run.generate(
        chat(answer_system(question), render(load_prompt("answer_direct"), question=question.text)), forced=answer, top_logprobs=0, action="confidence_likelihood",
        thought="How likely is the answer after the question alone?", action_input=shorten(answer))
    a, b = mean_logprob(with_passages), mean_logprob(alone)
    if a is None or b is None:
        return None
    with_passages.details["mean_logprob"] = round(a, 4)
    alone.details["mean_logprob"] = round(b, 4)
    return a - b


async def agreement(run: Run, question: Question, context: str, answer: str, drafts: int,
                    temperature: float = DRAFT_TEMPERATURE) -> float | None:
    """The mean token F1 between ``answer`` and ``drafts`` answers sampled from its own prompt
    (None: no draft asked for, or no answer)."""
    if drafts < 1 or not answer.strip():
        return None
    prompt = answer_prompt(question)(question.text, context)
    budget = run.llm.count_tokens(answer) + DRAFT_SLACK_TOKENS
    budget = min(budget, int(run.params.get("max_tokens", budget)))
    texts: list[str] = []
    for draw in range(1, drafts + 1):
        step = await run.generate(prompt, action="confidence_draft", thought="Would the model write the same "
                                  f"answer again? (draft {draw} of {drafts}, temperature {temperature:g})",
                                  action_input=shorten(answer), max_tokens=budget, temperature=temperature,
                                  draw=draw, top_logprobs=0)
        texts.append(clean_answer(step.text))
    value = agreement_of(answer, texts)
    step.details["drafts"] = texts
    step.details["agreement"] = round(value, 4)
    return value


async def read_confidence(
    run: Run, reading: ConfidenceReading, question: Question, answer: str, *, seq: float | None,
    context: str, docs: Sequence[Document], priors: Sequence[float] | None = None,
    model: ConfidenceModel | None = None, drafts: int = DRAFTS, draft_temperature: float = DRAFT_TEMPERATURE,
    also_read: Collection[str] = (),
) -> Confidence:
    """The confidence of ``answer``, written over ``context`` (``docs``, with their evidence ``priors``)
    by a reply whose mean token log-probability is ``seq``; the signals a reading needs are read (with
    ``reflection``, also those named in ``also_read``, recorded for fitting another rule), the others
    left unknown."""
    reading = ConfidenceReading(reading)
    missing: list[str] = []
    signals = Signals(seq=seq)
    value: float | None = None
    if reading is ConfidenceReading.SEQUENCE:
        value = None if seq is None else math.exp(seq)
    elif reading is ConfidenceReading.P_TRUE:
        signals = Signals(seq=seq, p_true=await _read(p_true(run, question, context, answer), missing))
        value = signals.p_true
    elif reading is ConfidenceReading.REFLECTION:
        model = model or ConfidenceModel.load()
        wanted = set(model.features) | set(also_read)
        truth = await _read(p_true(run, question, context, answer), missing) if "p_true" in wanted else None
        raised = await _read(lift(run, question, context, answer), missing) if "lift" in wanted else None
        agreed = await _read(agreement(run, question, context, answer, drafts, draft_temperature), missing) \
            if "agreement" in wanted else None
        signals = Signals(seq=seq, p_true=truth, lift=raised, contained=contained(answer, docs),
                          relevance=relevance(priors), agreement=agreed)
        value = model.score(signals)
    out = Confidence(value, reading, signals)
    if reading in (ConfidenceReading.P_TRUE, ConfidenceReading.REFLECTION):  # readings that made calls
        details = out.as_dict() | ({"unavailable": missing} if missing else {})
        run.note("confidence", thought=f"How sure is the answer? (confidence: {reading.value})",
                 action_input=shorten(answer),
                 observation="unknown" if value is None else f"{value:.3f}"
                 + (f" ({LOW_CONFIDENCE_NOTE})" if value < LOW else ""),
                 details=details)
    return out


async def candidate_confidence(
    run: Run, reading: ConfidenceReading, question: Question, candidate: Candidate, docs: Sequence[Document],
    scores: Sequence[float] | None, max_tokens: int, *, model: ConfidenceModel | None = None,
) -> Confidence:
    """The confidence of a selected candidate, read over the passages it was written from (their
    evidence priors among every retrieved passage's)."""
    indices = [i for i in candidate.indices if 0 < i <= len(docs)]
    read = [docs[i - 1] for i in indices] or list(candidate.passages[:1])
    context, _ = build_context(read, max_tokens, run.llm.count_tokens)
    priors = evidence_prior(question.text, docs, scores if scores is not None and len(scores) == len(docs) else None)
    return await read_confidence(run, reading, question, candidate.text, seq=candidate.seq, context=context, docs=read,
                                 priors=[priors[i - 1] for i in indices] or None, model=model)


async def _read(reading: Awaitable[float | None], missing: list[str]) -> float | None:
    """A signal's value, or None when its call failed: a confidence never costs the answer it judges."""
    try:
        return await reading
    except BackendError as exc:
        missing.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
