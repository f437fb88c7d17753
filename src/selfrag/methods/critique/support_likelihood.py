"""Support read as likelihood: how likely each candidate answer is as the reply to the evidence prompt.

A support reading without a label question: every candidate, whichever
passage it was written from, is scored as the reply to one prompt, the
plain answer prompt over the passages with the best evidence (the joint
candidate's), and its mean token log-probability is its score. A candidate
the evidence makes likely is supported by it; a one-passage candidate that
took the bridge entity for the answer, or an answer about another entity,
is not. Each score is one scoring pass (no generation) whose prompt is the
same for every candidate, so a local backend evaluates the passages once.

It needs a backend that scores a given reply (``supports_forced``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...normalize import normalize_answer
from ...types import Question
from ..core.context import answer_prompt
from ..core.trace import Run, shorten
from .confidence import mean_logprob

RULE = ("The candidate most likely as the reply to the answer prompt over the passages with the best "
        "evidence (mean token log-probability); the joint candidate on ties.")


async def evidence_likelihoods(run: Run, question: Question, texts: Sequence[str], context: str) -> list[float | None]:
    """The mean token log-probability of each text as the reply to the answer prompt over ``context``
    (texts that normalise alike are scored once; None: the backend returned no log-probability)."""
    prompt = answer_prompt(question)(question.text, context)
    scored: dict[str, float | None] = {}
    out: list[float | None] = []
    for text in texts:
        key = normalize_answer(text)
        if key not in scored:
            step = await run.generate(prompt, forced=text, top_logprobs=0, action="select_likelihood",
                                      thought="How likely is this candidate as the answer over the best passages?",
                                      action_input=shorten(text))
            scored[key] = mean_logprob(step)
            step.observation = "no log-probabilities" if scored[key] is None else \
                f"mean log-probability {scored[key]:.3f}"
        out.append(scored[key])
    return out
