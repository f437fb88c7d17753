"""Reading critique labels out of model outputs.

Two families of parsers, both pure and total (they never raise, whatever the
text): free-text critiques with ``[IsRel]``/``[IsSup]`` lines and a 1-5 rating
(the combined Self-RAG mode), and one-field JSON verdicts (the separate-critic
mode). Every parser reports whether it fell back to a default, so a method can
say so in its trace.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# Text labels of the combined mode (seed 000's vocabulary).
RELEVANT, IRRELEVANT = "relevant", "irrelevant"
FULLY, PARTIALLY, NO_SUPPORT = "fully supported", "partially supported", "no support"
# JSON labels of the separate mode (seed 003's vocabulary).
JSON_SUPPORT_LABELS = ("fully_supported", "partially_supported", "no_support")

DEFAULT_RELEVANCE = RELEVANT
DEFAULT_SUPPORT = PARTIALLY
DEFAULT_UTILITY = 3
JSON_DEFAULTS: dict[str, Any] = {
    "needs_retrieval": True,
    "relevance": IRRELEVANT,
    "support": "no_support",
    "utility": 3,
}

_WORDS = re.compile(r"[a-z]+")
_TAG = re.compile(r"\[\s*is\s*_?\s*(rel|sup|use)\s*\]\s*:?", re.IGNORECASE)
_SCALE = re.compile(r"\(?\s*1\s*(?:-|–|to)\s*5\s*\)?", re.IGNORECASE)
_DIGIT = re.compile(r"(?<!\d)([1-5])(?!\d)")
_MAX_JSON_STARTS = 64


class Parsed(NamedTuple):
    """A parsed value and whether it is a default (nothing usable was found)."""

    value: Any
    default: bool


def _text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


# -- combined mode: free text -------------------------------------------------


def parse_retrieval_decision(text: str) -> bool:
    """Whether to retrieve: False only when the answer explicitly says no.

    The answer says no when one of its first three words is "no" (punctuation
    and case ignored, so "No." and "[No Retrieval]" count) and none of them is
    "yes". Anything else, including empty or rambling output, means retrieve.
    """
    head = _words(_text(text))[:3]
    return not ("no" in head and "yes" not in head)


def relevance_label(value: str) -> str:
    """``[IsRel]`` value -> "relevant" | "irrelevant" (anything unclear is relevant)."""
    value = value.lower()
    words = _words(value)
    if "irrelevant" in value or ("not" in words and "relevant" in words):
        return IRRELEVANT
    return RELEVANT


def support_label(value: str) -> str:
    """``[IsSup]`` value -> "fully supported" | "partially supported" | "no support"."""
    value = value.lower()
    words = set(_words(value))
    if words & {"partially", "partial", "partly"} or re.search(
        r"not\s+(fully|entirely|completely)", value
    ):
        return PARTIALLY
    if words & {"no", "not", "none", "unsupported"}:
        return NO_SUPPORT
    if words & {"fully", "full", "entirely", "completely"}:
        return FULLY
    return DEFAULT_SUPPORT


@dataclass(frozen=True)
class Critique:
    """A generation with its own relevance and support verdicts."""

    generation: str
    relevance: str = DEFAULT_RELEVANCE
    support: str = DEFAULT_SUPPORT
    relevance_default: bool = True
    support_default: bool = True

    @property
    def defaults(self) -> list[str]:
        return [
            n
            for n, d in (("relevance", self.relevance_default), ("support", self.support_default))
            if d
        ]


def split_tagged(text: str) -> tuple[str, dict[str, str]]:
    """Split an output into its answer and its ``[IsRel]``/``[IsSup]``/``[IsUse]`` values.

    Tags are matched case-insensitively anywhere in a line; the text after a
    tag (up to the next tag) is its value, and the text before the first tag
    belongs to the answer. When a tag repeats, the last one wins. The answer is
    every non-tag line (a leading "Answer:" removed); if there is none, it is
    the whole output. Returns ``(answer, {"rel"|"sup"|"use": value})``.
    """
    text = _text(text)
    values: dict[str, str] = {}
    kept: list[str] = []
    for line in text.strip().split("\n"):
        stripped = line.strip()
        tags = list(_TAG.finditer(stripped))
        if not tags:
            kept.append(stripped)
            continue
        before = stripped[: tags[0].start()].strip()
        if re.search(r"\w", before):
            kept.append(before)
        for tag, following in zip(tags, [*tags[1:], None], strict=True):
            end = following.start() if following is not None else len(stripped)
            values[tag.group(1).lower()] = stripped[tag.end() : end].strip()
    answer = _ANSWER_PREFIX.sub("", "\n".join(kept).strip()).strip()
    return answer or text.strip(), values


_ANSWER_PREFIX = re.compile(r"^\s*answer\s*:", re.IGNORECASE)


def parse_combined_critique(text: str) -> Critique:
    """An answer followed by ``[IsRel] ...`` and ``[IsSup] ...`` lines (see :func:`split_tagged`).

    Missing tags default to relevant and partially supported; an ``[IsUse]``
    line, if any, is not part of the answer.
    """
    generation, values = split_tagged(text)
    relevance = relevance_label(values["rel"]) if "rel" in values else None
    support = support_label(values["sup"]) if "sup" in values else None
    return Critique(
        generation=generation,
        relevance=relevance or DEFAULT_RELEVANCE,
        support=support or DEFAULT_SUPPORT,
        relevance_default=relevance is None,
        support_default=support is None,
    )


@dataclass(frozen=True)
class FusedCritique:
    """One call's answer with all three verdicts (the fused Self-RAG mode)."""

    critique: Critique
    utility: Parsed
    source: str  # "json" or "tags"

    @property
    def defaults(self) -> list[str]:
        return self.critique.defaults + (["utility"] if self.utility.default else [])


