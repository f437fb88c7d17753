"""Baseline: retrieve top-k once, answer once over the joined passages."""

from __future__ import annotations

from pydantic import Field

from ..llm.base import chat
from ..prompts import load_prompt, render
from ..types import ArchitectureType, Question
from .answer_format import answer_system
from .base import Method, MethodConfig, Outcome
from .context import build_context
from .registry import register
from .text import clean_answer
from .trace import Run


class VanillaConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_context_tokens: int = Field(2000, ge=16)


@register
class VanillaRAG(Method):
    name = "vanilla_rag"
    description = "Retrieve top_k passages, answer once over them (1 retrieval, 1 LLM call)."
    type = ArchitectureType.STANDARD
    config_section = "vanilla"
    Config = VanillaConfig

    async def _answer(self, question: Question, run: Run) -> Outcome:
        result = await run.retrieve(question.text, self.config.top_k, thought="Retrieve passages for the question.")
        context, used = build_context(result.documents, self.config.max_context_tokens, self.llm.count_tokens)
        prompt = render(load_prompt("answer_with_context"), question=question.text, context=context)
        step = await run.generate(
            chat(answer_system(question), prompt),
            action="generate",
            thought=f"Answer from {len(used)} passages.",
            action_input=question.text,
        )
        step.details["passages_in_context"] = [d.id for d in used]
        return Outcome(answer=clean_answer(step.text), retrieval_needed=True)
