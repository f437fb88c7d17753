"""Small text helpers for model outputs."""

from __future__ import annotations

import re

_PREFIX = re.compile(r"^\s*(final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)


def clean_answer(text: str) -> str:
    """Trim whitespace and a leading 'Answer:' label; keep the first non-empty paragraph."""
    text = text.strip()
    text = _PREFIX.sub("", text, count=1).strip()
    if "\n\n" in text:
        text = text.split("\n\n", 1)[0].strip()
    return text