_ANSWER_KEYS = ("answer", "response", "generation")


def parse_fused_critique(text: str) -> FusedCritique:
    """An answer with relevance, support and utility, as a JSON object or as tagged lines.

    JSON: ``{"answer": ..., "relevance": ..., "support": ..., "utility": 1-5}``
    (support may use either vocabulary, "fully_supported" or "fully supported").
    Otherwise the text is read like the combined mode plus an ``[IsUse] N``
    line. Defaults are the combined mode's: relevant, partially supported, 3.
    """
    obj = first_json_object(text)
    answer_key = next((k for k in _ANSWER_KEYS if _field(obj, k)[0]), None)
    if obj is not None and answer_key is not None:
        answer = _field(obj, answer_key)[1]
        found_rel, rel = _field(obj, "relevance")
        found_sup, sup = _field(obj, "support")
        rel_ok = found_rel and isinstance(rel, str) and bool(rel.strip())
        sup_ok = found_sup and isinstance(sup, str) and bool(sup.strip())
        utility = json_utility(obj)
        critique = Critique(
            generation=_text(answer if answer is not None else "").strip(),
            relevance=relevance_label(rel) if rel_ok else DEFAULT_RELEVANCE,
            support=support_label(sup.replace("_", " ")) if sup_ok else DEFAULT_SUPPORT,
            relevance_default=not rel_ok,
            support_default=not sup_ok,
        )
        return FusedCritique(critique, utility, "json")
    critique = parse_combined_critique(text)
    _, values = split_tagged(text)
    utility = parse_utility(values["use"]) if "use" in values else Parsed(DEFAULT_UTILITY, True)
    return FusedCritique(critique, utility, "tags")


def parse_utility(text: str) -> Parsed:
    """The first standalone digit 1-5 (a "1-5" scale echoed from the prompt is skipped); else 3."""
    cleaned = _SCALE.sub(" ", _text(text))
    match = _DIGIT.search(cleaned)
    if match:
        return Parsed(int(match.group(1)), False)
    return Parsed(DEFAULT_UTILITY, True)


