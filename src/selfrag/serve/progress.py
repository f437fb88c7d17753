"""Live progress of one question: each model call reported as it comes back.

The server wraps its backend once in :class:`ProgressBackend`; a request that
wants progress sets :data:`listener` for the task that answers it. Tasks a
method starts copy the context, so calls made in parallel report to the same
question's listener and never to another's.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import CallObserver
from ..types import Generation


@dataclass
class Progress:
    """What a question has cost so far; ``report`` is called after every call."""

    report: Callable[[dict[str, Any]], None]
    calls: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.perf_counter)

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 1)

    def call_done(self, gen: Generation) -> None:
        self.calls += 1
        self.tokens += gen.total_tokens
        self.report({"calls": self.calls, "tokens": self.tokens, "elapsed_ms": self.elapsed_ms()})


listener: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("selfrag_serve_progress", default=None)


class ProgressBackend(CallObserver):
    """Behaves exactly like ``inner``; tells the current question's listener about each call."""

    def observe(self, gen: Generation) -> None:
        progress = listener.get()
        if progress is not None:
            progress.call_done(gen)

    async def aclose(self) -> None:
        await self.inner.aclose()
