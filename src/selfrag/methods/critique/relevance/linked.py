"""Relevance read with the question's best other passage in view (``critic.relevance: linked``).

A multi-hop question names one thing and asks about another, so one of its
two gold passages (the bridge: *Shirley Temple* for "the woman who portrayed
Corliss Archer") says nothing the question names, and judged alone a small
model cannot see why it matters. ``linked`` shows a second passage, the
*anchor*, above the one judged: the other retrieved passage with the best
lexical evidence prior (:func:`selfrag.retrieval.links.evidence_prior`). For
every passage but the best one the anchor is the same, so a question's
relevance calls share their prompt prefix (question, anchor) up to the
passage. They are asked before the candidates are written, one after
another on a serial backend, and stand as known readings in the drafts.
Measured against the label question alone in docs/results.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....retrieval.links import evidence_prior
from ....types import Document, RetrievalResult, Verdict
from ...core.context import format_passage
from ...core.trace import Run
from ..critic import Critic
from .base import RelevanceReader


def anchors(question: str, docs: Sequence[Document], scores: Sequence[float] | None = None) -> list[Document | None]:
    """For each passage, the other passage with the best evidence prior (None when there is no other).

    Ties keep retrieval order, so the anchor of every passage but the best is the best.
    """
    if len(docs) < 2:
        return [None] * len(docs)
    priors = evidence_prior(question, docs, scores)
    order = sorted(range(len(docs)), key=lambda i: (-priors[i], i))
    best, second = order[0], order[1]
    return [docs[second] if i == best else docs[best] for i in range(len(docs))]


class LinkedReader(RelevanceReader):
    """Every passage judged beside its anchor, before the candidates (two or more passages, label questions)."""

    async def before(
        self, critic: Critic, run: Run, question: str, result: RetrievalResult
    ) -> list[Verdict | None] | None:
        docs = list(result.documents)
        if critic.reflection or len(docs) < 2:
            return None
        shown = anchors(question, docs, result.scores)
        forks = [run.fork() for _ in docs]

        async def read(i: int) -> Verdict:
            doc, anchor = docs[i], shown[i]
            assert anchor is not None  # two or more passages: every passage has an anchor
            prompt = critic.critique_prompt(
                "critic_relevance_linked", question=question, anchor=format_passage(anchor),
                passage=format_passage(doc),
            )
            verdict, step = await critic.read(
                forks[i], "relevance", prompt, action="critique_relevance",
                thought=f"Is passage {doc.title or doc.id} relevant, read beside {anchor.title or anchor.id}?",
                action_input=question,
            )
            step.details.update(passage=doc.id, anchor=anchor.id)
            return verdict

        readings = await critic.gather([read(i) for i in range(len(docs))])
        run.join(*forks)
        return list(readings)
