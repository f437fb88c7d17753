"""Reading one step of a chain of thought: the sentence it adds and the answer it may state.

IRCoT (``methods/catalog/ircot.py``) asks the model for the next sentence of
its reasoning; the reply is read here, without calling anything:

* labels a model puts before its sentence (``Next sentence:``, ``Step 2:``,
  ``A:``, a bullet, quotes) are removed;
* only the first sentence of the first line with words is kept (the paper
  keeps one sentence per step, so each retrieval follows one new fact); the
  rest of the reply is returned as ``dropped``;
* a sentence containing "answer is" states the answer: the text after it,
  up to the sentence's end, without quotes or a final period;
* a reply with no words left is ``malformed`` ("empty"), as is a sentence
  cut to nothing by the labels; a malformed step never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sentences import sentences

# A sentence is cut to this many characters: it becomes a retrieval query.
MAX_SENTENCE_CHARS = 400
_LABEL = re.compile(
    r"^(?:[-*\u2022>#]+\s*|\d{1,2}[.)]\s+|(?:next\s+)?(?:sentence|step|reasoning|thought|cot|a)\s*\d*\s*[:.)\-]\s*)",
    re.IGNORECASE,
)
_ANSWER = re.compile(r"\banswer\s+is\b\s*[:\-]?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_QUOTES = " \t\"'`*_\u201c\u201d\u2018\u2019"


@dataclass(frozen=True)
class ChainStep:
    """What one reasoning reply adds: its sentence, the answer it states (None: none), what was left out."""

    sentence: str
    answer: str | None = None
    dropped: str = ""
    malformed: str = ""  # why the reply could not be read ("" when it could)

    @property
    def states_answer(self) -> bool:
        return self.answer is not None


def _strip_labels(line: str) -> str:
    """``line`` without the labels and quotes a model writes before its sentence (repeatedly: ``1. Step 2:``)."""
    previous = None
    while previous != line:
        previous = line
        line = _LABEL.sub("", line.strip(_QUOTES)).strip()
    return line


def stated_answer(sentence: str) -> str | None:
    """The answer a sentence states after "answer is" (``""``: it says "answer is" and nothing after);
    None when it states none."""
    match = _ANSWER.search(sentence)
    if match is None:
        return None
    answer = match.group(1).strip().strip(_QUOTES)
    return answer[:-1].strip(_QUOTES) if answer.endswith(".") else answer


def read_step(reply: str) -> ChainStep:
    """The first sentence of ``reply`` and the answer it states (see the module docstring)."""
    lines = [_strip_labels(line) for line in (reply or "").splitlines()]
    lines = [line for line in lines if re.search(r"\w", line)]
    if not lines:
        return ChainStep("", malformed="empty")
    first = lines[0]
    start, end = sentences(first)[0]
    sentence = first[start:end].strip()
    dropped = " ".join([first[end:].strip(), *lines[1:]]).strip()
    if len(sentence) > MAX_SENTENCE_CHARS:  # a reply with no sentence end: keep a query-sized prefix
        cut = sentence.rfind(" ", 0, MAX_SENTENCE_CHARS)
        sentence = sentence[: cut if cut > 0 else MAX_SENTENCE_CHARS]
    return ChainStep(sentence, stated_answer(sentence), dropped)
