"""Keeping measured rows that this machine cannot re-read.

A model's report is rewritten from the run directories on disk after every
run. A row whose run directory is absent here (measured on another machine,
or before run directories were committed) would silently vanish from the
report on the next run. Such rows are carried over from the committed report
instead, each marked with the commit and date it was measured at, so a fresh
clone that measures one new thing does not erase what was measured before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quality_runs import DATASET_LIST, VARIANT_LIST

_DATASET_ORDER = {d.name: i for i, d in enumerate(DATASET_LIST)}
_VARIANT_ORDER = {v.name: i for i, v in enumerate(VARIANT_LIST)}


def read_previous(path: Path) -> dict[str, Any] | None:
    """The committed report's data, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _origin(item: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """Where a carried item was measured: its own mark if it was carried before, else the old report's."""
    return item.get("carried") or {"commit": env.get("commit"), "date": env.get("date")}


def _row_key(row: dict[str, Any]) -> tuple[str, str]:
    return row.get("dataset", ""), row.get("variant", "")


def _row_order(row: dict[str, Any]) -> tuple[int, int, str]:
    dataset, variant = _row_key(row)
    return _DATASET_ORDER.get(dataset, 99), _VARIANT_ORDER.get(variant, 99), variant


def carry_over(data: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """``data`` with every row, critique row and decision summary of ``previous`` it lacks, marked carried."""
    if not previous:
        return data
    env = previous.get("environment") or {}
    rows = {_row_key(r): r for r in data["rows"]}
    for row in previous.get("rows") or []:
        if not isinstance(row, dict):
            continue
        here = rows.get(_row_key(row))
        if here is None:
            rows[_row_key(row)] = {**row, "carried": _origin(row, env)}
        elif (here.get("n") or 0) < (row.get("n") or 0):
            # A rerun here that has answered fewer questions than the committed row: the committed
            # row stands until the rerun overtakes it (the rerun still pairs with the other runs).
            rows[_row_key(row)] = {**row, "carried": _origin(row, env), "rerun_n": here.get("n") or 0}
    rows = sorted(rows.values(), key=_row_order)
    critics = list(data.get("critics") or [])
    critics += [{**c, "carried": _origin(c, env)} for c in _critics_to_carry(critics, previous)]
    decisions = data.get("decisions")
    old = previous.get("decisions")
    if _empty_decisions(decisions) and not _empty_decisions(old):
        decisions = {**old, "carried": _origin(old, env)}
    return {**data, "rows": rows, "critics": critics, "decisions": decisions}


def _critics_to_carry(here: list[dict[str, Any]], previous: dict[str, Any]) -> list[dict[str, Any]]:
    """The previous report's critique rows this one lacks, once each.

    Rows of the top-5 critique pass (they carry a ``target``) are all read from one critiques
    directory: when this report has any of them, that directory is on this machine and every
    row it yields is here, so an old row missing from it was renamed or dropped, not lost.
    """
    sources = {c.get("source") for c in here}
    have_pass = any("target" in c for c in here)
    kept: list[dict[str, Any]] = []
    for c in previous.get("critics") or []:
        if not isinstance(c, dict) or c.get("source") in sources or (have_pass and "target" in c):
            continue
        sources.add(c.get("source"))
        kept.append(c)
    return kept


def _empty_decisions(d: dict[str, Any] | None) -> bool:
    return not d or (not d.get("hotpotqa_n") and not d.get("no_docs_n"))


def carried_note(item: dict[str, Any]) -> str:
    """One phrase for the report, empty for an item measured from the run directories on disk."""
    c = item.get("carried")
    if not c:
        return ""
    if "rerun_n" in item:
        return (f"carried over from the report of commit {c.get('commit')} ({c.get('date')}); the rerun on this "
                f"machine has {item['rerun_n']} question(s) so far and replaces this row once it has more")
    return (f"carried over from the report of commit {c.get('commit')} ({c.get('date')}): its run directory is "
            "not on this machine")
