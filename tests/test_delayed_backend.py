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
    llm = DelayedBackend(ScriptedBackend({"q": "a"}), 0.05)
    await asyncio.gather(*(llm.generate(f"q{i}") for i in range(5)))
    assert llm.calls == 5
    assert llm.max_in_flight == 5
    # Five calls side by side: every start comes before any end, one wave.
    assert [event for event, _ in llm.log] == ["start"] * 5 + ["end"] * 5
    spans = llm.spans()
    assert [s.number for s in spans] == [1, 2, 3, 4, 5]
    assert [s.request.prompt_text() for s in spans] == [f"q{i}" for i in range(5)]
    assert all(a.overlaps(b) for a in spans for b in spans)
    assert llm.waves() == 1
    await llm.generate("q again")
    assert llm.max_in_flight == 5 and llm.in_flight == 0
    last = llm.spans()[-1]
    assert last.wave == 2 and not any(last.overlaps(s) for s in spans)
    llm.reset_counts()
    assert (llm.calls, llm.max_in_flight, llm.log, llm.spans(), llm.waves()) == (0, 0, [], [], 0)


async def test_waves_count_the_calls_on_the_critical_path():
    llm = DelayedBackend(ScriptedBackend({"q": "a"}), 0.01)

    async def chain(name: str, length: int) -> None:
        for i in range(length):
            await llm.generate(f"q {name}{i}")

    # A chain of three calls beside a chain of one: three waves, at most two calls at once.
    await asyncio.gather(chain("a", 3), chain("b", 1))
    assert llm.calls == 4 and llm.max_in_flight == 2
    spans = {s.request.prompt_text(): s for s in llm.spans()}
    assert {k: s.wave for k, s in spans.items()} == {"q a0": 1, "q b0": 1, "q a1": 2, "q a2": 3}
    assert spans["q a0"].overlaps(spans["q b0"])
    assert not spans["q a0"].overlaps(spans["q a1"]) and not spans["q a1"].overlaps(spans["q a2"])
    assert llm.waves() == 3
    # The same four calls one after another: four waves, never two at once.
    llm.reset_counts()
    await chain("c", 4)
    assert llm.waves() == 4 and llm.max_in_flight == 1
    assert [s.wave for s in llm.spans()] == [1, 2, 3, 4]


async def test_a_call_in_flight_is_a_span_without_an_end():
    gate = asyncio.Event()

    class Held(ScriptedBackend):
        async def _generate(self, request):
            await gate.wait()
            return await super()._generate(request)

    llm = DelayedBackend(Held(["x"]), 0)
    task = asyncio.ensure_future(llm.generate("q"))
    while not llm.in_flight:
        await asyncio.sleep(0)
    [span] = llm.spans()
    assert span.end is None and span.wave == 1 and span.overlaps(span)
    gate.set()
    await task
    assert llm.spans()[0].end is not None and llm.in_flight == 0


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
