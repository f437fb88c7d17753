"""A backend wrapper that adds a fixed delay to every call.

``DelayedBackend(inner, delay)`` behaves exactly like ``inner`` but each call
first waits ``delay`` seconds, the way a remote API's round trip would. Wrapped
around the scripted backend it turns wall time into a count of the LLM
round trips on a method's critical path (``benchmarks/critical_path.py``).
It also counts calls and the most calls that were in flight at once, which is
what shows whether independent calls overlap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from typing import Any

from ..errors import ConfigError
from ..types import Generation
from .base import LLMRequest, RequestGenerator


class DelayedBackend(RequestGenerator):
    """Wraps a backend; every call waits ``delay`` seconds before the inner call."""

    def __init__(self, inner: Any, delay: float) -> None:
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not math.isfinite(delay) or delay < 0:
            raise ConfigError(f"delay must be a number of seconds >= 0, got {delay!r}")
        self.inner = inner
        self.delay = float(delay)
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def __getattr__(self, name: str) -> Any:
        # Capabilities, model name, count_tokens and the rest come from the inner backend.
        return getattr(self.inner, name)

    @property
    def spec(self) -> str:
        return self.inner.spec

    def reset_counts(self) -> None:
        self.calls = 0
        self.max_in_flight = 0

    async def generate_request(self, request: LLMRequest) -> Generation:
        start = time.perf_counter()
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            gen = await self.inner.generate_request(request)
        finally:
            self.in_flight -= 1
        return dataclasses.replace(gen, latency_ms=(time.perf_counter() - start) * 1000)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"<DelayedBackend {self.inner!r} +{self.delay:g}s>"
