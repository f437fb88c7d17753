"""Relevance read as question likelihood (``critic.relevance: question_likelihood``).

Asked "is this passage relevant?", a small instruction model answers nearly
the same for every passage of a multi-hop question. This reading asks it
nothing: it shows the model one passage, asks it to write a question the
passage helps answer, and scores the user's actual question as the reply
(forced decoding, ``LLMRequest.forced``): the mean log-probability of the
question's tokens. A passage that makes the question likely is relevant
(query likelihood, as in Sachan et al., 2022, "Improving Passage Retrieval
with Zero-Shot Question Generation").

The raw mean log-probability mostly measures how predictable the question
is, which differs from question to question; what separates a question's
passages is the difference. Each passage's value is therefore its mean
log-probability minus the mean over the question's retrieved passages,
mapped to (0, 1) as ``sigmoid(SCALE * difference)``: 0.5 is an average
passage, and a single retrieved passage reads 0.5. Because the value is
relative, it ranks a question's passages but cannot say that none of them
is relevant, so an abstention floor on it is not meaningful.

It needs a backend that scores a given reply (``supports_forced``: the
in-process llama.cpp backend); the calls run one after another on a serial
backend, each passage's prompt its own. Measured in docs/results.md.
"""

from __future__ import annotations

import math

from ....errors import ConfigError
from ....reflection.readings import reading, verdict_details, verdict_summary
from ....types import RetrievalResult, Verdict
from ...core.context import format_passage
from ...core.trace import Run, StepRecord
from ..critic import Critic, Relevance
from .base import RelevanceReader

SOURCE = Relevance.QUESTION_LIKELIHOOD.value
# Logit per nat of mean token log-probability above the question's average passage.
SCALE = 2.0


def mean_logprob(step: StepRecord) -> float | None:
    """The mean log-probability of the scored reply's tokens (None when the backend gave none)."""
    gen = step.gen
    if gen is None or not gen.logprobs:
        return None
    return sum(t.logprob for t in gen.logprobs) / len(gen.logprobs)


def centred_values(means: list[float | None]) -> list[float | None]:
    """``sigmoid(SCALE * (mean - average of the known means))`` per passage (None stays None)."""
    known = [m for m in means if m is not None]
    if not known:
        return [None] * len(means)
    centre = sum(known) / len(known)
    return [None if m is None else 1.0 / (1.0 + math.exp(-SCALE * (m - centre))) for m in means]


async def likelihood_relevance(
    critic: Critic, run: Run, question: str, result: RetrievalResult
) -> list[Verdict | None] | None:
    """One relevance reading per retrieved passage from the question's likelihood (None: no passage,
    or a reflection-token model, whose relevance comes with its candidates)."""
    docs = list(result.documents)
    if critic.reflection or not docs:
        return None
    if not critic.llm.supports_forced:
        raise ConfigError(
            f"critic.relevance={critic.relevance} needs a backend that scores a given reply ({critic.llm.spec} "
            "does not); use llamacpp:/path/model.gguf or critic.relevance: passage"
        )
    forks = [run.fork() for _ in docs]

    async def score(i: int) -> StepRecord:
        doc = docs[i]
        return await forks[i].generate(
            critic.critique_prompt("critic_question_likelihood", passage=format_passage(doc)),
            forced=question, top_logprobs=0, action="critique_relevance",
            thought=f"How likely is the question after reading {doc.title or doc.id}?", action_input=question,
        )

    steps = await critic.gather([score(i) for i in range(len(docs))])
    run.join(*forks)
    means = [mean_logprob(step) for step in steps]
    readings: list[Verdict | None] = []
    for doc, step, mean, value in zip(docs, steps, means, centred_values(means), strict=True):
        if value is None:
            readings.append(None)
            step.observation = "relevance unknown (the backend returned no log-probabilities)"
            continue
        verdict = reading("relevance", {"relevant": value, "irrelevant": 1.0 - value}, SOURCE)
        step.details.update(verdict_details(verdict), passage=doc.id, mean_logprob=round(mean, 4))
        step.observation = verdict_summary(verdict)
        readings.append(verdict)
    return readings


class LikelihoodReader(RelevanceReader):
    """The question likelihood of every passage, read before the candidates."""

    async def before(
        self, critic: Critic, run: Run, question: str, result: RetrievalResult
    ) -> list[Verdict | None] | None:
        return await likelihood_relevance(critic, run, question, result)
