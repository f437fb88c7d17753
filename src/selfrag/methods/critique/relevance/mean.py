"""The mean of the label question and the question likelihood (``critic.relevance: label_and_likelihood``).

The likelihood half is read for every passage before the candidates
(:class:`.likelihood.LikelihoodReader`); the label question is asked beside
each passage's candidate, where its prompt shares the question-and-passage
prefix with the candidate's and the support question's, so a serial backend
evaluates the passage once for the three. The two are averaged
(:func:`averaged`); either stands alone when the other is unknown.
"""

from __future__ import annotations

from ....reflection.readings import reading
from ....types import Document, Verdict
from ...core.trace import Run
from ..critic import Critic, Relevance
from .base import label_relevance
from .likelihood import SOURCE as LIKELIHOOD_SOURCE
from .likelihood import LikelihoodReader

SOURCE = Relevance.LABEL_AND_LIKELIHOOD.value


def averaged(label: Verdict | None, likely: Verdict | None) -> Verdict | None:
    """The mean of P(relevant) and the likelihood value; either alone when the other is unknown."""
    if label is None or label.value is None:
        return likely
    if likely is None or likely.value is None:
        return label
    mean = (label.value + likely.value) / 2
    return reading("relevance", {"relevant": mean, "irrelevant": 1.0 - mean}, SOURCE,
                   f"mean of P(relevant) {label.value:.3f} and question likelihood {likely.value:.3f}")


class MeanReader(LikelihoodReader):
    """The likelihood before the candidates, the label question beside each, and their mean."""

    async def for_passage(
        self, critic: Critic, run: Run, question: str, doc: Document, known: Verdict | None, thought: str
    ) -> Verdict | None:
        if known is not None and known.source != LIKELIHOOD_SOURCE:
            return known  # a reading that already stands (a mean made before)
        label = await label_relevance(critic, run, question, doc, thought)
        return averaged(label, known)
