"""Which verdicts of a candidate the model actually gave.

A candidate's ``relevance``, ``support`` and ``utility`` hold a value even
when the model's reply had no usable verdict: the parser's default (listed in
``details["defaults_used"]``) so that scoring can go on, or ``None`` when the
verdict was never asked (the joint candidate, judged only where its verdicts
can change the answer). Neither is the model's verdict, so every surface (the
CLI, ``--json``, the web page, run records) shows it as "not judged" instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_JUDGED = "not judged"
VERDICTS = ("relevance", "support", "utility")


def not_judged_names(values: Mapping[str, Any], details: Mapping[str, Any] | None) -> list[str]:
    """The verdicts among ``values`` that the model did not give (defaulted, or never asked)."""
    defaulted = (details or {}).get("defaults_used") or []
    return [v for v in VERDICTS if v in defaulted or values.get(v) is None]


def not_judged(candidate: Any) -> list[str]:
    """:func:`not_judged_names` of a :class:`~selfrag.types.Candidate`: a verdict never read, read as
    nothing, or the parser's default."""
    verdicts = getattr(candidate, "verdicts", {}) or {}
    return [v for v in VERDICTS
            if v not in verdicts or verdicts[v].value is None or verdicts[v].default or getattr(candidate, v) is None]


def judged_value(candidate: Any, name: str) -> Any:
    """The verdict ``name`` of a candidate as the model gave it, or None when it did not."""
    return None if name in not_judged(candidate) else getattr(candidate, name, None)


def shown(value: Any, judged: bool = True) -> str:
    """A verdict as text: its value, or "not judged"."""
    if not judged or value is None:
        return NOT_JUDGED
    return f"{value:g}" if isinstance(value, float) else str(value)


def honest_row(row: dict[str, Any], details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A candidate as JSON (``row``, a dict with the verdict keys) with every verdict the model did not
    give set to None and named under ``not_judged``."""
    names = not_judged_names(row, details if details is not None else row.get("details"))
    out = dict(row)
    for name in names:
        out[name] = None
    out["not_judged"] = names
    return out
