"""Baseline: answer from the model's own knowledge, with no retrieval."""

from __future__ import annotations

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...types import ArchitectureType, Question
from ..core.answer_format import answer_system
from ..core.base import Method, MethodConfig, Outcome
from ..core.registry import register
from ..core.text import clean_answer
from ..core.trace import Run


class NoRetrievalConfig(MethodConfig):
    pass


@register
class NoRetrieval(Method):
    name = "no_retrieval"
    description = "Answer directly from the model, no documents (1 LLM call)."
    type = ArchitectureType.BASELINE
    Config = NoRetrievalConfig
    uses_retrieval = False

    async def _answer(self, question: Question, run: Run) -> Outcome:
        prompt = render(load_prompt("answer_direct"), question=question.text)
        step = await run.generate(
            chat(answer_system(question), prompt),
            action="direct_answer",
            thought="Answer without retrieval.",
            action_input=question.text,
        )
        return Outcome(answer=clean_answer(step.text), retrieval_needed=False)
