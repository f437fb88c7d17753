"""Retrying failed backend calls: exponential backoff with jitter, Retry-After, bounded attempts.

Every retry is logged at WARNING (shown without ``-v``) with the backend's
spec, the reason and the wait, one line each, so a slow or failing server is
never silent.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import BackendError
from ..redaction import redact_secrets

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded attempts, honouring Retry-After."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (attempt counts from 1)."""
        if retry_after is not None:
            return min(self.max_retry_after, max(retry_after, 0.0))
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * (0.5 + rng.random() / 2)


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    label: str,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """``await call()``, retrying retryable :class:`BackendError` s as ``policy`` says.

    A non-retryable error is raised at once; when the attempts run out, the
    last error is raised as a non-retryable one that says how many were made.
    An error with its own ``max_attempts`` (a refused connection to this
    machine: :mod:`.http`) is tried at most that often, and its retry is
    logged at INFO only, so the failure is one line.
    """
    rng = rng or random.Random()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except BackendError as exc:
            if not exc.is_retryable:
                raise
            limit = min(policy.max_attempts, exc.max_attempts or policy.max_attempts)
            if attempt >= limit:
                message = (f"{exc} (tried {'once' if attempt == 1 else f'{attempt} times'})" if exc.max_attempts
                           else f"{label}: gave up after {attempt} attempts: {exc}")
                raise BackendError(message, status=exc.status, is_retryable=False) from exc
            wait = policy.delay(attempt, exc.retry_after, rng)
            log.log(
                logging.INFO if exc.max_attempts else logging.WARNING,
                "%s: attempt %d of %d failed: %s; retrying in %.1f s",
                redact_secrets(label),
                attempt,
                limit,
                redact_secrets(str(exc)),
                wait,
            )
            await sleep(wait)
