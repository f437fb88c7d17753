"""Answer normalisation of the official HotpotQA / SQuAD evaluation.

Lower-case, remove punctuation, remove the articles a/an/the, collapse white
space. Metrics (``eval.metrics``), lexical passage signals
(``retrieval.links``) and answer agreement (``methods.abstention``) compare
text through it.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
# Answers that pick a label instead of naming something (HotpotQA's yes/no and "noanswer", PubMedQA's
# maybe): no passage can be searched for them.
LABELS = frozenset({"yes", "no", "maybe", "noanswer"})


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def names_nothing(answer: str) -> bool:
    """Whether ``answer`` names nothing a passage could contain: empty once normalised, one of
    :data:`LABELS`, or a single option letter ("B")."""
    text = answer.strip().rstrip(".")
    norm = normalize_answer(text)
    return not norm or norm in LABELS or (len(text) == 1 and text.isupper())


def token_overlap(prediction: str, reference: str) -> tuple[float, float, float]:
    """Token ``(f1, precision, recall)`` of two normalised answers; yes/no/noanswer only match exactly
    (as in the official HotpotQA script)."""
    pred = normalize_answer(prediction)
    ref = normalize_answer(reference)
    special = {"yes", "no", "noanswer"}
    if (pred in special or ref in special) and pred != ref:
        return 0.0, 0.0, 0.0
    pred_tokens = pred.split()
    ref_tokens = ref.split()
    same = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall
