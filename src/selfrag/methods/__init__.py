"""RAG methods; each module registers its method by name."""

from .base import Method, MethodConfig, Outcome
from .registry import (
    available_methods,
    create_architecture,
    create_method,
    get_method_class,
    register,
)
from .trace import Run

__all__ = [
    "Method",
    "MethodConfig",
    "Outcome",
    "Run",
    "available_methods",
    "create_architecture",
    "create_method",
    "get_method_class",
    "register",
]
