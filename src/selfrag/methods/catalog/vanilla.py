"""Baseline: retrieve top-k once, answer once over the joined passages."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ...types import ArchitectureType, Question
from ...validation import off_when_false
from ..core.base import Method, MethodConfig, Outcome
from ..core.context import answer_over
from ..core.registry import register
from ..core.text import clean_answer
from ..core.trace import Run
from ..critique.confidence import ConfidenceReading, mean_logprob, read_confidence
from ..steps.choice_reading import AnswerReading, read_over_passages, reader_for


class VanillaConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_context_tokens: int = Field(2000, ge=16)
    # How a choice question's answer (yes/no, yes/no/maybe, an option letter) is read:
    # text, as written; calibrated, from the label probabilities with the prompt's
    # content-free label bias divided out (choice_reading.py; needs log-probabilities,
    # else the text is read).
    answer_reading: AnswerReading = AnswerReading.TEXT
    # How sure the answer is (steps/confidence.py): sequence, the answer's own probability, read
    # from the answer call at no cost; p_true one short call more; reflection the fitted combination.
    confidence: Annotated[ConfidenceReading, BeforeValidator(off_when_false)] = ConfidenceReading.SEQUENCE


@register
class VanillaRAG(Method):
    name = "vanilla_rag"
    description = "Retrieve top_k passages, answer once over them (1 retrieval, 1 LLM call)."
    type = ArchitectureType.STANDARD
    config_section = "vanilla"
    Config = VanillaConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reader = reader_for(self.config.answer_reading)

    async def _answer(self, question: Question, run: Run) -> Outcome:
        result = await run.retrieve(question.text, self.config.top_k, thought="Retrieve passages for the question.")
        if self.reader is not None:
            _, reading, _, used = await read_over_passages(
                run, self.reader, question, result.documents, self.config.max_context_tokens)
            if reading.answer is not None:
                return Outcome(answer=reading.answer, retrieval_needed=True, citations=used)
        reading = self.config.confidence
        step, context, used = await answer_over(
            run, question, result.documents, self.config.max_context_tokens,
            thought="Answer from the retrieved passages.", logprobs=reading is not ConfidenceReading.OFF, final=True,
        )
        step.thought = f"Answer from {len(used)} passages."
        answer = clean_answer(step.text)
        sure = await read_confidence(run, reading, question, answer, seq=mean_logprob(step), context=context, docs=used,
                                     priors=list(result.scores[: len(used)]) if result.method.endswith("+evidence")
                                     else None)
        # The prompt asks for no citation markers, so the answer cites what the model was shown.
        return Outcome(answer=answer, retrieval_needed=True, citations=used, confidence=sure.value,
                       details={"confidence": sure.as_dict()} if sure.value is not None else {})
