"""How ``self_rag`` chooses its answer among the usable candidates: one small strategy per ``selection``.

* :class:`JointFirst` (default): the joint candidate whenever it has a usable
  answer; otherwise the critic's own rule over the one-passage candidates.
* :class:`ByCritique`: the critic's own rule over every candidate, the joint
  included (seed 000's ``utility + 2 × support bonus + 0.5 if relevant``, seed
  003's support level then utility, the paper's segment score for label
  probabilities).
* :class:`ByScore`: the paper's weighted sum ``seq + 1.0·rel + 1.0·sup +
  0.5·use`` over the verdicts' values, whichever critic gave them.
* :class:`ByLikelihood`: the candidate most likely as the reply to the answer
  prompt over the joint's passages (:mod:`...critique.support_likelihood`).

Ties go to the earlier candidate (the joint is listed first). A strategy's
``order`` ranks without calling anything; only :class:`ByLikelihood` calls the
backend, once per distinct answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ....errors import ConfigError
from ....reflection.readings import segment_score
from ....types import Candidate, Document, Question
from ...core.answer_shape import keep_answers
from ...core.context import answer_over, build_context
from ...core.text import clean_answer
from ...core.trace import Run
from ...critique.probabilities import PAPER_WEIGHTS
from ...critique.protocol import CriticSource
from ...critique.support_likelihood import RULE as LIKELIHOOD_RULE
from ...critique.support_likelihood import evidence_likelihoods
from ...steps.candidates import note_selection
from .abstain import Rule, admitted
from .config import Selection
from .state import State

NO_ANSWER = "No answer."


def best_first(keys: Sequence[object]) -> list[int]:
    """Indices best first by ``keys``, the earliest on ties."""
    return sorted(range(len(keys)), key=keys.__getitem__, reverse=True)


class ByCritique:
    needs_verdicts: ClassVar[bool] = True

    def __init__(self, critic: type[CriticSource], llm: Any = None) -> None:
        self.critic = critic
        self.rule = critic.rule

    def order(self, candidates: Sequence[Candidate]) -> list[int]:
        return best_first([self.critic.key(c) for c in candidates])

    async def choose(self, run: Run, question: Question, candidates: list[Candidate], docs: list[Document],
                     max_tokens: int) -> Candidate | None:
        order = self.order(candidates)
        if not order:
            run.note("select_best", thought=self.rule, action_input="0 usable candidates",
                     observation="No usable candidate; answer over all retrieved passages.")
            return None
        note_selection(run, self.rule, candidates, order[0])
        return candidates[order[0]]


class JointFirst(ByCritique):
    needs_verdicts = False

    def __init__(self, critic: type[CriticSource], llm: Any = None) -> None:
        super().__init__(critic)
        self.rule = f"The joint candidate when it has an answer; otherwise: {critic.rule}"

    def order(self, candidates: Sequence[Candidate]) -> list[int]:
        order = super().order(candidates)
        joint = [i for i in order if candidates[i].joint]
        return joint + [i for i in order if not candidates[i].joint]


class ByScore(ByCritique):
    def __init__(self, critic: type[CriticSource], llm: Any = None) -> None:
        super().__init__(critic)
        self.rule = "Pick the highest seq + 1.0·rel + 1.0·sup + 0.5·use (the paper's weighted sum)."

    def order(self, candidates: Sequence[Candidate]) -> list[int]:
        return best_first([segment_score(c, PAPER_WEIGHTS).total for c in candidates])


class ByLikelihood(ByCritique):
    needs_verdicts = False

    def __init__(self, critic: type[CriticSource], llm: Any = None) -> None:
        super().__init__(critic)
        self.rule = LIKELIHOOD_RULE
        if llm is not None and not llm.supports_forced:
            raise ConfigError(f"self_rag.selection: likelihood scores each candidate as a given reply, which "
                              f"{llm.spec} cannot do; use a local model (llamacpp:PATH) or selection: joint_first")

    async def choose(self, run: Run, question: Question, candidates: list[Candidate], docs: list[Document],
                     max_tokens: int) -> Candidate | None:
        if len(candidates) < 2:
            return await super().choose(run, question, candidates, docs, max_tokens)
        joint = next((c for c in candidates if c.joint), None)
        indices = joint.indices if joint is not None else sorted({i for c in candidates for i in c.indices})
        read = [docs[i - 1] for i in indices if 0 < i <= len(docs)] or docs
        context, _ = build_context(read, max_tokens, run.llm.count_tokens)
        scores = await evidence_likelihoods(run, question, [c.text for c in candidates], context)
        for candidate, score in zip(candidates, scores, strict=True):
            candidate.details["evidence_likelihood"] = None if score is None else round(score, 4)
        # The most likely first, the earliest (the joint) on ties; an unknown score ranks last.
        index = best_first([float("-inf") if s is None else s for s in scores])[0]
        score = scores[index]
        note_selection(run, self.rule, candidates, index,
                       why="likelihood unknown" if score is None else f"mean log-probability {score:.3f}")
        return candidates[index]


SELECTIONS: dict[Selection, type[ByCritique]] = {
    Selection.JOINT_FIRST: JointFirst, Selection.CRITIQUE: ByCritique, Selection.SCORE: ByScore,
    Selection.LIKELIHOOD: ByLikelihood,
}


class Select:
    """Keep the candidates with an answer, choose among those the abstention rules admit; with no
    candidate at all, one answer over every passage."""

    def __init__(self, strategy: ByCritique, rules: Sequence[Rule], max_context_tokens: int) -> None:
        self.strategy = strategy
        self.rules = rules
        self.max_context_tokens = max_context_tokens

    async def __call__(self, run: Run, state: State) -> None:
        question = state.question
        state.usable = keep_answers(run, state.written, lambda c: c.text, question.text)
        allowed = admitted(self.rules, state.usable)
        state.best = await self.strategy.choose(run, question, allowed, state.docs, self.max_context_tokens)
        if state.best is not None:
            state.answer = state.best.text
        elif not state.usable:  # a rule that turned every usable candidate away abstains: nothing more
            state.answer = await over_all(run, question, state.docs, self.max_context_tokens)


async def over_all(run: Run, question: Question, docs: list[Document], max_tokens: int) -> str:
    """One answer over every retrieved passage (no usable candidate)."""
    if not docs:
        return NO_ANSWER
    step, _, _ = await answer_over(run, question, docs, max_tokens,
                                   thought="No usable candidate: answer over all retrieved passages.")
    return clean_answer(step.text) or NO_ANSWER
