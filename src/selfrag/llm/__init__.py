"""LLM backends behind one async protocol."""

from .base import (
    BackendKind,
    BaseBackend,
    LLMBackend,
    LLMRequest,
    Message,
    RetryPolicy,
    build_request,
)
from .cache import CachedBackend, SQLiteCache
from .delayed import DelayedBackend
from .factory import create_backend, parse_spec
from .pricing import Pricing
from .scripted import ScriptedBackend

__all__ = [
    "BackendKind",
    "BaseBackend",
    "CachedBackend",
    "DelayedBackend",
    "LLMBackend",
    "LLMRequest",
    "Message",
    "Pricing",
    "RetryPolicy",
    "SQLiteCache",
    "ScriptedBackend",
    "build_request",
    "create_backend",
    "parse_spec",
]
