"""The SQLite cache: hits, misses, concurrency, persistence."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from selfrag.errors import BackendError
from selfrag.llm import CachedBackend, ScriptedBackend, SQLiteCache


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_miss_then_hit_costs_nothing_and_is_marked(tmp_path):
    inner = ScriptedBackend([{"text": "Paris", "cost_usd": 0.01, "completion_tokens": 3}])
    llm = CachedBackend(inner, tmp_path / "c.db")
    first = await llm.generate(user("capital?"))
    second = await llm.generate(user("capital?"))
    assert not first.cached and first.cost_usd == 0.01
    assert second.cached and second.cost_usd == 0.0
    assert second.text == "Paris" and second.completion_tokens == 3
    assert (llm.hits, llm.misses) == (1, 1)
    assert len(inner.calls) == 1


async def test_key_covers_sampling_parameters_and_backend(tmp_path):
    cache = SQLiteCache(tmp_path / "c.db")
    a = CachedBackend(ScriptedBackend({"q": "A"}, model="a"), cache)
    await a.generate(user("q"))
    await a.generate(user("q"), max_tokens=10)
    await a.generate(user("q"), temperature=0.7)
    await a.generate(user("q"), top_logprobs=3)
    b = CachedBackend(ScriptedBackend({"q": "B"}, model="b"), cache)
    assert (await b.generate(user("q"))).text == "B"
    assert cache.misses == 5 and cache.hits == 0


async def test_concurrent_identical_calls_are_made_once(tmp_path):
    inner = ScriptedBackend({"same": "once"})
    llm = CachedBackend(inner, tmp_path / "c.db")
    results = await asyncio.gather(*[llm.generate(user("same prompt")) for _ in range(10)])
    assert {g.text for g in results} == {"once"}
    assert len(inner.calls) == 1
    assert sum(not g.cached for g in results) == 1


async def test_survives_reopening_and_logprobs_round_trip(tmp_path):
    path = tmp_path / "c.db"
    item = {"text": "yes", "top_logprobs": {"yes": -0.2, "no": -1.8}}
    first = CachedBackend(ScriptedBackend([item]), path)
    original = await first.generate(user("q"), top_logprobs=2)
    first.cache.close()
    reopened = CachedBackend(ScriptedBackend([]), path)  # would fail if it had to call
    again = await reopened.generate(user("q"), top_logprobs=2)
    assert again.cached and again.logprobs == original.logprobs
    assert len(reopened.cache) == 1


async def test_errors_are_not_cached(tmp_path):
    inner = ScriptedBackend([{"error": "boom", "status": 400}, "ok"])
    llm = CachedBackend(inner, tmp_path / "c.db")
    with pytest.raises(BackendError):
        await llm.generate(user("q"))
    assert (await llm.generate(user("q"))).text == "ok"


def test_wal_mode_and_safe_from_threads(tmp_path):
    path = tmp_path / "c.db"
    cache = SQLiteCache(path)
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"

    def worker(n: int) -> None:
        llm = CachedBackend(ScriptedBackend({"p": f"r{n}"}, model=f"m{n}"), cache)
        for i in range(20):
            asyncio.run(llm.generate(user(f"p {i}")))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 80
