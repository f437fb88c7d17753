"""How a passage's relevance is read: the reader interface and the paper's label question.

A reader does up to two things for a question's retrieved passages:
:meth:`RelevanceReader.before` reads every passage before any candidate is
written (None when this reading waits for the candidates), and
:meth:`RelevanceReader.for_passage` gives one passage's reading as a draft
needs it, beside that passage's candidate. The base reader is the paper's
critique (``critic.relevance: passage``): nothing before, and the label
question "is this passage relevant?" asked beside each candidate, where its
prompt shares the question-and-passage prefix with the candidate's.
"""

from __future__ import annotations

from ....types import Document, RetrievalResult, Verdict
from ...core.context import format_passage
from ...core.trace import Run
from ..critic import Critic


async def label_relevance(critic: Critic, run: Run, question: str, doc: Document, thought: str) -> Verdict:
    """The paper's relevance critique: the label question about one passage alone."""
    prompt = critic.critique_prompt("critic_relevance", question=question, passage=format_passage(doc))
    verdict, _ = await critic.read(
        run, "relevance", prompt, action="critique_relevance", thought=thought, action_input=question
    )
    return verdict


class RelevanceReader:
    """The label question beside each candidate (``passage``); subclasses read more, or earlier."""

    async def before(
        self, critic: Critic, run: Run, question: str, result: RetrievalResult
    ) -> list[Verdict | None] | None:
        """Readings of every retrieved passage made before the candidates (None: none made here)."""
        return None

    async def for_passage(
        self, critic: Critic, run: Run, question: str, doc: Document, known: Verdict | None, thought: str
    ) -> Verdict | None:
        """One passage's relevance as its draft reads it: ``known`` when made before, else the label question."""
        if known is not None:
            return known
        return await label_relevance(critic, run, question, doc, thought)
