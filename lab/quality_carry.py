"""Keeping measured rows that this machine cannot re-read.

A model's report is rewritten from the run directories on disk after every
run. A row whose run directory is absent here (measured on another machine,
or before run directories were committed) would silently vanish from the
report on the next run. Such rows are carried over from the committed report
instead, each marked with the commit and date it was measured at, so a fresh
clone that measures one new thing does not erase what was measured before.
A row of a variant or dataset the benchmark no longer defines is not carried:
it was retired, and docs/results.md keeps its numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.quality_runs import DATASET_LIST, VARIANT_LIST

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
    """``data`` with every row and critique row of ``previous`` it lacks, marked carried."""
    if not previous:
        return data
    env = previous.get("environment") or {}
    rows = {_row_key(r): r for r in data["rows"]}
    for row in previous.get("rows") or []:
        if not isinstance(row, dict) or not _defined(row):
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
    sources = {c.get("source") for c in critics}
    for c in previous.get("critics") or []:
        if isinstance(c, dict) and c.get("source") not in sources:
            sources.add(c.get("source"))
            critics.append({**c, "carried": _origin(c, env)})
    return {**data, "rows": rows, "critics": critics}


def _defined(row: dict[str, Any]) -> bool:
    dataset, variant = _row_key(row)
    return dataset in _DATASET_ORDER and variant in _VARIANT_ORDER


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
