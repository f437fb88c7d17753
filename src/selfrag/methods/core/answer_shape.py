"""What counts as an answer, and writing it the way the question wants it.

Every method's final answer goes through :func:`finalize_answer`: a reply
that still carries reflection labels keeps only the text before them, a JSON
reply keeps its ``answer`` field, and a yes/no question gets ``yes`` or
``no``. :func:`malformed` names what is wrong with a text that is not an
answer at all (empty, a reflection label, JSON, the prompt's own words), so
self-reflective methods can drop such a candidate instead of selecting it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from ...reflection.parse import json_objects, split_tagged
from ...reflection.tokens import ALL_REFLECTION_TOKENS as TOKENS
from ...types import Question
from .trace import Run

T = TypeVar("T")

# A question that starts with an auxiliary verb and offers no alternatives ("X or Y")
# is answered "yes" or "no" (HotpotQA's comparison questions, e.g. "Were A and B ...?").
_AUXILIARY = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|may|might|must)\b",
    re.IGNORECASE,
)
_ALTERNATIVE = re.compile(r"\bor\b", re.IGNORECASE)
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_WORD_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(not|no|neither|nor|never|none)\b|n't\b", re.IGNORECASE)
_LABEL_WORDS = re.compile(
    r"^\W*(relevant|irrelevant|fully supported|partially supported|no support|"
    r"retrieval|no retrieval|utility)\W*$",
    re.IGNORECASE,
)
# A lone 1-5 is a utility rating written where an answer belongs, unless the question asks for a number.
_RATING = re.compile(r"^\W*[1-5]\W*$")
_ASKS_NUMBER = re.compile(
    r"\b(how (many|much|old|long|far|large|tall|big)|(what|which) (year|number|age)|number of)\b",
    re.IGNORECASE,
)
_PROMPT_ECHO = re.compile(r"^\s*(question|passage|document|context|answer)\s*:", re.IGNORECASE)
_ANSWER_KEYS = ("answer", "response", "generation")
# Words of the answer-format instructions a small model may copy instead of answering.
_INSTRUCTION_PHRASES = (
    "a short answer (a name, number, date or phrase), never a full sentence",
    "reply with only the short answer: a name, number, date or phrase",
    "the letter of the correct option",
)


def is_yes_no(question: Question) -> bool:
    """Whether the question is answered ``yes`` or ``no``.

    Its choices are exactly yes/no (PubMedQA's yes/no/maybe is not), or it has
    no choices, starts with an auxiliary verb and names no alternatives.
    """
    choices = {c.strip().lower() for c in question.choices if c.strip()}
    if choices:
        return choices == {"yes", "no"}
    text = question.text
    return bool(_AUXILIARY.match(text)) and not _ALTERNATIVE.search(text)


def yes_no(text: str) -> str | None:
    """``yes`` / ``no`` read from a reply to a yes/no question; None when it says neither.

    The first word wins when it is yes or no; otherwise a lone "yes" or "no"
    word anywhere; otherwise a sentence with a negation ("X is not Y") reads
    as no and one without as yes. An empty reply reads as None.
    """
    text = text.strip()
    if not text:
        return None
    first = _YES_NO.match(text)
    if first:
        return first.group(1).lower()
    words = {w.lower() for w in _WORD_YES_NO.findall(text)}
    if len(words) == 1:
        return words.pop()
    return "no" if _NEGATION.search(text) else "yes"


def strip_structure(text: str) -> str:
    """The answer part of a reply: before any reflection tag, or a JSON reply's answer field."""
    text = text.strip()
    if text.startswith("{"):
        for obj in json_objects(text):
            for key in _ANSWER_KEYS:
                value = obj.get(key)
                if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                    return str(value).strip()
        return ""
    answer, tags = split_tagged(text)
    if tags:
        text = answer
    if any(token in text for token in TOKENS):
        for token in TOKENS:
            text = text.replace(token, " ")
        text = " ".join(text.split())
    return text.strip()


def malformed(text: str, question: str | None = None) -> str | None:
    """Why ``text`` is not an answer (``empty``, ``reflection label``, ``json``, ``prompt text``), else None.

    A lone digit from 1 to 5 reads as a utility rating, unless ``question`` (its text) asks for
    a number ("Over how many centuries ...?" -> "3" is an answer).
    """
    stripped = text.strip()
    if not stripped:
        return "empty"
    if stripped.startswith("{") or stripped.startswith("```"):
        return "json"
    if any(token in stripped for token in TOKENS) or split_tagged(stripped)[1]:
        return "reflection label"
    if _LABEL_WORDS.match(stripped):
        return "reflection label"
    if _RATING.match(stripped) and not (question and _ASKS_NUMBER.search(question)):
        return "reflection label"
    if _PROMPT_ECHO.match(stripped):
        return "prompt text"
    words = stripped.lower().strip(" .").split()
    if len(words) >= 2 and any(" ".join(words) in phrase for phrase in _INSTRUCTION_PHRASES):
        return "prompt text"
    return None


def finalize_answer(question: Question, text: str) -> str:
    """The answer as the question wants it: structure removed, yes/no questions answered yes or no."""
    answer = strip_structure(text)
    if answer and is_yes_no(question):
        return yes_no(answer) or answer
    return answer


def keep_answers(run: Run, items: Sequence[T], text: Callable[[T], str], question: str | None = None) -> list[T]:
    """The items whose text is an answer (:func:`malformed`, for ``question``); the others are
    recorded in a ``discard_candidates`` step."""
    kept: list[T] = []
    dropped: list[dict[str, object]] = []
    for n, item in enumerate(items, start=1):
        reason = malformed(text(item), question)
        if reason is None:
            kept.append(item)
        else:
            dropped.append({"candidate": n, "reason": reason, "text": text(item)[:200]})
    if dropped:
        run.note(
            "discard_candidates",
            thought="A candidate with no answer is never selected.",
            action_input=f"{len(items)} candidates",
            observation="; ".join(f"candidate {d['candidate']}: {d['reason']}" for d in dropped),
            details={"discarded": dropped},
        )
    return kept
