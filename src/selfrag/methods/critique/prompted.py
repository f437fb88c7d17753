"""Verdicts the model writes as text labels: seed 000's critic (``critic: prompted``).

One call answers from one passage and judges it (``[IsRel]`` and ``[IsSup]``
lines after the answer, ``prompts/self_rag_critique.txt``); a second rates the
answer 1-5 (``self_rag_utility.txt``). A candidate written elsewhere (the
joint) is judged by two calls at once: support over its passages
(``self_rag_support.txt``) and the same rating. A reply without a usable
label gets the parser's default, which counts for ranking and is shown as not
judged. Candidates rank by ``utility + 2 × support bonus (1 / 0.5 / 0) + 0.5
if relevant``.

:class:`Prompted` holds what the prompted sources share (this one and
:class:`.prompted_json.PromptedJSON`): each passage's share of the context
budget, the short verdict calls' token cap, the candidate built from a reply.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ...llm.base import LLMBackend, chat
from ...prompts import load_prompt, render
from ...reflection.parse import (
    DEFAULT_SUPPORT,
    Parsed,
    parse_combined_critique,
    parse_utility,
    support_label,
)
from ...reflection.readings import written
from ...reflection.select import combined_score
from ...types import Candidate, Question, Verdict
from ..core.answer_format import answer_kind, answer_system
from ..core.concurrency import gather_in_order
from ..core.context import format_passage, truncate_to_tokens
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord, shorten
from ..steps.evidence import Passages

# Token cap of the short verdict calls (decision, relevance, support, utility).
VERDICT_TOKENS = 32


class Prompted:
    """A source whose verdicts are prompted and parsed from the reply."""

    name: ClassVar[str]
    rule: ClassVar[str]
    judges_first: ClassVar[bool] = False

    def __init__(self, llm: LLMBackend, max_context_tokens: int, max_tokens: int) -> None:
        self.llm = llm
        self.max_context_tokens = max_context_tokens
        self.short_tokens = min(VERDICT_TOKENS, max_tokens)

    @staticmethod
    def key(candidate: Candidate) -> Any:
        return candidate.score

    def context(self, passages: Passages) -> str:
        """The passages, each cut to its share of the context budget."""
        budget = max(16, self.max_context_tokens // len(passages.docs))
        return "\n\n".join(
            format_passage(doc, i, text=truncate_to_tokens(doc.text, budget, self.llm.count_tokens))
            for doc, i in zip(passages.docs, passages.indices, strict=True)
        )

    async def retrieval(self, run: Run, question: Question) -> bool | None:
        return None

    async def relevance(self, run: Run, question: Question, passages: Passages) -> Verdict | None:
        return None

    def verdict(self, step: StepRecord, field: str, parsed: Parsed, aspect: str | None = None) -> Verdict:
        """``parsed`` (the reply's ``field``) as this source's verdict on ``aspect`` (default: the field),
        recorded on its step, saying so when it is a default."""
        value = parsed.value
        shown = str(value).lower() if isinstance(value, bool) else value
        step.details[field] = value
        if parsed.default:
            step.details["default_used"] = True
            step.observation = f"{field}={shown} (default: no usable '{field}' in the output)"
        else:
            step.observation = f"{field}={shown}"
        return written(aspect or field, value, self.name, default=parsed.default)


def candidate(answer: str, passages: Passages, verdicts: dict[str, Verdict], score: float) -> Candidate:
    """A candidate written from ``passages`` with its verdicts and score."""
    return Candidate(text=answer, passages=passages.docs, indices=passages.indices, joint=passages.joint,
                     verdicts=verdicts, score=score)


class PromptedLabels(Prompted):
    name = "prompted"
    rule = "Pick the highest utility + 2 × support bonus (1 / 0.5 / 0) + 0.5 if relevant."

    async def write(self, run: Run, question: Question, passages: Passages) -> Candidate:
        step = await run.generate(
            chat(answer_system(question), render(load_prompt("self_rag_critique"), passage=self.context(passages),
                                                 question=question.text, answer_kind=answer_kind(question))),
            action="generate_and_critique",
            thought=f"Answer from {passages.name()} and judge relevance and support.",
            action_input=shorten(" | ".join(d.text for d in passages.docs)),
        )
        critique = parse_combined_critique(step.text)
        answer = clean_answer(critique.generation) or critique.generation
        step.observation = (
            f"answer: {shorten(answer, 100)} | relevance: {critique.relevance} | support: {critique.support}"
        )
        step.details.update(passage_id=passages.docs[0].id, relevance=critique.relevance, support=critique.support)
        if critique.defaults:
            step.details["defaults_used"] = critique.defaults
        relevance = written("relevance", critique.relevance, self.name, default=critique.relevance_default)
        support = written("support", critique.support, self.name, default=critique.support_default)
        utility = await self.rate(run, question, answer, passages)
        return candidate(answer, passages, {"relevance": relevance, "support": support, "utility": utility},
                         combined_score(_rating(utility), critique.support, critique.relevance))

    async def rate(self, run: Run, question: Question, answer: str, passages: Passages) -> Verdict:
        """The 1-5 utility rating of an answer."""
        step = await run.generate(
            chat(None, render(load_prompt("self_rag_utility"), question=question.text, answer=answer)),
            action="rate_utility", thought=f"Rate how useful the answer from {passages.name()} is (1-5).",
            action_input=shorten(answer), max_tokens=self.short_tokens,
        )
        return self.verdict(step, "utility", parse_utility(step.text))

    async def judge(self, run: Run, question: Question, candidate_: Candidate, context: str) -> Candidate:
        """Support over ``context`` and utility, asked at once (support recorded first)."""
        passages = Passages(candidate_.passages, candidate_.indices)
        answer = candidate_.text
        sup_run, use_run = run.fork(), run.fork()
        sup, utility = await gather_in_order([
            sup_run.generate(
                chat(None, render(load_prompt("self_rag_support"), context=context, question=question.text,
                                  answer=answer)),
                action="assess_support", thought=f"Is the answer from {passages.name()} supported?",
                action_input=shorten(answer), max_tokens=self.short_tokens,
            ),
            self.rate(use_run, question, answer, passages),
        ])
        run.join(sup_run, use_run)
        worded = bool(re.search(r"support", sup.text, re.IGNORECASE))
        support = self.verdict(sup, "support", Parsed(support_label(sup.text) if worded else DEFAULT_SUPPORT,
                                                      not worded))
        candidate_.verdicts.update(support=support, utility=utility)
        # The joint reads the passages with the best evidence: it scores as relevant without a verdict.
        candidate_.score = combined_score(_rating(utility), support.label or DEFAULT_SUPPORT, "relevant")
        return candidate_


def _rating(utility: Verdict) -> float:
    """A written rating as a number (the parser always gives one)."""
    return 3.0 + 2.0 * (utility.value if utility.value is not None else 0.0)
