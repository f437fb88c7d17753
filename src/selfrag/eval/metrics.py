"""Answer metrics, computed after answering (never inside a method).

Normalisation follows the official HotpotQA / SQuAD evaluation: lower-case,
remove punctuation, remove the articles a/an/the, collapse white space.
Every text metric takes the best score over the gold aliases. Multiple-choice
and yes/no/maybe accuracy first extract the chosen option from free text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..normalize import normalize_answer, token_overlap


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_parts(prediction: str, gold: str) -> tuple[float, float, float]:
    """Token ``(f1, precision, recall)`` of a prediction against one gold answer."""
    return token_overlap(prediction, gold)


def f1_score(prediction: str, gold: str) -> float:
    return f1_parts(prediction, gold)[0]


def match(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer occurs in the normalised prediction."""
    ref = normalize_answer(gold)
    if not ref:
        return 0.0
    return float(f" {ref} " in f" {normalize_answer(prediction)} ")


def best_over(metric, prediction: str, golds: Iterable[str]) -> float:
    scores = [metric(prediction, g) for g in golds]
    return max(scores) if scores else 0.0


# -- multiple choice and yes/no/maybe -------------------------------------------

_LETTERS = "ABCDEFGHIJ"
# "answer is (B)", "Answer: B", "option B" (any-case keyword, capital letter: "answer is a cell" names none)
_KEYWORD_LETTER = re.compile(
    r"\b(?:answer|option|choice)\s*(?:is|would be|:|-)?\s*(?:option\s*)?\(?((?-i:[A-J]))\)?(?![\w'])",
    re.IGNORECASE,
)
# A capital letter standing alone as a label: "B", "(B)", "B.", "B)", "B:" at the start,
# or "(B)" anywhere. "A lesion ..." is not a label: a bare leading letter needs punctuation.
_OPTION_LETTER = re.compile(r"\b(?:option|choice)\s*:?\s*\(?([A-Ja-j])\)?(?![\w'])", re.IGNORECASE)
# "... it is B." at the end of the answer.
_FINAL_LETTER = re.compile(r"\b(?:is|be)\s+\(?([A-J])\)?[.!]?\s*$")
_WHOLE_LETTER = re.compile(r"^\W*\(?([A-J])\)?\W*$")
_LEADING_LETTER = re.compile(r"^\s*\(?([A-J])(?:[.):]|\)\s)")
_PAREN_LETTER = re.compile(r"\(([A-J])\)")


def _letter_index(letter: str, n_options: int) -> int | None:
    index = _LETTERS.find(letter.upper())
    return index if 0 <= index < n_options else None


def extract_choice(prediction: str, options: Sequence[str]) -> int | None:
    """The option a free-text answer chose, or None when it names none (or several).

    An explicit letter wins ("B", "(B)", "B. ...", "the answer is B", "Option B");
    otherwise the option whose normalised text occurs in the answer, the longest
    when one option's text contains another's.
    """
    n = len(options)
    text = prediction.strip()
    for pattern in (_WHOLE_LETTER, _LEADING_LETTER):
        m = pattern.match(text)
        if m and (i := _letter_index(m[1], n)) is not None:
            return i
    for pattern in (_KEYWORD_LETTER, _OPTION_LETTER, _FINAL_LETTER, _PAREN_LETTER):
        found = {_letter_index(m[1], n) for m in pattern.finditer(text)} - {None}
        if len(found) == 1:
            return found.pop()
    pred = f" {normalize_answer(text)} "
    hits = [(len(norm), i) for i, opt in enumerate(options) if (norm := normalize_answer(opt)) and f" {norm} " in pred]
    if not hits:
        return None
    hits.sort(reverse=True)
    if len(hits) > 1 and hits[0][0] == hits[1][0]:
        return None  # two different options of the same length: ambiguous
    best_len, best = hits[0]
    best_norm = normalize_answer(options[best])
    # Every other hit must be part of the chosen option ("x" inside "x and y"), else ambiguous.
    if any(f" {normalize_answer(options[i])} " not in f" {best_norm} " for _, i in hits[1:]):
        return None
    return best


def extract_label(prediction: str, labels: Sequence[str]) -> str | None:
    """The label ("yes", "no", "maybe") a free-text answer gives: the leading word, else the first one named."""
    words = normalize_answer(prediction).split()
    wanted = [normalize_answer(label) for label in labels]
    if words and words[0] in wanted:
        return words[0]
    for word in words:
        if word in wanted:
            return word
    return None


def choice_accuracy(prediction: str, options: Sequence[str], gold_index: int) -> float:
    return float(extract_choice(prediction, options) == gold_index)


def label_accuracy(prediction: str, gold: str, labels: Sequence[str] = ("yes", "no", "maybe")) -> float:
    return float(extract_label(prediction, labels) == normalize_answer(gold))


# -- retrieval ------------------------------------------------------------------


def retrieval_recall(retrieved_titles: Sequence[str], gold_titles: Iterable[str]) -> float | None:
    """The fraction of gold titles among the retrieved ones (None when there is no gold)."""
    gold = {t for t in gold_titles if t}
    if not gold:
        return None
    return len(gold & set(retrieved_titles)) / len(gold)
