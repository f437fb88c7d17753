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

__version__ = "0.1.0"

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
