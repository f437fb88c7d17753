"""Where critique probabilities come from, chosen once per backend.

* ``reflection_tokens``: a fine-tuned Self-RAG model (``[Retrieval]``,
  ``[Relevant]``, ``[Fully supported]``, ``[Utility:5]``, ...), prompted in its
  own ``### Instruction:`` format; critiques are read from the top
  log-probabilities where the model wrote its reflection tokens (as the paper does).
* ``label_probs``: an instruction model asked one question per critique,
  answered with a label word; one ``max_tokens=1`` call reads the next-token
  probabilities of the label words.
* ``text``: a backend without log-probabilities (e.g. Anthropic): the label
  the model wrote counts as probability 1. Chosen visibly, never silently.

``auto`` picks reflection tokens when the tokenizer has ``[Retrieval]`` as a
single token or, for backends without a tokenizer, when the model name looks
like a Self-RAG fine-tune; otherwise label probabilities when the backend
returns log-probabilities, else text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ...errors import ConfigError
from ...llm.base import LLMBackend
from ...reflection.tokens import RETRIEVAL_TOKEN


class CritiqueSource(StrEnum):
    """Where critique probabilities come from (``critic.source``; see the module docstring)."""

    AUTO = "auto"
    REFLECTION_TOKENS = "reflection_tokens"
    LABEL_PROBS = "label_probs"
    TEXT = "text"


SOURCES = tuple(s.value for s in CritiqueSource if s is not CritiqueSource.AUTO)
_SELF_RAG_NAME = re.compile(r"self[-_ ]?(bio)?rag", re.IGNORECASE)


@dataclass(frozen=True)
class SourceChoice:
    source: CritiqueSource  # reflection_tokens | label_probs | text
    prompt_format: str  # reflection_tokens | instruction
    reason: str

    @property
    def probabilities(self) -> bool:
        """Whether critiques are read from log-probabilities (not from the written label)."""
        return self.source != CritiqueSource.TEXT

    def as_dict(self) -> dict[str, str]:
        return {"critique_source": self.source, "prompt_format": self.prompt_format, "reason": self.reason}


def has_reflection_vocabulary(llm: LLMBackend) -> bool | None:
    """Whether the backend's tokenizer has ``[Retrieval]`` as one token; ``None`` without a tokenizer."""
    try:
        ids = llm.tokenize(RETRIEVAL_TOKEN)
    except (TypeError, ValueError, RuntimeError):
        return None
    return None if ids is None else len(ids) == 1


def choose_source(llm: LLMBackend, requested: str = "auto") -> SourceChoice:
    """Decide the critique source for ``llm`` (see the module docstring)."""
    if requested not in {s.value for s in CritiqueSource}:
        raise ConfigError(f"critic.source {requested!r} is not one of auto, {', '.join(SOURCES)}")
    requested = CritiqueSource(requested)
    logprobs = llm.supports_logprobs
    raw = llm.supports_raw_prompt
    if requested == CritiqueSource.REFLECTION_TOKENS:
        if not raw:
            raise ConfigError(
                "critic.source=reflection_tokens needs a backend that sends plain prompts "
                "(llamacpp:/path/model.gguf or openai:MODEL@URL)"
            )
        fmt, why = "reflection_tokens", "configured"
    elif requested == CritiqueSource.LABEL_PROBS:
        fmt, why = "instruction", "configured"
    else:
        vocab = has_reflection_vocabulary(llm) if raw else False
        model = str(llm.model)
        if raw and vocab:
            fmt, why = "reflection_tokens", "the tokenizer has [Retrieval] as one token"
        elif raw and vocab is None and _SELF_RAG_NAME.search(model):
            fmt, why = "reflection_tokens", f"model name {model!r} looks like a Self-RAG fine-tune"
        else:
            fmt, why = "instruction", "no reflection tokens: asking label questions"
        if requested == CritiqueSource.TEXT:
            why = f"configured; {why}"
    if requested == CritiqueSource.TEXT:
        return SourceChoice(CritiqueSource.TEXT, fmt, why)
    if not logprobs:
        return SourceChoice(CritiqueSource.TEXT, fmt, f"{why}; the backend gives no log-probabilities, so text labels count as probability 1")
    source = CritiqueSource.REFLECTION_TOKENS if fmt == "reflection_tokens" else CritiqueSource.LABEL_PROBS
    return SourceChoice(source, fmt, why)
