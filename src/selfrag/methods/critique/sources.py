"""The critic sources by name (the ``critic`` setting), and one made for a question."""

from __future__ import annotations

from typing import Any

from ...types import Question
from .fitted import FittedCritic
from .probabilities import LabelProbabilities
from .prompted import PromptedLabels
from .prompted_json import PromptedJSON
from .protocol import CriticSource

SOURCES: dict[str, type] = {
    "fitted": FittedCritic,
    "prompted": PromptedLabels,
    "json": PromptedJSON,
    "label_probs": LabelProbabilities,
    "reflection_tokens": LabelProbabilities,
}


def resolve(name: str, llm: Any) -> str:
    """``auto``: the fitted heads where the backend scores a given reply (a local model), else the labels the
    model writes; any other name as it is."""
    if name != "auto":
        return name
    return "fitted" if getattr(llm, "supports_forced", False) else "prompted"


def make_critic(name: str, llm: Any, question: Question, *, max_context_tokens: int, max_tokens: int) -> CriticSource:
    """The source ``name`` names, for one question (a probability critic remembers its readings there)."""
    source = SOURCES[resolve(name, llm)]
    if source is LabelProbabilities:
        return LabelProbabilities(llm, question, source=name)
    if source is FittedCritic:
        return FittedCritic(llm, max_context_tokens)
    return source(llm, max_context_tokens, max_tokens)
