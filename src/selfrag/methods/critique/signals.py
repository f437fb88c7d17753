"""What the fitted critic reads: per passage, per candidate and per answer.

Per passage (no call): its evidence signals (:func:`selfrag.retrieval.links.evidence`):
the prior, the share of the best retrieval score, whether the question names
its title, whether another top passage links to it, and its rank.

Per candidate: its likelihood as the reply to the answer prompt over the joint
candidate's passages (the joint's own is the mean log-probability it was
written with: no call; another candidate's, one scoring pass).

Per answer: the sequence probability (``seq``) and its least likely token's
(``least``), the answer's length (log of 1 + its words), P(True) (one call continuing
the answer's prompt), how much the passages raise the answer's likelihood over
the question alone (``lift``: one scoring pass of a short prompt), how much of
the answer and of the question the passages read contain, and the evidence of
the passages read and retrieved. With hidden states, the answer call's own.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ...llm.base import chat
from ...normalize import names_nothing
from ...prompts import load_prompt, render
from ...retrieval.links import evidence
from ...types import Candidate, Document, Question
from ..core.answer_format import answer_system
from ..core.trace import Run, shorten
from .confidence import contained, mean_logprob, p_true
from .look_first import content_words

PASSAGE = ("prior", "score_share", "named", "linked", "inv_rank")
# A joint candidate (several passages) and a one-passage one may sit at different likelihoods when right,
# and so may a closed answer ("yes", an option letter) and a written one: a fit reads each flag only where
# it measurably helps.
SUPPORT = ("likelihood", "joint", "closed")
ANSWER = ("seq", "least", "length", "p_true", "lift", "contained", "coverage", "top_prior", "second_prior",
          "read_prior", "named_read", "named_any")
# The answer readings that cost a model call each (P(True), and the likelihood after the question alone
# for the lift): a fit keeps them only where they measurably help, and only those a fit reads are asked.
CALLED = ("p_true", "lift")


def support_values(likelihood: float, joint: bool, closed_answer: bool = False) -> dict[str, float]:
    """What the support head reads of a candidate."""
    return {"likelihood": likelihood, "joint": 1.0 if joint else 0.0, "closed": 1.0 if closed_answer else 0.0}


def passage_signals(question: str, docs: Sequence[Document], scores: Sequence[float] | None) -> list[dict]:
    """The evidence signals of every retrieved passage, in retrieval order."""
    signals = evidence(question, docs, scores if scores is not None and len(scores) == len(docs) else None)
    return [{"prior": s.prior, "score_share": s.score, "named": float(s.named), "linked": float(s.linked),
             "inv_rank": 1.0 / i} for i, s in enumerate(signals, start=1)]


def closed(answer: str, question: Question | None = None) -> bool:
    """Whether ``answer`` picks from fixed options (a label such as yes/no/maybe, an option letter, any
    answer to a multiple-choice question): it holds no words a passage could contain, so its containment
    is unknown, not zero."""
    return bool(question is not None and question.choices) or names_nothing(answer)


def coverage_of(question: str, docs: Sequence[Document]) -> float | None:
    """The share of the question's content words found in ``docs`` (None: no content word)."""
    wanted = content_words(question)
    if not wanted:
        return None
    seen = content_words(" ".join(f"{d.title}\n{d.text}" for d in docs))
    return len(wanted & seen) / len(wanted)


def answer_signals(question: Question, answer: Candidate, docs: Sequence[Document], passages: Sequence[dict],
                   *, p_true_value: float | None, alone: float | None) -> dict[str, float | None]:
    """The readings of ``answer`` (written from ``answer.indices`` of ``docs``) with ``passages`` the
    signals of every retrieved passage."""
    read = [i - 1 for i in answer.indices if 0 < i <= len(docs)]
    priors = sorted((p["prior"] for p in passages), reverse=True)
    read_priors = sorted((passages[i]["prior"] for i in read), reverse=True)
    return {
        "seq": answer.seq,
        "least": answer.details.get("least_logprob"),
        "length": math.log1p(len(answer.text.split())),
        "p_true": p_true_value,
        "lift": None if answer.seq is None or alone is None else answer.seq - alone,
        "contained": None if closed(answer.text, question) else contained(answer.text, [docs[i] for i in read]),
        "coverage": coverage_of(question.text, [docs[i] for i in read]),
        "top_prior": priors[0] if priors else None,
        "second_prior": priors[1] if len(priors) > 1 else None,
        "read_prior": sum(read_priors[:2]) / len(read_priors[:2]) if read_priors else None,
        "named_read": float(any(passages[i]["named"] for i in read)) if read else None,
        "named_any": float(any(p["named"] for p in passages)) if passages else None,
    }


async def likelihood_alone(run: Run, question: Question, answer: str) -> float | None:
    """The mean token log-probability of ``answer`` after the question alone (one scoring pass)."""
    if not run.llm.supports_forced or not answer.strip():
        return None
    step = await run.generate(
        chat(answer_system(question), render(load_prompt("answer_direct"), question=question.text)), forced=answer,
        top_logprobs=0, action="read_likelihood", thought="How likely is the answer after the question alone?",
        action_input=shorten(answer))
    value = mean_logprob(step)
    step.observation = "no log-probabilities" if value is None else f"mean log-probability {value:.3f}"
    return value


async def answer_readings(run: Run, question: Question, answer: Candidate, docs: Sequence[Document],
                          passages: Sequence[dict], context: str,
                          wanted: Collection[str] = CALLED) -> dict[str, float | None]:
    """Every answer reading; of the two that cost a call (:data:`CALLED`), only those in ``wanted``."""
    truth = None
    if "p_true" in wanted and run.llm.supports_logprobs:
        truth = await p_true(run, question, context, answer.text)
    alone = await likelihood_alone(run, question, answer.text) if "lift" in wanted else None
    return answer_signals(question, answer, docs, passages, p_true_value=truth, alone=alone)
