"""The fields of a model server's JSON reply, checked: a wrong type is one line, not a traceback.

A server (or a proxy in front of it) can answer with valid JSON of the wrong
shape: ``content`` an integer, ``usage.prompt_tokens`` a word, ``logprobs`` a
string. Each reader here returns the value when it has the documented type
and raises a :class:`~selfrag.errors.BackendError` naming the field otherwise
(not retryable: the same server answers the same way again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import BackendError

T = TypeVar("T")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def malformed(label: str, field: str, value: Any, expected: str) -> BackendError:
    return BackendError(f"{label}: the server's reply is malformed: {field} is {_shown(value)}, not {expected}")


def mapping(value: Any, label: str, field: str) -> dict[str, Any]:
    """``value`` when it is a JSON object; an absent (null) value is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise malformed(label, field, value, "an object")
    return value


def text(value: Any, label: str, field: str) -> str:
    """``value`` when it is a string; null is the empty string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise malformed(label, field, value, "text")
    return value


def token_count(usage: Any, key: str, label: str) -> int:
    """``usage[key]``: a whole number of tokens (0 when the server leaves it out)."""
    value = mapping(usage, label, "usage").get(key)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise malformed(label, f"usage.{key}", value, "a whole number of tokens")
    return value


def parsed(read: Callable[[Any], T], raw: Any, label: str, field: str) -> T:
    """``read(raw)``, with a wrong type anywhere inside ``raw`` reported as a malformed ``field``."""
    try:
        return read(raw)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        raise malformed(label, field, raw, "in the documented shape") from None
