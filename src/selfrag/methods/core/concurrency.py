"""Running independent calls of one question: concurrently, or one after another.

A method starts independent work (one chain per passage, a support and a
utility verdict) as a list of coroutines and gets the results back in the
order it gave them, whatever the scheduling, so traces stay deterministic.
On a backend that decodes one call at a time (``LLMBackend.decodes_serially``)
concurrency buys nothing and the given order is what makes consecutive calls
share their prompt prefix, so the coroutines run one after another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def gather_in_order(coros: Iterable[Awaitable[T]], *, sequential: bool = False) -> list[T]:
    """Results in the given order; on a failure the rest are cancelled (or never started)."""
    pending = list(coros)
    if sequential:
        results: list[T] = []
        for i, coro in enumerate(pending):
            try:
                results.append(await coro)
            except BaseException:
                for rest in pending[i + 1 :]:  # never started: close them so they do not warn
                    close = getattr(rest, "close", None)
                    if close is not None:
                        close()
                raise
        return results
    tasks = [asyncio.ensure_future(c) for c in pending]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
