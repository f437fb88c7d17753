"""The critic sources by name (the ``critic`` setting), and one made for a question."""

from __future__ import annotations

from typing import Any

from ...types import Question
from .probabilities import LabelProbabilities
from .prompted import PromptedLabels
from .prompted_json import PromptedJSON
from .protocol import CriticSource

SOURCES: dict[str, type] = {
    "prompted": PromptedLabels,
    "json": PromptedJSON,
    "label_probs": LabelProbabilities,
    "reflection_tokens": LabelProbabilities,
}


def make_critic(name: str, llm: Any, question: Question, *, max_context_tokens: int, max_tokens: int) -> CriticSource:
    """The source ``name`` names, for one question (a probability critic remembers its readings there)."""
    source = SOURCES[name]
    if source is LabelProbabilities:
        return LabelProbabilities(llm, question, source=name)
    return source(llm, max_context_tokens, max_tokens)
