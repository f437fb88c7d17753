"""Verdicts read as label probabilities by the paper's formulas: seed 002's critic (``critic: label_probs``).

Each critique is one question answered with a label word; the next-token
probabilities of the label words give the verdict
(:class:`~.critic.Critic`: ``rel = P(relevant)``, ``sup = P(full) + 0.5
P(partial)``, the expected utility in [-1, 1]). With a Self-RAG fine-tune
(``critic: reflection_tokens``) the same verdicts are read where the model
writes its reflection tokens; on a backend without log-probabilities the
written label counts as probability 1, and the verdict says so in its source.
A candidate from one passage is the critic's draft (relevance, answer, support,
utility, :mod:`.drafts`); a candidate written elsewhere (the joint) is judged
by :func:`.answer.critique_answer`. Candidates rank by the paper's segment
score ``seq + 1.0·rel + 1.0·sup + 0.5·use``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...llm.base import LLMBackend
from ...reflection import score as S
from ...reflection.readings import segment_score
from ...types import Candidate, Question, Verdict
from ..core.answer_format import answer_format
from ..core.trace import Run
from ..steps.evidence import Passages
from .answer import critique_answer, joint_document
from .critic import Critic, CriticConfig, Task
from .drafts import drafts

PAPER_WEIGHTS = S.Weights()


class LabelProbabilities:
    name: ClassVar[str] = "label_probs"
    rule: ClassVar[str] = "Pick the highest segment score: seq + 1.0·rel + 1.0·sup + 0.5·use (the paper's weights)."
    judges_first: ClassVar[bool] = False

    def __init__(self, llm: LLMBackend, question: Question, *, source: str = "label_probs",
                 answer_tokens: int = 64) -> None:
        # One critic per question: it remembers the readings it made for this question.
        self.critic = Critic(llm, CriticConfig(source=source), answer_tokens=answer_tokens,
                             answer_format=answer_format(question))

    @staticmethod
    def key(candidate: Candidate) -> Any:
        return candidate.score

    async def retrieval(self, run: Run, question: Question) -> bool | None:
        return None

    async def relevance(self, run: Run, question: Question, passages: Passages) -> Verdict | None:
        return None

    async def write(self, run: Run, question: Question, passages: Passages) -> Candidate:
        [draft] = await drafts(self.critic, run, Task(question.text), [passages.docs[0]])
        draft.indices = passages.indices
        draft.score = segment_score(draft, PAPER_WEIGHTS).total
        return draft

    async def judge(self, run: Run, question: Question, candidate: Candidate, context: str) -> Candidate:
        judged = await critique_answer(self.critic, run, question.text, candidate.text,
                                       joint_document(candidate.passages))
        candidate.verdicts.update(judged.verdicts)
        candidate.score = segment_score(candidate, PAPER_WEIGHTS).total
        return candidate
