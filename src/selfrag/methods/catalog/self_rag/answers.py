"""``self_rag``'s answers outside the candidates: the retrieval decision, a direct answer, one answer
over every passage, and the details every outcome carries."""

from __future__ import annotations

from typing import Any

from ....llm.base import chat
from ....prompts import load_prompt, render
from ....reflection.judged import judged_value
from ....reflection.parse import RELEVANT
from ....types import Candidate, Document, Question
from ...core.answer_format import answer_system
from ...core.context import answer_over
from ...core.text import clean_answer
from ...core.trace import Run
from ...steps.candidates import candidate_row
from ...steps.decision import Calibration, RetrievalMode, decide_retrieval
from ...steps.look_first import look_first
from .config import SelfRAGConfig
from .modes import Mode

NO_ANSWER = "No answer."


async def decide(config: SelfRAGConfig, mode: Mode, prompt: str, calibration: Calibration, question: Question,
                 run: Run) -> bool:
    """Whether to retrieve: asked (``adaptive``), or as configured (no call)."""
    setting = config.retrieval_mode
    if setting == RetrievalMode.LOOK_FIRST and not run.own_evidence and run.retriever is not None:
        return (await look_first(run, question, config.top_k, mode.short_tokens)).needed
    if setting == RetrievalMode.LOOK_FIRST:  # nothing to look at first: the question-only decision
        setting = RetrievalMode.ADAPTIVE
    if setting == RetrievalMode.ADAPTIVE and run.own_evidence and config.retrieve_own_evidence:
        run.note(
            "retrieval_decision",
            thought="The question came with its own documents: retrieve without asking.",
            action_input=question.text,
            observation="retrieval needed: yes (the question's own documents)",
            details={"retrieval_needed": True, "retrieval_mode": setting, "own_evidence": True},
        )
        return True
    if setting == RetrievalMode.ADAPTIVE:
        if mode.decides_retrieval:
            return await mode.decide(question, run)
        decision = await decide_retrieval(
            run, prompt, question, threshold=config.retrieval_threshold, max_tokens=mode.short_tokens,
            calibration=calibration,
        )
        return decision.needed
    needed = setting == RetrievalMode.ALWAYS
    run.note(
        "retrieval_decision",
        thought=f"retrieval_mode is {setting.value!r}: no decision call.",
        action_input=question.text,
        observation=f"retrieval needed: {'yes' if needed else 'no'} (configured)",
        details={"retrieval_needed": needed, "retrieval_mode": setting},
    )
    return needed


async def direct_answer(question: Question, run: Run, thought: str) -> str:
    prompt = render(load_prompt("answer_direct"), question=question.text)
    step = await run.generate(
        chat(answer_system(question), prompt), action="direct_answer", thought=thought, action_input=question.text,
    )
    return clean_answer(step.text)


async def over_all(question: Question, docs: list[Document], run: Run, max_tokens: int) -> str:
    if not docs:
        return NO_ANSWER
    step, _, _ = await answer_over(
        run, question, docs, max_tokens, thought="No usable candidate: answer over all retrieved passages.",
    )
    return clean_answer(step.text) or NO_ANSWER


def details(config: SelfRAGConfig, retrieval_needed: bool, retrieved: int, candidates: list[Candidate],
            best: Candidate | None, docs: list[Document] | None = None) -> dict[str, Any]:
    indices = best.details.get("passage_indices", []) if best else []
    context = [docs[i - 1].text for i in indices if docs and i <= len(docs)]
    return {
        "critique": config.critique,
        "support": judged_value(best, "support") if best else None,  # None: not judged
        "utility": judged_value(best, "utility") if best else None,
        "context_used": context or ([best.passage.text] if best and best.passage else []),
        "retrieval_needed": retrieval_needed,
        "total_docs_retrieved": retrieved,
        "relevant_docs_count": sum(c.relevance == RELEVANT for c in candidates),
        "all_candidates": [candidate_row(c) for c in candidates],
    }
