"""How a question wants its answer written, for the answer-writing prompts.

A free-text question gets the short-answer instruction every method uses; a
question with choices (yes/no/maybe, or lettered options) gets an instruction
that names them, so the prompt never asks for "a name, number, date or
phrase" when the question wants "yes" or "B".
"""

from __future__ import annotations

from ...prompts import load_prompt, render
from ...types import Question
from .answer_shape import is_yes_no

SHORT_ANSWER_FORMAT = "Reply with only the short answer: a name, number, date or phrase, never a full sentence."
SHORT_ANSWER_KIND = "a short answer (a name, number, date or phrase)"
LETTERS = "ABCDEFGHIJ"


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _labels(question: Question) -> tuple[list[str], bool] | None:
    """The words a choice question is answered with, and whether they are option letters."""
    choices = [c.strip() for c in question.choices if c.strip()]
    if not choices:
        return (["yes", "no"], False) if is_yes_no(question) else None
    if {c.lower() for c in choices} <= {"yes", "no", "maybe"}:
        return [c.lower() for c in choices], False
    return list(LETTERS[: min(len(choices), len(LETTERS))]), True


def choice_labels(question: Question) -> tuple[str, ...] | None:
    """The labels a choice question is answered with ("yes"/"no", "A".."D"); None for a free-text question."""
    labels = _labels(question)
    return None if labels is None else tuple(labels[0])


def _phrase(question: Question, free: str, letters: str, words: str) -> str:
    """``free`` for a free-text question, else ``letters`` / ``words`` with ``{labels}`` filled in."""
    labels = _labels(question)
    if labels is None:
        return free
    names, are_letters = labels
    return (letters if are_letters else words).format(labels=_or_list(names))


def answer_format(question: Question) -> str:
    """The line that tells the model how to write its answer."""
    return _phrase(
        question, SHORT_ANSWER_FORMAT,
        "Reply with only the letter of the correct option ({labels}).", "Reply with only {labels}.",
    )


def answer_kind(question: Question) -> str:
    """What to write first, in prompts that also ask for critique lines."""
    return _phrase(question, SHORT_ANSWER_KIND, "the letter of the correct option ({labels})", "the answer ({labels})")


def finish_answer(question: Question) -> str:
    """How ReAct's ``finish[...]`` answer is written ("The answer inside finish[...] is ...")."""
    return _phrase(
        question, "short: a name, number, date or phrase",
        "only the letter of the correct option ({labels})", "only {labels}",
    )


def answer_system(question: Question) -> str:
    """The system message of the answer-writing calls, with the question's answer format."""
    return render(load_prompt("answer_system"), answer_format=answer_format(question))
