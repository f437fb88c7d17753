"""Baseline: retrieve top-k once, answer once over the joined passages."""

from __future__ import annotations

from pydantic import Field

from ..types import ArchitectureType, Question
from .base import Method, MethodConfig, Outcome
from .context import answer_over
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
        step, _, used = await answer_over(
            run, question, result.documents, self.config.max_context_tokens,
            thought="Answer from the retrieved passages.",
        )
        step.thought = f"Answer from {len(used)} passages."
        step.details["passages_in_context"] = [d.id for d in used]
        # The prompt asks for no citation markers, so the answer cites what the model was shown.
        return Outcome(answer=clean_answer(step.text), retrieval_needed=True, citations=used)
