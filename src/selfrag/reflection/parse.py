"""Reading critique labels out of model outputs.

Two families of parsers, both pure and total (they never raise, whatever the
text): free-text critiques with ``[IsRel]``/``[IsSup]`` lines and a 1-5 rating
(the combined Self-RAG mode), and one-field JSON verdicts (the separate-critic
mode). Every parser reports whether it fell back to a default, so a method can
say so in its trace.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# json_objects and first_json_object live in .json_objects; importers of this module get them here too.
from .json_objects import first_json_object as first_json_object
from .json_objects import json_objects as json_objects
from .tokens import QUOTED_TAG

# Text labels of the tagged critiques (combined and fused modes).
RELEVANT, IRRELEVANT = "relevant", "irrelevant"
FULLY, PARTIALLY, NO_SUPPORT = "fully supported", "partially supported", "no support"
# JSON labels of the one-verdict-per-call critiques (separate mode).
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
# "[IsRel]", "[Is_Sup]", and the bare "IsRel" / "IsSup:" small models write when they drop
# the brackets (Qwen2.5 1.5B: "Terry Richardson IsRel: relevant IsSup: fully supported").
# "(IsSup)", neutralize()'s form of a planted tag, is matched first: a quote, no verdict.
_TAG = re.compile(
    rf"(?:(?P<quoted>{QUOTED_TAG})|\[\s*is\s*_?\s*(?P<bracketed>rel|sup|use)\s*\]|\bis_?(?P<bare>rel|sup|use)\b)\s*:?",
    re.IGNORECASE,
)
_SCALE = re.compile(r"\(?\s*1\s*(?:-|–|to)\s*5\s*\)?", re.IGNORECASE)
_DIGIT = re.compile(r"(?<!\d)([1-5])(?!\d)")


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


def split_tagged(text: str) -> tuple[str, dict[str, list[str]]]:
    """Split an output into its answer and every value of each ``[IsRel]``/``[IsSup]``/``[IsUse]`` tag.

    Tags are matched case-insensitively anywhere in the text; a tag's value is
    the text after it up to the next tag or the end of the line. The answer is
    the text *before the first tag* (the prompts ask for the answer first,
    then the verdicts), with a leading "Answer:" and leftover markup removed;
    it is empty when the output starts with a tag. Whatever follows the first
    tag is never part of the answer, so a verdict block followed by quoted
    passage text does not become the answer. A quoted ``(IsSup)`` (a planted
    tag, neutralised) ends the answer and the value before it and gives no
    verdict. Returns ``(answer, {"rel"|"sup"|"use": [values in order]})``.
    """
    text = _text(text).strip()
    values: dict[str, list[str]] = {}
    tags = list(_TAG.finditer(text))
    for i, tag in enumerate(tags):
        if (name := tag.group("bracketed") or tag.group("bare")) is None:
            continue  # a quoted "(IsSup)": no verdict
        end = tags[i + 1].start() if i + 1 < len(tags) else len(text)
        value = text[tag.end() : end].split("\n", 1)[0]
        values.setdefault(name.lower(), []).append(value.strip())
    head = text[: tags[0].start()] if tags else text
    lines = [ln.strip() for ln in head.split("\n") if re.search(r"\w", ln)]
    answer = _ANSWER_PREFIX.sub("", "\n".join(lines)).strip().rstrip(_MARKUP).strip()
    return answer, values


_ANSWER_PREFIX = re.compile(r"^\s*answer\s*:", re.IGNORECASE)
_MARKUP = " *-_#>|"
# Verdict values from least to most favourable: when a reply gives a verdict more than
# once and the values disagree, the least favourable counts (see parse_combined_critique).
RELEVANCE_ORDER = (IRRELEVANT, RELEVANT)
SUPPORT_ORDER = (NO_SUPPORT, PARTIALLY, FULLY)


def least_favourable(labels: list[str], order: tuple[str, ...]) -> str | None:
    """The label of ``labels`` that comes first in ``order`` (None for no labels)."""
    return min(labels, key=order.index) if labels else None


def parse_combined_critique(text: str) -> Critique:
    """An answer followed by ``[IsRel] ...`` and ``[IsSup] ...`` lines (see :func:`split_tagged`).

    Which occurrence wins: every verdict the reply contains counts, and when
    they disagree the *least favourable* one wins (irrelevant over relevant,
    no support over partial over full). A reply that quotes a passage can
    therefore repeat tags planted in that passage, but they can only lower the
    candidate's score, never raise it: neither "first wins" nor "last wins"
    has that property, since a quote may come before or after the model's own
    verdict. Missing tags default to relevant and partially supported; an
    ``[IsUse]`` line, if any, is not part of the answer.
    """
    generation, values = split_tagged(text)
    relevance = least_favourable([relevance_label(v) for v in values.get("rel", [])], RELEVANCE_ORDER)
    support = least_favourable([support_label(v) for v in values.get("sup", [])], SUPPORT_ORDER)
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
    The answer comes from the first object that has one (none: no answer); each verdict is the
    least favourable over every object in the reply that gives it (the rule of
    :func:`parse_combined_critique`, for the same reason: a quoted object can
    lower a verdict, never raise it). Otherwise the text is read like the
    combined mode plus ``[IsUse] N`` lines (lowest rating wins). Defaults are
    the combined mode's: relevant, partially supported, 3.
    """
    objects = json_objects(text)
    if objects:
        # A reply of JSON objects none of which has an answer has no answer (not its JSON text).
        answers = [_field(o, k)[1] for o in objects for k in _ANSWER_KEYS if _field(o, k)[0]]
        answer = answers[0] if answers else ""
        rels = [relevance_label(v) for v in _string_fields(objects, "relevance")]
        sups = [support_label(v.replace("_", " ")) for v in _string_fields(objects, "support")]
        relevance = least_favourable(rels, RELEVANCE_ORDER)
        support = least_favourable(sups, SUPPORT_ORDER)
        ratings = [json_utility(o) for o in objects]
        found = [r.value for r in ratings if not r.default]
        utility = Parsed(min(found), False) if found else Parsed(DEFAULT_UTILITY, True)
        critique = Critique(
            generation=_text(answer if answer is not None else "").strip(),
            relevance=relevance or DEFAULT_RELEVANCE,
            support=support or DEFAULT_SUPPORT,
            relevance_default=relevance is None,
            support_default=support is None,
        )
        return FusedCritique(critique, utility, "json")
    critique = parse_combined_critique(text)
    _, values = split_tagged(text)
    found = [p.value for p in (parse_utility(v) for v in values.get("use", [])) if not p.default]
    utility = Parsed(min(found), False) if found else Parsed(DEFAULT_UTILITY, True)
    return FusedCritique(critique, utility, "tags")


