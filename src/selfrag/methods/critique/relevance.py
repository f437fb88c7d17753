"""Relevance readings made before the candidates: ``linked`` (below), and the mean of the label
question and the question likelihood (``label_and_likelihood``, :func:`known_relevance`).

Relevance read with the question's best other passage in view (``critic.relevance: linked``).

A multi-hop question names one thing and asks about another, so one of its two
gold passages (the bridge: *Shirley Temple* for "the woman who portrayed Corliss
Archer") says nothing the question names. Judged alone, a small model cannot
see why it matters. ``linked`` shows it a second passage, the *anchor*, above
the one it judges: the other retrieved passage with the best lexical evidence
prior (:func:`selfrag.retrieval.links.evidence_prior`: the retrieval score, the
title named in the question, the title named in another top passage). For every
passage but the best one the anchor is the same, so a question's relevance
calls share their prompt prefix (question, anchor) up to the passage. They are
asked before the candidates are written, one after another on a serial
backend, and handed to :func:`.drafts.drafts` as known readings.

It is an option, not the default (``passage``, the paper's critique): on
HotpotQA dev questions 100-129 (top-5 BM25 paragraphs, outside the
benchmark's first 100; 53 gold against 97 distractors) the 1.5B benchmark
model's P(relevant) separated gold from distractors at AUC 0.783 beside the
anchor against 0.744 alone, a difference whose bootstrap interval over
questions is [-0.059, +0.133]; fused with the lexical prior, as
``self_rag_critic`` ranks passages, 0.928 against 0.947. The benchmark
(``benchmarks/quality.py --critics``) reports both readings on its own
questions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...reflection.readings import Reading
from ...retrieval.links import evidence_prior
from ...types import Document, RetrievalResult
from ..context import format_passage
from ..trace import Run
from .critic import Critic


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


MEAN_SOURCE = "label_and_likelihood"
LIKELIHOOD_SOURCE = "question_likelihood"


def wants_linked(critic: Critic, docs: Sequence[Document | None]) -> bool:
    """Linked readings apply to label questions (not a reflection-token model) over two or more passages."""
    return critic.relevance == "linked" and not critic.reflection and sum(d is not None for d in docs) >= 2


async def linked_relevance(critic: Critic, run: Run, question: str, result: RetrievalResult) -> list[Reading | None] | None:
    """One relevance reading per retrieved passage, each with its anchor in view; None when not linked.

    The calls run in passage order, so consecutive ones share the question and anchor prefix.
    """
    docs = list(result.documents)
    if not wants_linked(critic, docs):
        return None
    shown = anchors(question, docs, result.scores)
    forks = [run.fork() for _ in docs]

    async def read(i: int) -> Reading:
        doc, anchor = docs[i], shown[i]
        assert anchor is not None  # two or more passages: every passage has an anchor
        prompt = critic.critique_prompt(
            "critic_relevance_linked", question=question, anchor=format_passage(anchor), passage=format_passage(doc),
        )
        reading, step = await critic.read(
            forks[i], "relevance", prompt, action="critique_relevance",
            thought=f"Is passage {doc.title or doc.id} relevant, read beside {anchor.title or anchor.id}?",
            action_input=question,
        )
        step.details.update(passage=doc.id, anchor=anchor.id)
        return reading

    readings = await critic.gather([read(i) for i in range(len(docs))])
    run.join(*forks)
    return list(readings)


async def label_relevance(critic: Critic, run: Run, question: str, doc: Document, thought: str) -> Reading:
    """The paper's relevance critique: the label question about one passage alone."""
    prompt = critic.critique_prompt("critic_relevance", question=question, passage=format_passage(doc))
    reading, _ = await critic.read(
        run, "relevance", prompt, action="critique_relevance", thought=thought, action_input=question
    )
    return reading


async def passage_relevance(
    critic: Critic, run: Run, question: str, doc: Document, known: Reading | None, thought: str
) -> Reading | None:
    """One passage's relevance as a draft reads it: ``known`` when it stands, else the label question
    (averaged with ``known`` when that is the likelihood half of ``label_and_likelihood``)."""
    half = known is not None and known.source == LIKELIHOOD_SOURCE and critic.relevance == MEAN_SOURCE
    if known is not None and not half:
        return known
    label = await label_relevance(critic, run, question, doc, thought)
    return averaged(label, known)


async def every_relevance(
    critic: Critic, run: Run, question: str, result: RetrievalResult, known: Sequence[Reading | None] | None
) -> list[Reading | None]:
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


def averaged(label: Reading | None, likely: Reading | None) -> Reading | None:
    """``label_and_likelihood``: the mean of P(relevant) and the likelihood value; either alone
    when the other is unknown."""
    if label is None or label.value is None:
        return likely
    if likely is None or likely.value is None:
        return label
    mean = (label.value + likely.value) / 2
    return Reading("relevance", {"relevant": mean, "irrelevant": 1.0 - mean}, MEAN_SOURCE,
                   f"mean of P(relevant) {label.value:.3f} and question likelihood {likely.value:.3f}")


async def known_relevance(critic: Critic, run: Run, question: str, result: RetrievalResult) -> list[Reading | None] | None:
    """The relevance readings made before the candidates are written (``linked``,
    ``question_likelihood``, or for ``label_and_likelihood`` its likelihood half); None for
    ``passage``, which reads each beside its own candidate.

    ``label_and_likelihood`` scores the question after every passage here; its label question is
    asked beside each passage's candidate (:func:`.drafts.drafts`, which takes the mean with
    :func:`averaged`), where its prompt shares the question-and-passage prefix with the
    candidate's and the support question's, so a serial backend evaluates the passage once for
    the three instead of once more for a label round of its own.
    """
    from .likelihood import likelihood_relevance

    if critic.relevance == "linked":
        return await linked_relevance(critic, run, question, result)
    return await likelihood_relevance(critic, run, question, result)  # None for passage
