"""Self-RAG's three critique modes as small strategies behind one interface.

A mode writes one critiqued :class:`Candidate` from a set of passages (one
passage, or every passage judged relevant for the joint candidate) and says
how candidates are ranked:

* :class:`Combined`: one call answers and judges (``[IsRel]``/``[IsSup]``
  lines), a second rates the answer 1-5; score ``utility + 2 × support bonus
  + 0.5 × relevant``.
* :class:`Fused`: one call returns the answer and all three verdicts (JSON
  when the backend has a JSON mode, tagged lines otherwise); same score.
* :class:`Separate`: one JSON verdict per step; a relevance verdict per
  passage filters before generation, support and utility judge the answer;
  ranked by support level, then utility.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ....llm.base import chat
from ....prompts import load_prompt, render
from ....reflection.parse import (
    DEFAULT_SUPPORT,
    RELEVANT,
    Parsed,
    json_objects,
    json_verdict,
    parse_combined_critique,
    parse_fused_critique,
    parse_utility,
    support_label,
)
from ....reflection.select import combined_score, separate_key, separate_score
from ....types import Candidate, Question
from ...core.answer_format import answer_kind, answer_system
from ...core.concurrency import gather_in_order
from ...core.context import format_passage, truncate_to_tokens
from ...core.text import clean_answer
from ...core.trace import Run, StepRecord, shorten
from ...steps.choice_reading import ChoiceReader
from ...steps.confidence import mean_logprob
from ...steps.evidence import Passages
from ...steps.joint_answer import joint_answer


class Mode:
    """How candidates are written, critiqued and ranked."""

    name: ClassVar[str]
    rule: ClassVar[str]
    # Separate mode judges relevance before generation and drops irrelevant passages.
    filters_first: ClassVar[bool] = False
    # Separate mode also asks its own JSON retrieval decision (decide()).
    decides_retrieval: ClassVar[bool] = False

    def __init__(self, llm: Any, max_context_tokens: int, short_tokens: int, *, facts_first: str = "off",
                 reader: ChoiceReader | None = None) -> None:
        self.llm = llm
        self.max_context_tokens = max_context_tokens
        self.short_tokens = short_tokens
        self.facts_first = facts_first
        # Reads the joint's answer to a choice question from calibrated label probabilities.
        self.reader = reader

    def context(self, passages: Passages) -> str:
        budget = max(16, self.max_context_tokens // len(passages.docs))
        return "\n\n".join(
            format_passage(doc, i, text=truncate_to_tokens(doc.text, budget, self.llm.count_tokens))
            for doc, i in zip(passages.docs, passages.indices, strict=True)
        )

    def key(self, candidate: Candidate) -> Any:
        return candidate.score

    async def decide(self, question: Question, run: Run) -> bool:
        """The mode's own retrieval decision (modes with ``decides_retrieval`` only)."""
        raise NotImplementedError

    async def candidate(self, question: Question, passages: Passages, run: Run) -> Candidate | None:
        raise NotImplementedError

    async def rate(self, question: Question, answer: str, passages: Passages, run: Run) -> Parsed:
        """The 1-5 utility rating of an answer (``prompts/self_rag_utility.txt``)."""
        rating = await run.generate(
            chat(None, render(load_prompt("self_rag_utility"), question=question.text, answer=answer)),
            action="rate_utility", thought=f"Rate how useful the answer from {passages.name()} is (1-5).",
            action_input=shorten(answer), max_tokens=self.short_tokens,
        )
        utility = parse_utility(rating.text)
        annotate(rating, "utility", utility)
        return utility

    async def joint(self, question: Question, passages: Passages, run: Run, *, judge: bool = True) -> Candidate:
        """The candidate over several passages: ``vanilla_rag``'s answer prompt, then (``judge``) its
        support and utility verdicts; unjudged, it carries no verdict at all."""
        gen, context, answer = await self._joint_answer(question, passages, run)
        gen.details["passage_ids"] = [d.id for d in passages.docs]
        if not judge:
            return unjudged(answer, passages, gen)
        # Support and utility both judge the finished answer: ask them at once, record support first.
        sup_run, use_run = run.fork(), run.fork()
        sup, utility = await gather_in_order([
            sup_run.generate(
                chat(None, render(load_prompt("self_rag_support"), context=context, question=question.text,
                                  answer=answer)),
                action="assess_support", thought=f"Is the answer from {passages.name()} supported?",
                action_input=shorten(answer), max_tokens=self.short_tokens,
            ),
            self.rate(question, answer, passages, use_run),
        ])
        run.join(sup_run, use_run)
        worded = bool(re.search(r"support", sup.text, re.IGNORECASE))
        support = support_label(sup.text) if worded else DEFAULT_SUPPORT
        annotate(sup, "support", Parsed(support, not worded))
        defaults = (["support"] if not worded else []) + (["utility"] if utility.default else [])
        return with_logprob(_candidate(
            answer, passages, relevance=RELEVANT, support=support, utility=utility.value,
            score=combined_score(utility.value, support, RELEVANT), defaults=defaults,
        ), gen)

    async def _joint_answer(self, question: Question, passages: Passages, run: Run) -> tuple[StepRecord, str, str]:
        """The joint's answer step, its context and answer (:func:`.joint_answer.joint_answer`)."""
        return await joint_answer(run, question, passages.docs, self.max_context_tokens, name=passages.name(),
                                  facts_first=self.facts_first, reader=self.reader, logprobs=True)

    async def relevant(self, question: Question, passages: Passages, run: Run) -> bool | None:
        """A relevance verdict on its own (modes with ``filters_first`` only): True / False, or None
        when the output held no usable verdict."""
        raise NotImplementedError

    def _json_format(self) -> str | None:
        return "json" if self.llm.supports_json else None


