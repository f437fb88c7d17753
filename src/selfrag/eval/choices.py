"""Multiple-choice questions: option letters, the question text a model sees, the gold option."""

from __future__ import annotations

from collections.abc import Sequence

from .metrics import normalize_answer
from .records import InvalidRecord

LETTERS = "ABCDEFGHIJ"
YES_NO_MAYBE = ("yes", "no", "maybe")


def question_with_choices(stem: str, options: Sequence[str]) -> str:
    """The text a method answers: the stem, the lettered options, and how to reply."""
    lines = [stem.strip(), ""]
    lines += [f"{LETTERS[i]}. {text}" for i, text in enumerate(options)]
    lines += ["", f"Reply with the letter of the correct option ({', '.join(LETTERS[: len(options)])})."]
    return "\n".join(lines)


def gold_option(gold: str, options: Sequence[str]) -> int:
    """The index of the gold option, given as its letter or its text."""
    if not options:
        raise InvalidRecord("a multiple-choice record needs options")
    if len(options) > len(LETTERS):
        raise InvalidRecord(f"at most {len(LETTERS)} options are supported, got {len(options)}")
    token = gold.strip().rstrip(".):").lstrip("(")
    if len(token) == 1 and token.upper() in LETTERS[: len(options)]:
        return LETTERS.index(token.upper())
    for i, text in enumerate(options):
        if text.strip() == gold.strip():
            return i
    wanted = normalize_answer(gold)
    for i, text in enumerate(options):
        if normalize_answer(text) == wanted:
            return i
    raise InvalidRecord(f"the answer {gold!r:.60} is neither an option letter nor one of the options")


def gold_aliases(index: int, options: Sequence[str]) -> tuple[str, str]:
    """Gold answers of a multiple-choice question: its letter, then its text."""
    return LETTERS[index], options[index]
