"""DelayedBackend: a fixed delay per call, capabilities forwarded, overlap counted."""

from __future__ import annotations

import asyncio
import time

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import DelayedBackend, ScriptedBackend


async def test_each_call_waits_the_delay_and_reports_its_own_latency():
    llm = DelayedBackend(ScriptedBackend(["Paris"]), 0.1)
    start = time.perf_counter()
    gen = await llm.generate("capital of France?")
    elapsed = time.perf_counter() - start
    assert gen.text == "Paris"
    assert elapsed >= 0.1
    assert 100 <= gen.latency_ms <= elapsed * 1000 + 1
    assert llm.calls == 1


async def test_concurrent_calls_overlap_and_the_peak_is_counted():
    llm = DelayedBackend(ScriptedBackend({"q": "a"}), 0.1)
    start = time.perf_counter()
    await asyncio.gather(*(llm.generate(f"q{i}") for i in range(5)))
    elapsed = time.perf_counter() - start
    assert llm.calls == 5
    assert llm.max_in_flight == 5
    assert elapsed < 0.3  # five calls of 0.1 s, overlapped
    await llm.generate("q again")
    assert llm.max_in_flight == 5 and llm.in_flight == 0
    llm.reset_counts()
    assert (llm.calls, llm.max_in_flight) == (0, 0)


async def test_capabilities_and_spec_come_from_the_inner_backend():
    inner = ScriptedBackend(["x"], supports_logprobs=False, supports_json=True, name="s.json")
    llm = DelayedBackend(inner, 0)
    assert llm.supports_logprobs is False and llm.supports_json is True
    assert llm.spec == "scripted:s.json" and llm.model == inner.model
    assert llm.count_tokens("four words in here") == inner.count_tokens("four words in here")
    gen = await llm.generate("hi", top_logprobs=0)
    assert gen.text == "x"


async def test_inner_errors_pass_through_and_leave_nothing_in_flight():
    llm = DelayedBackend(ScriptedBackend([]), 0)
    with pytest.raises(Exception, match="ran out of responses"):
        await llm.generate("q")
    assert llm.in_flight == 0


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.2", True])
def test_a_bad_delay_is_a_one_line_error(bad):
    with pytest.raises(ConfigError, match="delay must be a number of seconds >= 0"):
        DelayedBackend(ScriptedBackend([]), bad)
