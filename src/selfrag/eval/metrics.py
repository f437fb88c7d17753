"""Answer metrics, computed after answering (never inside a method).

Normalisation follows the official HotpotQA / SQuAD evaluation: lower-case,
remove punctuation, remove the articles a/an/the, collapse white space.
Every metric takes the best score over the gold aliases.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    pred = normalize_answer(prediction)
    ref = normalize_answer(gold)
    # As in the official HotpotQA script: yes/no/noanswer only match exactly.
    special = {"yes", "no", "noanswer"}
    if (pred in special or ref in special) and pred != ref:
        return 0.0
    pred_tokens = pred.split()
    ref_tokens = ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def match(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer occurs in the normalised prediction."""
    ref = normalize_answer(gold)
    if not ref:
        return 0.0
    return float(f" {ref} " in f" {normalize_answer(prediction)} ")


def best_over(metric, prediction: str, golds: Iterable[str]) -> float:
    scores = [metric(prediction, g) for g in golds]
    return max(scores) if scores else 0.0
