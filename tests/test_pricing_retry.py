"""Pricing lookups and the retry policy."""

from __future__ import annotations

import email.utils
import random
import time

import pytest

from selfrag.llm.base import RetryPolicy
from selfrag.llm.http import parse_retry_after
from selfrag.llm.pricing import FREE, Pricing, lookup_pricing


def test_longest_prefix_wins_and_local_is_free():
    assert lookup_pricing("openai", "gpt-4o-mini-2024-07-18") == Pricing(0.15, 0.60)
    assert lookup_pricing("openai", "gpt-4o-2024-08-06") == Pricing(2.50, 10.00)
    assert lookup_pricing("llamacpp", "anything.gguf") == FREE
    assert lookup_pricing("openai", "gpt-4o", base_url="http://localhost:8000/v1") == FREE
    assert Pricing(1.0, 2.0).cost(1_000_000, 500_000) == pytest.approx(2.0)


def test_unknown_model_costs_zero_and_warns_once(caplog):
    with caplog.at_level("WARNING"):
        assert lookup_pricing("openai", "mystery-model-1") == FREE
        lookup_pricing("openai", "mystery-model-1")
    assert sum("mystery-model-1" in r.message for r in caplog.records) == 1


def test_backoff_grows_with_jitter_and_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(0)
    delays = [policy.delay(a, None, rng) for a in range(1, 7)]
    for attempt, d in enumerate(delays, start=1):
        full = min(8.0, 2 ** (attempt - 1))
        assert full / 2 <= d <= full
    assert policy.delay(1, 12.0, rng) == 12.0  # Retry-After wins
    assert policy.delay(1, 1e6, rng) == policy.max_retry_after


def test_parse_retry_after_seconds_and_http_date():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after(date) <= 31
