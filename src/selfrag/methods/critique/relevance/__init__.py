"""Relevance readers, one per ``critic.relevance`` value, and the calls the drafts and stages make.

The critic chooses the reading once (:attr:`~..critic.Critic.relevance`);
:func:`reader` maps it to its reader.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....types import Document, RetrievalResult, Verdict
from ...core.trace import Run
from ..critic import Critic, Relevance
from .base import RelevanceReader, label_relevance
from .likelihood import LikelihoodReader, centred_values, likelihood_relevance
from .linked import LinkedReader, anchors
from .mean import MeanReader, averaged

READERS: dict[Relevance, RelevanceReader] = {
    Relevance.PASSAGE: RelevanceReader(),
    Relevance.LINKED: LinkedReader(),
    Relevance.QUESTION_LIKELIHOOD: LikelihoodReader(),
    Relevance.LABEL_AND_LIKELIHOOD: MeanReader(),
}


def reader(critic: Critic) -> RelevanceReader:
    return READERS[critic.relevance]


async def known_relevance(
    critic: Critic, run: Run, question: str, result: RetrievalResult
) -> list[Verdict | None] | None:
    """The relevance readings made before the candidates are written (None: this reading makes none)."""
    return await reader(critic).before(critic, run, question, result)


async def passage_relevance(
    critic: Critic, run: Run, question: str, doc: Document, known: Verdict | None, thought: str
) -> Verdict | None:
    """One passage's relevance as its draft reads it (see :meth:`RelevanceReader.for_passage`)."""
    return await reader(critic).for_passage(critic, run, question, doc, known, thought)


async def every_relevance(
    critic: Critic, run: Run, question: str, result: RetrievalResult, known: Sequence[Verdict | None] | None
) -> list[Verdict | None]:
    """Every retrieved passage's relevance (:func:`passage_relevance`) without writing its candidate.

    The label questions are those a candidate's draft would ask, so drafts written afterwards for
    the same question reuse the readings (:meth:`Critic.read`) instead of asking again.
    """
    docs = list(result.documents)
    known = list(known or [None] * len(docs))
    forks = [run.fork() for _ in docs]
    readings = await critic.gather([
        passage_relevance(critic, forks[i], question, doc, known[i], f"Is passage {doc.title or doc.id} relevant?")
        for i, doc in enumerate(docs)
    ])
    run.join(*forks)
    return list(readings)


__all__ = [
    "READERS", "LikelihoodReader", "LinkedReader", "MeanReader", "RelevanceReader", "anchors", "averaged",
    "centred_values", "every_relevance", "known_relevance", "label_relevance", "likelihood_relevance",
    "passage_relevance", "reader",
]
