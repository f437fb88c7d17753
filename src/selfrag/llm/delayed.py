"""A backend wrapper that adds a fixed delay to every call.

``DelayedBackend(inner, delay)`` behaves exactly like ``inner`` but each call
first waits ``delay`` seconds, the way a remote API's round trip would. Wrapped
around the scripted backend it turns wall time into a count of the LLM
round trips on a method's critical path (``lab/critical_path.py``).

It also records how calls overlap, without reference to the clock: the number
of calls, the most that were in flight at once, and an ordered log of every
call's start and end. From the log, :meth:`DelayedBackend.spans` gives each
call's *wave*: 1 for a call that started before any call had ended, else one
more than the latest wave among the calls that had ended before it started.
The highest wave (:meth:`DelayedBackend.waves`) is the number of call
latencies on the critical path, which is what a test should assert rather
than elapsed time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import time
from typing import Any

from ..errors import ConfigError
from ..types import Generation
from .base import LLMRequest, RequestGenerator


@dataclasses.dataclass(frozen=True)
class CallSpan:
    """One call: its number (from 1, in start order), its request, and its place in the event log.

    ``start`` and ``end`` are positions in :attr:`DelayedBackend.log`; ``end``
    is ``None`` while the call is in flight.
    """

    number: int
    request: LLMRequest
    start: int
    end: int | None
    wave: int

    def overlaps(self, other: CallSpan) -> bool:
        """Whether both calls were in flight at some moment (each started before the other ended)."""
        mine = math.inf if self.end is None else self.end
        theirs = math.inf if other.end is None else other.end
        return self.start < theirs and other.start < mine


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
        # ("start" | "end", call id) in the order they happened; the request of each call id.
        self.log: list[tuple[str, int]] = []
        self.requests: dict[int, LLMRequest] = {}
        self._ids = itertools.count(1)

    def __getattr__(self, name: str) -> Any:
        # Capabilities, model name, count_tokens and the rest come from the inner backend.
        return getattr(self.inner, name)

    @property
    def spec(self) -> str:
        return self.inner.spec

    def reset_counts(self) -> None:
        """Forget the calls so far (the calls still in flight stay counted in ``in_flight``)."""
        self.calls = 0
        self.max_in_flight = 0
        self.log = []
        self.requests = {}

    async def generate_request(self, request: LLMRequest) -> Generation:
        start = time.perf_counter()
        call_id = next(self._ids)
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.requests[call_id] = request
        self.log.append(("start", call_id))
        try:
            await asyncio.sleep(self.delay)
            gen = await self.inner.generate_request(request)
        finally:
            self.in_flight -= 1
            self.log.append(("end", call_id))
        return dataclasses.replace(gen, latency_ms=(time.perf_counter() - start) * 1000)

    def spans(self) -> list[CallSpan]:
        """Every logged call in start order, with its wave (see the module docstring)."""
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        for pos, (event, call_id) in enumerate(self.log):
            (starts if event == "start" else ends)[call_id] = pos
        ordered = sorted(starts, key=starts.__getitem__)
        waves: dict[int, int] = {}
        for call_id in ordered:
            before = [waves[c] for c in ordered if c in waves and ends.get(c, math.inf) < starts[call_id]]
            waves[call_id] = 1 + max(before, default=0)
        return [
            CallSpan(n, self.requests[c], starts[c], ends.get(c), waves[c])
            for n, c in enumerate(ordered, start=1)
        ]

    def waves(self) -> int:
        """The number of call latencies on the critical path of the logged calls (0 without calls)."""
        return max((s.wave for s in self.spans()), default=0)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"<DelayedBackend {self.inner!r} +{self.delay:g}s>"