def unjudged(answer: str, passages: Passages, step: StepRecord) -> Candidate:
    """A candidate whose verdicts were not asked: none is shown, and its score is 0."""
    return with_logprob(_candidate(answer, passages, relevance=None, support=None, utility=None, score=0.0,
                                   defaults=[]), step)


def with_logprob(candidate: Candidate, step: StepRecord) -> Candidate:
    """``candidate`` with the mean log-probability of the reply that wrote it (a confidence reads it)."""
    if (value := mean_logprob(step)) is not None:
        candidate.details["answer_logprob"] = round(value, 6)
    return candidate


def _candidate(answer: str, passages: Passages, *, relevance: str | None, support: str | None, utility: Any,
               score: float, defaults: list[str]) -> Candidate:
    return Candidate(
        text=answer,
        passage=passages.docs[0],
        relevance=relevance,
        support=support,
        utility=utility,
        score=score,
        details={
            "passage_index": passages.indices[0],
            "passage_indices": list(passages.indices),
            "joint": passages.joint,
            "defaults_used": defaults,
        },
    )


class Combined(Mode):
    name = "combined"
    rule = "Pick the highest utility + 2 × support bonus (1 / 0.5 / 0) + 0.5 if relevant."

    async def candidate(self, question: Question, passages: Passages, run: Run) -> Candidate:
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
        utility = await self.rate(question, answer, passages, run)
        return _candidate(
            answer, passages, relevance=critique.relevance, support=critique.support, utility=utility.value,
            score=combined_score(utility.value, critique.support, critique.relevance),
            defaults=critique.defaults + (["utility"] if utility.default else []),
        )


class Fused(Mode):
    name = "fused"
    rule = Combined.rule

    async def candidate(self, question: Question, passages: Passages, run: Run) -> Candidate:
        fmt = self._json_format()
        template = load_prompt("self_rag_fused_json" if fmt else "self_rag_fused")
        step = await run.generate(
            chat(answer_system(question), render(template, passage=self.context(passages), question=question.text,
                              answer_kind=answer_kind(question))),
            action="generate_and_critique",
            thought=f"Answer from {passages.name()} and judge relevance, support and utility in one call.",
            action_input=shorten(" | ".join(d.text for d in passages.docs)),
            response_format=fmt,
        )
        fused = parse_fused_critique(step.text)
        critique, utility = fused.critique, fused.utility
        answer = clean_answer(critique.generation) or critique.generation
        step.observation = (
            f"answer: {shorten(answer, 100)} | relevance: {critique.relevance} | "
            f"support: {critique.support} | utility: {utility.value}"
        )
        step.details.update(
            passage_id=passages.docs[0].id, relevance=critique.relevance, support=critique.support,
            utility=utility.value, output_format=fused.source,
        )
        if fused.defaults:
            step.details["defaults_used"] = fused.defaults
        return _candidate(
            answer, passages, relevance=critique.relevance, support=critique.support, utility=utility.value,
            score=combined_score(utility.value, critique.support, critique.relevance), defaults=fused.defaults,
        )


