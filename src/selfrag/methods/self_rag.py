"""Self-RAG with a prompted model: decide, retrieve, critique candidates, pick the best.

Two critique modes (config ``self_rag.critique``):

* ``combined`` (default): one call answers from a passage and judges it
  (``[IsRel]``/``[IsSup]`` lines), a second rates the answer 1-5; candidates
  are ranked by ``utility + 2 × support_bonus + 0.5 × relevant``.
  Budget: 2 calls without retrieval, ``1 + 2 × num_candidates`` with it.
* ``fused``: one call per passage returns the answer and all three verdicts
  (relevance, support, utility 1-5), as JSON when the backend offers a JSON
  mode and as ``[IsRel]``/``[IsSup]``/``[IsUse]`` lines otherwise; ranked like
  ``combined``. Budget: 2 calls without retrieval, ``1 + num_candidates`` with
  it; critical path 2 call latencies.
* ``separate``: one JSON verdict per step (decision, relevance per document,
  support, utility); irrelevant documents are dropped before generation and
  candidates are ranked by support level, then utility.
  Budget: 2 calls without retrieval, ``1 + 4k`` when all ``k`` are relevant.

Each candidate's calls form one chain; chains of different passages run
concurrently and are joined back in passage order, so the critical path is
the decision plus the longest chain (3 call latencies for ``combined``, 2
for ``fused``, 4 for ``separate``, whose support and utility calls overlap).
Candidate prompts put the instructions and the question before the passage,
so a backend that reuses a KV-cached prompt prefix evaluates the shared part
once per question.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import Field

from ..errors import ConfigError
from ..llm.base import approx_token_count
from ..prompts import load_prompt, load_prompt_file, placeholders, render
from ..reflection.parse import (
    RELEVANT,
    Parsed,
    json_objects,
    json_verdict,
    parse_combined_critique,
    parse_fused_critique,
    parse_retrieval_decision,
    parse_utility,
)
from ..reflection.select import best_index, combined_score, separate_key, separate_score
from ..types import ArchitectureType, Candidate, Document, Question
from .answer_format import answer_kind, answer_system
from .base import Method, MethodConfig, Outcome
from .concurrency import gather_in_order
from .context import format_passage, truncate_to_tokens
from .registry import register
from .text import clean_answer
from .trace import Run, StepRecord, shorten

T = TypeVar("T")

# Used only if the packaged prompts/self_rag.txt is missing.
FALLBACK_DECISION_PROMPT = (
    "Decide whether you need to look up external documents to answer the question "
    "accurately.\n\nQuestion: {question}\n\n"
    'Do you need to retrieve documents? Reply with exactly "yes" or "no".\n'
)
NO_ANSWER = "No answer."


class SelfRAGConfig(MethodConfig):
    critique: Literal["combined", "fused", "separate"] = "combined"
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    num_candidates: int = Field(3, ge=1)
    max_context_tokens: int = Field(4000, ge=16)
    # A retrieval-decision template with a {question} placeholder; None: the packaged one.
    prompt_path: str | None = None
    # Token cap for the short verdict calls (decision, relevance, support, utility).
    critic_max_tokens: int = Field(32, ge=1)
    # adaptive: the model decides (one call); always / never: skip that call and
    # retrieve for every question / for none (the paper's forced-retrieval settings).
    retrieval_mode: Literal["adaptive", "always", "never"] = "adaptive"


def decision_template(path: str | None) -> str:
    """The retrieval-decision template: ``path``, else the packaged file, else the inline fallback."""
    if path:
        template = load_prompt_file(path)
    else:
        try:
            template = load_prompt("self_rag")
        except ConfigError:
            template = FALLBACK_DECISION_PROMPT
    try:
        fields = placeholders(template)
    except ValueError as exc:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'}: bad braces ({exc})"
        ) from None
    if fields != {"question"}:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'} must use the placeholder {{question}} "
            f"and no other (found {sorted(fields) or 'none'})"
        )
    return template


def _user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def _chat(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _candidate_row(c: Candidate) -> dict[str, Any]:
    return {
        "text": c.text,
        "passage_id": c.passage.id if c.passage else None,
        "passage_title": c.passage.title if c.passage else None,
        "relevance": c.relevance,
        "support": c.support,
        "utility": c.utility,
        "score": c.score,
        "defaults_used": list(c.details.get("defaults_used", [])),
    }


@register
class SelfRAG(Method):
    name = "self_rag"
    description = (
        "Decide retrieval, critique one candidate per passage (relevance, support, utility), "
        "pick the best; critique: combined (1 + 2n calls), fused (1 + n) or separate JSON "
        "critics (1 + 4k)."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag"
    Config = SelfRAGConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decision_prompt = decision_template(self.config.prompt_path)

    # -- shared pieces ---------------------------------------------------------
    def _short(self, run: Run) -> int:
        return min(self.config.critic_max_tokens, int(run.params.get("max_tokens", 256)))

    def _passage(self, doc: Document, index: int) -> str:
        count = getattr(self.llm, "count_tokens", approx_token_count)
        body = truncate_to_tokens(doc.text, self.config.max_context_tokens, count)
        return format_passage(doc, index, text=body)

    async def _direct_answer(self, question: Question, run: Run, thought: str) -> str:
        prompt = render(load_prompt("answer_direct"), question=question.text)
        step = await run.generate(
            _chat(answer_system(question), prompt),
            action="direct_answer",
            thought=thought,
            action_input=question.text,
        )
        return clean_answer(step.text)

    def _no_retrieval_outcome(self, answer: str) -> Outcome:
        return Outcome(
            answer=answer, retrieval_needed=False, details=self._details(False, 0, [], None)
        )

    def _details(
        self,
        retrieval_needed: bool,
        retrieved: int,
        candidates: list[Candidate],
        best: Candidate | None,
    ) -> dict[str, Any]:
        return {
            "critique": self.config.critique,
            "support": best.support if best else None,
            "utility": best.utility if best else None,
            "context_used": [best.passage.text] if best and best.passage else [],
            "retrieval_needed": retrieval_needed,
            "total_docs_retrieved": retrieved,
            "relevant_docs_count": sum(c.relevance == RELEVANT for c in candidates),
            "all_candidates": [_candidate_row(c) for c in candidates],
        }

    def _select(
        self, run: Run, candidates: list[Candidate], keys: list[Any], rule: str
    ) -> Candidate | None:
        index = best_index(keys)
        if index is None:
            run.note(
                "select_best",
                thought=rule,
                action_input="0 candidates",
                observation=f"No candidates; the answer is {NO_ANSWER!r}.",
            )
            return None
        best = candidates[index]
        title = best.passage.title or best.passage.id if best.passage else "-"
        run.note(
            "select_best",
            thought=rule,
            action_input=f"{len(candidates)} candidates",
            observation=(
                f"Selected candidate {index + 1} from '{title}' (utility={best.utility}, "
                f"support={best.support}, relevance={best.relevance}, score={best.score:g})"
            ),
            details={"selected": index + 1, "scores": [c.score for c in candidates]},
        )
        return best

    async def _decide(
        self,
        question: Question,
        run: Run,
        ask_model: Callable[[Question, Run], Awaitable[bool]],
    ) -> bool:
        """Whether to retrieve: the model's verdict, or the configured fixed answer."""
        mode = self.config.retrieval_mode
        if mode == "adaptive":
            return await ask_model(question, run)
        needed = mode == "always"
        run.note(
            "retrieval_decision",
            thought=f"retrieval_mode is {mode!r}: no decision call.",
            action_input=question.text,
            observation=f"retrieval needed: {'yes' if needed else 'no'} (configured)",
            details={"retrieval_needed": needed, "retrieval_mode": mode},
        )
        return needed

    async def _decide_by_text(self, question: Question, run: Run) -> bool:
        step = await run.generate(
            _user(render(self.decision_prompt, question=question.text)),
            action="retrieval_decision",
            thought="Decide whether retrieval is needed.",
            action_input=question.text,
            max_tokens=self._short(run),
        )
        needed = parse_retrieval_decision(step.text)
        step.observation = (
            f"retrieval needed: {'yes' if needed else 'no'} (model said {shorten(step.text, 60)!r})"
        )
        step.details["retrieval_needed"] = needed
        return needed

    async def _decide_by_json(self, question: Question, run: Run) -> bool:
        step, obj = await self._verdict(
            run,
            "self_rag_json_decision",
            f"Question: {question.text}",
            action="retrieval_decision",
            thought="Decide whether retrieval is needed (JSON verdict).",
            action_input=question.text,
        )
        needed = json_verdict(obj, "needs_retrieval")
        _annotate(step, "needs_retrieval", needed)
        return bool(needed.value)

    async def _answer(self, question: Question, run: Run) -> Outcome:
        if self.config.critique == "separate":
            return await self._answer_separate(question, run)
        if self.config.critique == "fused":
            return await self._answer_combined(question, run, self._fused_candidate)
        return await self._answer_combined(question, run, self._combined_candidate)

    # -- combined mode (seed 000) and fused mode ----------------------------
    async def _answer_combined(
        self,
        question: Question,
        run: Run,
        make_candidate: Callable[[Question, Document, int, Run], Awaitable[Candidate]],
    ) -> Outcome:
        needed = await self._decide(question, run, self._decide_by_text)
        if not needed:
            answer = await self._direct_answer(
                question, run, "No retrieval needed; answer directly."
            )
            return self._no_retrieval_outcome(answer)

        result = await run.retrieve(
            question.text, self.config.top_k, thought="Retrieve passages for the question."
        )
        docs = list(result.documents[: self.config.num_candidates])
        forks = [run.fork() for _ in docs]
        candidates = await gather_in_order(
            make_candidate(question, doc, i, fork)
            for i, (doc, fork) in enumerate(zip(docs, forks, strict=True), start=1)
        )
        run.join(*forks)
        best = self._select(
            run,
            candidates,
            [c.score for c in candidates],
            "Pick the highest utility + 2 × support bonus (1 / 0.5 / 0) + 0.5 if relevant.",
        )
        details = self._details(True, len(result.documents), candidates, best)
        return Outcome(
            answer=best.text if best else NO_ANSWER,
            retrieval_needed=True,
            candidates=candidates,
            details=details,
        )

    async def _combined_candidate(
        self, question: Question, doc: Document, index: int, run: Run
    ) -> Candidate:
        title = doc.title or doc.id
        step = await run.generate(
            _user(
                render(
                    load_prompt("self_rag_critique"),
                    passage=self._passage(doc, index),
                    question=question.text,
                    answer_kind=answer_kind(question),
                )
            ),
            action="generate_and_critique",
            thought=f"Answer from passage {index} ('{title}') and judge its relevance and support.",
            action_input=shorten(doc.text),
        )
        critique = parse_combined_critique(step.text)
        answer = clean_answer(critique.generation) or critique.generation
        step.observation = f"answer: {shorten(answer, 100)} | relevance: {critique.relevance} | support: {critique.support}"
        step.details.update(
            passage_id=doc.id, relevance=critique.relevance, support=critique.support
        )
        if critique.defaults:
            step.details["defaults_used"] = critique.defaults

        rating = await run.generate(
            _user(render(load_prompt("self_rag_utility"), question=question.text, answer=answer)),
            action="rate_utility",
            thought=f"Rate how useful candidate {index}'s answer is (1-5).",
            action_input=shorten(answer),
            max_tokens=self._short(run),
        )
        utility = parse_utility(rating.text)
        _annotate(rating, "utility", utility)

        defaults = critique.defaults + (["utility"] if utility.default else [])
        return Candidate(
            text=answer,
            passage=doc,
            relevance=critique.relevance,
            support=critique.support,
            utility=utility.value,
            score=combined_score(utility.value, critique.support, critique.relevance),
            details={"passage_index": index, "defaults_used": defaults},
        )

    async def _fused_candidate(
        self, question: Question, doc: Document, index: int, run: Run
    ) -> Candidate:
        title = doc.title or doc.id
        fmt = self._json_format()
        template = load_prompt("self_rag_fused_json" if fmt else "self_rag_fused")
        step = await run.generate(
            _user(
                render(
                    template, passage=self._passage(doc, index), question=question.text,
                    answer_kind=answer_kind(question),
                )
            ),
            action="generate_and_critique",
            thought=(
                f"Answer from passage {index} ('{title}') and judge its relevance, "
                "support and utility in one call."
            ),
            action_input=shorten(doc.text),
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
            passage_id=doc.id,
            relevance=critique.relevance,
            support=critique.support,
            utility=utility.value,
            output_format=fused.source,
        )
        if fused.defaults:
            step.details["defaults_used"] = fused.defaults
        return Candidate(
            text=answer,
            passage=doc,
            relevance=critique.relevance,
            support=critique.support,
            utility=utility.value,
            score=combined_score(utility.value, critique.support, critique.relevance),
            details={"passage_index": index, "defaults_used": fused.defaults},
        )

    # -- separate mode (seed 003) ---------------------------------------------
    def _json_format(self) -> str | None:
        return "json" if getattr(self.llm, "supports_json", False) else None

    async def _verdict(
        self, run: Run, prompt_name: str, user: str, *, action: str, thought: str, action_input: str
    ) -> tuple[StepRecord, list[dict[str, Any]]]:
        fmt = self._json_format()
        step = await run.generate(
            _chat(render(load_prompt(prompt_name)), user),
            action=action,
            thought=thought,
            action_input=action_input,
            max_tokens=self._short(run),
            response_format=fmt,
        )
        step.details["json_mode"] = "backend" if fmt else "extracted from text"
        return step, json_objects(step.text)

    async def _answer_separate(self, question: Question, run: Run) -> Outcome:
        needed = await self._decide(question, run, self._decide_by_json)
        if not needed:
            answer = await self._direct_answer(
                question, run, "No retrieval needed; answer directly."
            )
            return self._no_retrieval_outcome(answer)

        result = await run.retrieve(
            question.text, self.config.top_k, thought="Retrieve passages for the question."
        )
        docs = list(result.documents)
        forks = [run.fork() for _ in docs]
        chains = await gather_in_order(
            self._separate_chain(question, doc, i, fork)
            for i, (doc, fork) in enumerate(zip(docs, forks, strict=True), start=1)
        )
        run.join(*forks)
        candidates = [c for c in chains if c is not None]
        if not candidates:
            run.note(
                "no_relevant_documents",
                thought="Every retrieved document was judged irrelevant.",
                action_input=f"{len(docs)} documents",
                observation="Answering without context (relevant_docs_count = 0).",
            )
            answer = await self._direct_answer(
                question, run, "No relevant documents; answer without context."
            )
            return Outcome(
                answer=answer,
                retrieval_needed=True,
                details=self._details(True, len(docs), [], None),
            )

        best = self._select(
            run,
            candidates,
            [separate_key(c.support, c.utility) for c in candidates],
            "Pick the best support level (fully > partially > no), then the highest utility.",
        )
        assert best is not None  # candidates is not empty
        return Outcome(
            answer=best.text,
            retrieval_needed=True,
            candidates=candidates,
            details=self._details(True, len(docs), candidates, best),
        )

    async def _separate_chain(
        self, question: Question, doc: Document, index: int, run: Run
    ) -> Candidate | None:
        title = doc.title or doc.id
        passage = self._passage(doc, index)
        step, obj = await self._verdict(
            run,
            "self_rag_json_relevance",
            f"Question: {question.text}\n\n{passage}",
            action="evaluate_relevance",
            thought=f"Is document {index} ('{title}') relevant to the question?",
            action_input=shorten(doc.text),
        )
        relevance = json_verdict(obj, "relevance")
        _annotate(step, "relevance", relevance)
        step.details["passage_id"] = doc.id
        if relevance.value != RELEVANT:
            step.observation += "; filtered out before generation"
            return None

        gen = await run.generate(
            _chat(
                answer_system(question),
                render(load_prompt("answer_with_context"), context=passage, question=question.text),
            ),
            action="generate",
            thought=f"Answer from document {index} ('{title}') alone.",
            action_input=question.text,
        )
        answer = clean_answer(gen.text)
        gen.details["passage_id"] = doc.id

        # Support and utility both judge the finished answer: ask them at once, record support first.
        sup_run, use_run = run.fork(), run.fork()
        (sup_step, sup_obj), (use_step, use_obj) = await gather_in_order(
            [
                self._verdict(
                    sup_run,
                    "self_rag_json_support",
                    f"{passage}\n\nResponse: {answer}",
                    action="assess_support",
                    thought=f"Is candidate {index}'s answer supported by its document?",
                    action_input=shorten(answer),
                ),
                self._verdict(
                    use_run,
                    "self_rag_json_utility",
                    f"Question: {question.text}\n\nResponse: {answer}",
                    action="rate_utility",
                    thought=f"Rate how useful candidate {index}'s answer is (1-5).",
                    action_input=shorten(answer),
                ),
            ]
        )
        run.join(sup_run, use_run)
        support = json_verdict(sup_obj, "support")
        _annotate(sup_step, "support", support)
        utility = json_verdict(use_obj, "utility")
        _annotate(use_step, "utility", utility)

        defaults = [n for n, p in (("support", support), ("utility", utility)) if p.default]
        return Candidate(
            text=answer,
            passage=doc,
            relevance=RELEVANT,
            support=support.value,
            utility=utility.value,
            score=separate_score(support.value, utility.value),
            details={"passage_index": index, "defaults_used": defaults},
        )


def _annotate(step: StepRecord, field: str, parsed: Parsed) -> None:
    """Record a parsed verdict on its step, saying so when it is a default."""
    value = parsed.value
    shown = str(value).lower() if isinstance(value, bool) else value
    step.details[field] = value
    if parsed.default:
        step.details["default_used"] = True
        step.observation = f"{field}={shown} (default: no usable '{field}' in the output)"
    else:
        step.observation = f"{field}={shown}"
