"""RAG methods: the shared machinery (``core``), reusable pipeline steps
(``steps``), the critique (``critique``) and one module or package per
method (``catalog``), found by name through :mod:`.factory`."""

from .core.base import Method, MethodConfig, Outcome
from .core.registry import register
from .core.trace import Run
from .factory import available_methods, create_architecture, create_method, get_method_class

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