def _string_fields(objects: list[dict[str, Any]], key: str) -> list[str]:
    out = []
    for obj in objects:
        found, value = _field(obj, key)
        if found and isinstance(value, str) and value.strip():
            out.append(value)
    return out


def parse_utility(text: str) -> Parsed:
    """The first standalone digit 1-5 (a "1-5" scale echoed from the prompt is skipped); else 3."""
    cleaned = _SCALE.sub(" ", _text(text))
    match = _DIGIT.search(cleaned)
    if match:
        return Parsed(int(match.group(1)), False)
    return Parsed(DEFAULT_UTILITY, True)


# -- separate mode: JSON verdicts ---------------------------------------------


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


_JSON_VERDICTS = {
    # field: (parser of one object, rank: lower is less favourable)
    "needs_retrieval": (json_needs_retrieval, lambda p: 0),
    "relevance": (json_relevance, lambda p: RELEVANCE_ORDER.index(p.value)),
    "support": (json_support, lambda p: -JSON_SUPPORT_LABELS.index(p.value)),
    "utility": (json_utility, lambda p: p.value),
}


def json_verdict(objects: list[dict[str, Any]], field: str) -> Parsed:
    """One verdict over every JSON object of a reply: the least favourable one that parses.

    (For ``needs_retrieval``, the first one: the question, not a passage, is in that prompt.)
    """
    parser, rank = _JSON_VERDICTS[field]
    parsed = [p for p in (parser(o) for o in objects) if not p.default]
    return min(parsed, key=rank) if parsed else parser(None)