class Separate(Mode):
    name = "separate"
    rule = "Pick the best support level (fully > partially > no), then the highest utility."
    filters_first = True
    decides_retrieval = True

    def key(self, candidate: Candidate) -> Any:
        return separate_key(candidate.support or "", candidate.utility or 0)

    async def verdict(
        self, run: Run, prompt_name: str, user: str, *, action: str, thought: str, action_input: str
    ) -> tuple[StepRecord, list[dict[str, Any]]]:
        fmt = self._json_format()
        step = await run.generate(
            chat(render(load_prompt(prompt_name)), user),
            action=action, thought=thought, action_input=action_input,
            max_tokens=self.short_tokens, response_format=fmt,
        )
        step.details["json_mode"] = "backend" if fmt else "extracted from text"
        return step, json_objects(step.text)

    async def joint(self, question: Question, passages: Passages, run: Run, *, judge: bool = True) -> Candidate:
        """The joint's answer is written like every mode's (``_joint_answer``), then (``judge``) judged like
        a candidate's."""
        step, context, answer = await self._joint_answer(question, passages, run)
        step.details["passage_ids"] = [d.id for d in passages.docs]
        if not judge:
            return unjudged(answer, passages, step)
        return with_logprob(await self._judged(question, passages, run, answer, context), step)

    async def decide(self, question: Question, run: Run) -> bool:
        step, obj = await self.verdict(
            run, "self_rag_json_decision", f"Question: {question.text}",
            action="retrieval_decision", thought="Decide whether retrieval is needed (JSON verdict).",
            action_input=question.text,
        )
        needed = json_verdict(obj, "needs_retrieval")
        annotate(step, "needs_retrieval", needed)
        return bool(needed.value)

    async def relevant(self, question: Question, passages: Passages, run: Run) -> bool | None:
        step, obj = await self.verdict(
            run, "self_rag_json_relevance", f"Question: {question.text}\n\n{self.context(passages)}",
            action="evaluate_relevance", thought=f"Is {passages.name()} relevant to the question?",
            action_input=shorten(passages.docs[0].text),
        )
        relevance = json_verdict(obj, "relevance")
        annotate(step, "relevance", relevance)
        step.details["passage_id"] = passages.docs[0].id
        if relevance.value != RELEVANT:
            step.observation += "; filtered out before generation"
        if relevance.default:
            # No verdict is not a verdict of "irrelevant": the joint ranks this passage as one not judged
            # (a small model may answer the question here instead of judging the passage).
            step.observation += "; ranked for the joint as not judged"
            return None
        return relevance.value == RELEVANT

    async def candidate(self, question: Question, passages: Passages, run: Run) -> Candidate:
        context = self.context(passages)
        gen = await run.generate(
            chat(answer_system(question),
                 render(load_prompt("answer_with_context"), context=context, question=question.text)),
            action="generate", thought=f"Answer from {passages.name()}.", action_input=question.text,
        )
        answer = clean_answer(gen.text)
        gen.details["passage_id"] = passages.docs[0].id
        return await self._judged(question, passages, run, answer, context)

    async def _judged(self, question: Question, passages: Passages, run: Run, answer: str, context: str) -> Candidate:
        """``answer`` with its JSON support (over ``context``) and utility verdicts."""
        # Support and utility both judge the finished answer: ask them at once, record support first.
        sup_run, use_run = run.fork(), run.fork()
        (sup_step, sup_obj), (use_step, use_obj) = await gather_in_order([
            self.verdict(sup_run, "self_rag_json_support", f"{context}\n\nResponse: {answer}",
                         action="assess_support", thought=f"Is the answer from {passages.name()} supported?",
                         action_input=shorten(answer)),
            self.verdict(use_run, "self_rag_json_utility", f"Question: {question.text}\n\nResponse: {answer}",
                         action="rate_utility", thought=f"Rate how useful the answer from {passages.name()} is (1-5).",
                         action_input=shorten(answer)),
        ])
        run.join(sup_run, use_run)
        support = json_verdict(sup_obj, "support")
        annotate(sup_step, "support", support)
        utility = json_verdict(use_obj, "utility")
        annotate(use_step, "utility", utility)
        return _candidate(
            answer, passages, relevance=RELEVANT, support=support.value, utility=utility.value,
            score=separate_score(support.value, utility.value),
            defaults=[n for n, p in (("support", support), ("utility", utility)) if p.default],
        )


MODES: dict[str, type[Mode]] = {m.name: m for m in (Combined, Fused, Separate)}


def annotate(step: StepRecord, field: str, parsed: Parsed) -> None:
    """Record a parsed verdict on its step, saying so when it is a default."""
    value = parsed.value
    shown = str(value).lower() if isinstance(value, bool) else value
    step.details[field] = value
    if parsed.default:
        step.details["default_used"] = True
        step.observation = f"{field}={shown} (default: no usable '{field}' in the output)"
    else:
        step.observation = f"{field}={shown}"

