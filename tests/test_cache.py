"""The SQLite cache: hits, misses, concurrency, persistence."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading

import pytest

from selfrag.errors import BackendError, ConfigError, DataError
from selfrag.llm import CachedBackend, ScriptedBackend, SQLiteCache, build_request
from selfrag.llm.cache import FORMAT, generation_to_json, request_key
from selfrag.types import Generation


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


async def test_each_numbered_draw_is_its_own_reply_and_the_only_draw_keeps_its_old_key(tmp_path):
    inner = ScriptedBackend(respond=lambda request: f"draft {request.draw}")
    llm = CachedBackend(inner, tmp_path / "c.db")
    texts = [(await llm.generate(user("q"), temperature=0.7, draw=d)).text for d in (1, 2, 1)]
    assert texts == ["draft 1", "draft 2", "draft 1"]
    assert llm.cache.misses == 2 and llm.cache.hits == 1
    # A cache written before draws were numbered (and before hidden states could be asked for) still
    # answers the unnumbered request; asking for hidden states is another request.
    request = build_request(user("q"))
    fields = request.as_dict()
    del fields["draw"], fields["hidden"]
    old = __import__("hashlib").sha256(json.dumps({"backend": "x", "request": fields}, sort_keys=True)
                                       .encode("utf-8")).hexdigest()
    assert request_key("x", request) == old
    assert request_key("x", build_request(user("q"), hidden=(-1,))) != old
    with pytest.raises(ConfigError, match="draw must be 0 or more"):
        build_request(user("q"), draw=-1)


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


# -- damaged rows, stored format, files that cannot be a cache -------------------------


def rows(path):
    return sqlite3.connect(path).execute("SELECT key, response FROM generations ORDER BY key").fetchall()


async def test_an_undecodable_row_is_a_miss_deleted_and_logged_once(tmp_path, caplog):
    path = tmp_path / "c.db"
    first = CachedBackend(ScriptedBackend({"a": "A1", "b": "B1"}), path)
    await first.generate(user("a"))
    await first.generate(user("b"))
    first.cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE generations SET response = 'not json {'")
    db.commit()
    db.close()
    inner = ScriptedBackend({"a": "A2", "b": "B2"})
    again = CachedBackend(inner, path)
    assert (await again.generate(user("a"))).text == "A2"  # recomputed, not a failure
    assert (await again.generate(user("b"))).text == "B2"
    assert (await again.generate(user("a"))).cached  # the fresh answer replaced the bad row
    assert len(inner.calls) == 2 and again.cache.dropped == 2
    assert all(json.loads(response)["text"] in ("A2", "B2") for _, response in rows(path))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "could not be read" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()


async def test_a_row_of_another_shape_is_dropped_too(tmp_path):
    path = tmp_path / "c.db"
    llm = CachedBackend(ScriptedBackend({"a": ["A1", "A2"]}), path)
    await llm.generate(user("a"))
    llm.cache._conn.execute("UPDATE generations SET response = ?", (json.dumps({"text": "A1", "new_field": 1}),))
    llm.cache._conn.commit()
    assert (await llm.generate(user("a"))).text == "A2" and llm.cache.dropped == 1


async def test_rows_of_another_format_are_misses_not_failures(tmp_path):
    path = tmp_path / "c.db"
    llm = CachedBackend(ScriptedBackend({"a": ["A1", "A2"]}), path)
    await llm.generate(user("a"))
    # A future selfrag stores a different encoding under a new format number.
    llm.cache._conn.execute("UPDATE generations SET format = ?, response = '[1, 2]'", (FORMAT + 1,))
    llm.cache._conn.commit()
    gen = await llm.generate(user("a"))
    assert gen.text == "A2" and not gen.cached
    assert sqlite3.connect(path).execute("SELECT format FROM generations").fetchall() == [(FORMAT,)]


async def test_a_cache_file_from_before_the_format_column_still_hits(tmp_path):
    path = tmp_path / "old.db"
    request = build_request(user("q"))
    spec = ScriptedBackend([]).spec
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE generations (key TEXT PRIMARY KEY, backend TEXT NOT NULL, request TEXT NOT NULL, "
        "response TEXT NOT NULL, created REAL NOT NULL)"
    )
    old.execute(
        "INSERT INTO generations VALUES (?, ?, ?, ?, 0)",
        (request_key(spec, request), spec, "{}", generation_to_json(Generation(text="stored"))),
    )
    old.commit()
    old.close()
    gen = await CachedBackend(ScriptedBackend([]), path).generate(user("q"))
    assert gen.cached and gen.text == "stored"


def test_paths_that_cannot_hold_a_cache_are_one_line_errors(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.json").write_text("[]")
    (tmp_path / "corrupt.db").write_bytes(b"this is not a database, just text" * 200)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE generations (id INTEGER)")
    other.commit()
    other.close()
    cases = {
        "folder": (ConfigError, "is a folder"),
        "file.json/c.db": (ConfigError, "file.json is a file"),
        "file.json/deeper/c.db": (ConfigError, "file.json is a file"),
        "corrupt.db": (DataError, "is not an SQLite database"),
        "other.db": (DataError, "is not a selfrag cache"),
    }
    for name, (kind, message) in cases.items():
        with pytest.raises(kind, match=message) as info:
            SQLiteCache(tmp_path / name)
        assert "\n" not in str(info.value)
