"""The JSON objects in a model's reply, found however the reply wraps them.

Models put their JSON verdicts in code fences, after prose, several in a row,
or as Python-style dicts; :func:`json_objects` finds each top-level object
(the JSON critique parsers of :mod:`selfrag.reflection.parse` read them).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["first_json_object", "json_objects"]

# How many "{" positions a reply may make the search try before it gives up.
_MAX_JSON_STARTS = 64


def _relaxed(text: str) -> str:
    """Python-style dicts as JSON (single quotes, True/False/None)."""
    text = text.replace("'", '"')
    return re.sub(
        r"\b(True|False|None)\b",
        lambda m: {"True": "true", "False": "false"}.get(m[1], "null"),
        text,
    )


def json_objects(text: str, limit: int = 8) -> list[dict[str, Any]]:
    """The top-level ``{...}`` objects in ``text`` that decode to JSON objects, in order.

    Code fences and surrounding prose are skipped; an object nested in another
    is part of it, not a separate one. If nothing decodes, the text is retried
    with single quotes and Python literals turned into JSON.
    """
    text = text if isinstance(text, str) else str(text)
    decoder = json.JSONDecoder()
    candidates = [text]
    relaxed = _relaxed(text)
    if relaxed != text:
        candidates.append(relaxed)
    for attempt in candidates:
        found: list[dict[str, Any]] = []
        start = attempt.find("{")
        tries = 0
        while start != -1 and tries < _MAX_JSON_STARTS and len(found) < limit:
            tries += 1
            try:
                obj, end = decoder.raw_decode(attempt, start)
            except (ValueError, RecursionError):
                start = attempt.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                found.append(obj)
            start = attempt.find("{", end)
        if found:
            return found
    return []


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first object :func:`json_objects` finds, else None."""
    objects = json_objects(text, limit=1)
    return objects[0] if objects else None