# -- separate mode: JSON verdicts ---------------------------------------------


def _relaxed(text: str) -> str:
    """Python-style dicts as JSON (single quotes, True/False/None)."""
    text = text.replace("'", '"')
    return re.sub(
        r"\b(True|False|None)\b",
        lambda m: {"True": "true", "False": "false"}.get(m[1], "null"),
        text,
    )


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first ``{...}`` in ``text`` that decodes to a JSON object, else None.

    Code fences and surrounding prose are skipped. If nothing decodes, the
    text is retried with single quotes and Python literals turned into JSON.
    """
    text = _text(text)
    decoder = json.JSONDecoder()
    candidates = [text]
    relaxed = _relaxed(text)
    if relaxed != text:
        candidates.append(relaxed)
    for attempt in candidates:
        start = attempt.find("{")
        tries = 0
        while start != -1 and tries < _MAX_JSON_STARTS:
            try:
                obj, _ = decoder.raw_decode(attempt, start)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                return obj
            start = attempt.find("{", start + 1)
            tries += 1
    return None


def _field(obj: Mapping[str, Any] | None, key: str) -> tuple[bool, Any]:
    """(found, value) for ``key``, matched case-insensitively."""
    if not isinstance(obj, Mapping):
        return False, None
    if key in obj:
        return True, obj[key]
    for k, v in obj.items():
        if isinstance(k, str) and k.strip().lower() == key:
            return True, v
    return False, None


def _label(value: Any) -> str:
    return re.sub(r"[\s\-]+", "_", value.strip().lower()) if isinstance(value, str) else ""


def json_needs_retrieval(obj: Mapping[str, Any] | None) -> Parsed:
    """``{"needs_retrieval": bool}``; "true"/"false"/"yes"/"no" strings count; else True."""
    found, value = _field(obj, "needs_retrieval")
    if found:
        if isinstance(value, bool):
            return Parsed(value, False)
        label = _label(value)
        if label in ("true", "yes"):
            return Parsed(True, False)
        if label in ("false", "no"):
            return Parsed(False, False)
    return Parsed(JSON_DEFAULTS["needs_retrieval"], True)


def json_relevance(obj: Mapping[str, Any] | None) -> Parsed:
    """``{"relevance": "relevant"|"irrelevant"}``; anything else is irrelevant (a default)."""
    found, value = _field(obj, "relevance")
    label = _label(value) if found else ""
    if label == "relevant":
        return Parsed(RELEVANT, False)
    if label in ("irrelevant", "not_relevant"):
        return Parsed(IRRELEVANT, False)
    return Parsed(JSON_DEFAULTS["relevance"], True)


_SUPPORT_SYNONYMS = {
    "fully": "fully_supported",
    "supported": "fully_supported",
    "partially": "partially_supported",
    "partial": "partially_supported",
    "partially_support": "partially_supported",
    "no": "no_support",
    "none": "no_support",
    "unsupported": "no_support",
    "not_supported": "no_support",
}


def json_support(obj: Mapping[str, Any] | None) -> Parsed:
    """``{"support": "fully_supported"|"partially_supported"|"no_support"}``; else no_support."""
    found, value = _field(obj, "support")
    label = _label(value) if found else ""
    label = _SUPPORT_SYNONYMS.get(label, label)
    if label in JSON_SUPPORT_LABELS:
        return Parsed(label, False)
    return Parsed(JSON_DEFAULTS["support"], True)


def json_utility(obj: Mapping[str, Any] | None) -> Parsed:
    """``{"utility": n}`` truncated to an integer and clamped to 1..5; else 3."""
    found, value = _field(obj, "utility")
    number: float | None = None
    if found and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            number = float(value.strip() if isinstance(value, str) else value)
        except (ValueError, OverflowError):
            number = None
    if number is None or not math.isfinite(number):
        return Parsed(JSON_DEFAULTS["utility"], True)
    return Parsed(max(1, min(5, int(number))), False)
