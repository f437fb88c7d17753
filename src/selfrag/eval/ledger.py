"""The run's ledger: every session and every LLM call, flushed as it happens.

``RUN_DIR/ledger.jsonl`` is append-only, one JSON object a line:

* ``{"event": "session", "session": n, "started", "pid", "resumed"}`` when a
  session (one ``selfrag run`` invocation) starts;
* ``{"event": "call", "session", "id", "cached", "cost_usd", "prompt_tokens",
  "completion_tokens", "t"}`` for each LLM call that came back (``id`` is the
  question's, ``t`` the seconds since the session started);
* ``{"event": "question", "session", "id", "error", "t"}`` after a question's
  line is in ``predictions.jsonl``;
* ``{"event": "end", "session", "finished", "status", "t"}`` when it returns.

A session killed with ``kill -9`` has no ``end``; everything it paid for is
still in the file, including the calls of questions it never finished (the
resumption replays those from the cache, so records alone would miss them).
:func:`account` turns the ledger into the summary's sessions, wall time,
cache hits and misses and what was spent.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from ..llm.base import CallObserver
from ..types import Generation
from ..validation import load_json
from .results import check_within, read_bytes, writing

LEDGER_FILE = "ledger.jsonl"
# The question whose answer the current task is working on (copied into tasks a method starts).
current_question: contextvars.ContextVar[str | None] = contextvars.ContextVar("selfrag_question", default=None)
# Numbers a session from before the ledger kept in summary.json.
_IMPORTED = ("answered", "errors", "wall_time_s", "cache_hits", "cache_misses")


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_ledger(path: Path, within: Path | None = None) -> list[dict[str, Any]]:
    """Every complete event of a ledger (a line torn by a kill is skipped; ``within``: see read_bytes)."""
    if not path.is_file():
        check_within(path, within)
        return []
    events = []
    for line in read_bytes(path, within).split(b"\n"):
        try:
            event = load_json(line, surrogates="replace") if line.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(event, dict) and isinstance(event.get("session"), int):
            events.append(event)
    return events


class Ledger:
    """Appends events for one session and keeps per-question call counts for its records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events = read_ledger(path)
        self.session = max((e["session"] for e in self.events), default=0) + 1
        self.started = time.perf_counter()
        self.counts: dict[str | None, dict[str, int]] = {}
        torn = path.is_file() and not path.read_bytes().endswith(b"\n") and path.stat().st_size > 0
        self._fh = path.open("a", encoding="utf-8")
        if torn:
            self._fh.write("\n")  # a line torn by a kill stays on its own, unread

    def elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 3)

    def _write(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        with writing(self.path):
            self._fh.write(json.dumps(event, ensure_ascii=False) + "\n")
            self._fh.flush()

    def import_sessions(self, sessions: Iterable[dict[str, Any]]) -> None:
        """Carry over the sessions of a run written before the ledger existed (from its summary.json)."""
        for old in sessions:
            numbers = {k: old.get(k) for k in _IMPORTED}
            self._write({"event": "imported", "session": self.session, "started": old.get("started"),
                         "finished": old.get("finished"), **numbers})
            self.session += 1

    def begin(self, resumed: bool) -> None:
        self.started = time.perf_counter()
        self._write({"event": "session", "session": self.session, "started": utc_now(),
                     "pid": os.getpid(), "resumed": resumed})

    def call(self, question_id: str | None, gen: Generation) -> None:
        counts = self.counts.setdefault(question_id, {"llm_calls": 0, "cache_hits": 0, "cache_misses": 0})
        counts["llm_calls"] += 1
        counts["cache_hits" if gen.cached else "cache_misses"] += 1
        self._write({"event": "call", "session": self.session, "id": question_id, "cached": gen.cached,
                     "cost_usd": gen.cost_usd, "prompt_tokens": gen.prompt_tokens,
                     "completion_tokens": gen.completion_tokens, "t": self.elapsed()})

    def take_counts(self, question_id: str) -> dict[str, int]:
        """The calls one question made in this session (and forget them)."""
        return self.counts.pop(question_id, None) or {"llm_calls": 0, "cache_hits": 0, "cache_misses": 0}

    def question(self, question_id: str, error: str | None) -> None:
        self._write({"event": "question", "session": self.session, "id": question_id, "error": error,
                     "t": self.elapsed()})

    def end(self, status: str) -> None:
        self._write({"event": "end", "session": self.session, "finished": utc_now(), "status": status,
                     "t": self.elapsed()})

    def close(self) -> None:
        with writing(self.path):
            self._fh.close()  # the descriptor is closed even when the last flush fails

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        with suppress(OSError):  # the error on its way out is the one to show (a full disk: the same)
            self._fh.close()


class LedgerBackend(CallObserver):
    """Wraps the run's backend (outside the cache): every call that returns goes into the ledger."""

    def __init__(self, inner: Any, ledger: Ledger | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger  # set once the run directory exists; calls before that are not filed

    def observe(self, gen: Generation) -> None:
        if self.ledger is not None:
            self.ledger.call(current_question.get(), gen)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _blank(number: int) -> dict[str, Any]:
    return {"session": number, "pid": None, "started": None, "finished": None, "status": None,
            "resumed": number > 1, "answered": set(), "errors": set(), "imported": {}, "wall_time_s": 0.0,
            "cache_hits": 0, "cache_misses": 0, "cost_usd": 0.0}


def account(events: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sessions, wall time, cache hits/misses and spending, from the ledger and the prediction records.

    A session's ``answered``/``errors`` count the questions it finished (from
    its ``question`` events, and from records that name it, in case a kill fell
    between the two writes). Its wall time is the ``end`` event's, or, for a
    killed session, the time of its last event. Cache misses are the calls
    that went to the backend, i.e. were paid for.
    """
    sessions: dict[int, dict[str, Any]] = {}
    spent = {"llm_calls": 0, "cost_usd": 0.0, "prompt_tokens": 0, "completion_tokens": 0}
    for ev in events:
        s = sessions.setdefault(ev["session"], _blank(ev["session"]))
        kind = ev.get("event")
        s["wall_time_s"] = max(s["wall_time_s"], float(ev.get("t") or 0.0))
        if kind == "session":
            s.update(pid=ev.get("pid"), started=ev.get("started"), resumed=bool(ev.get("resumed")))
        elif kind == "call":
            s["cost_usd"] += float(ev.get("cost_usd") or 0.0)
            if ev.get("cached"):
                s["cache_hits"] += 1
            else:
                s["cache_misses"] += 1
                spent["llm_calls"] += 1
                spent["prompt_tokens"] += int(ev.get("prompt_tokens") or 0)
                spent["completion_tokens"] += int(ev.get("completion_tokens") or 0)
            spent["cost_usd"] += float(ev.get("cost_usd") or 0.0)
        elif kind == "question":
            s["errors" if ev.get("error") else "answered"].add(ev.get("id"))
        elif kind == "end":
            s.update(finished=ev.get("finished"), status=ev.get("status"), wall_time_s=float(ev.get("t") or 0.0))
        elif kind == "imported":
            s.update(started=ev.get("started"), finished=ev.get("finished"), status="imported")
            s["imported"] = {"answered": int(ev.get("answered") or 0), "errors": int(ev.get("errors") or 0)}
            s["wall_time_s"] = float(ev.get("wall_time_s") or 0.0)
            s["cache_hits"] = int(ev.get("cache_hits") or 0)
            s["cache_misses"] = int(ev.get("cache_misses") or 0)
            spent["llm_calls"] += s["cache_misses"]
    for rec in records:
        s = sessions.get(rec.get("session"))  # type: ignore[arg-type]
        if s is not None:
            s["errors" if rec.get("error") is not None else "answered"].add(rec["id"])
    table = []
    for number in sorted(sessions):
        s = sessions[number]
        counted = s.pop("imported")  # an imported session kept counts, not question ids
        table.append({**s, "answered": len(s["answered"]) + counted.get("answered", 0),
                      "errors": len(s["errors"]) + counted.get("errors", 0),
                      "wall_time_s": round(s["wall_time_s"], 3), "cost_usd": round(s["cost_usd"], 9)})
    return {
        "wall_time_s": round(sum(s["wall_time_s"] for s in table), 3),
        "cache": {"hits": sum(s["cache_hits"] for s in table), "misses": sum(s["cache_misses"] for s in table)},
        "spent": {**spent, "cost_usd": round(spent["cost_usd"], 9)},
        "sessions": table,
    }
