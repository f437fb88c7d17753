"""selfrag: self-reflective retrieval-augmented generation, measured."""

from .types import (
    ArchitectureType,
    Candidate,
    Document,
    Generation,
    Question,
    QuestionType,
    RAGResponse,
    ReasoningStep,
    RetrievalResult,
    TokenLogprobs,
)
from .version import __version__

__all__ = [
    "ArchitectureType",
    "Candidate",
    "Document",
    "Generation",
    "Question",
    "QuestionType",
    "RAGResponse",
    "ReasoningStep",
    "RetrievalResult",
    "TokenLogprobs",
    "__version__",
]
