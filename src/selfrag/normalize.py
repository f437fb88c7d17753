"""Answer normalisation of the official HotpotQA / SQuAD evaluation.

Lower-case, remove punctuation, remove the articles a/an/the, collapse white
space. Metrics (``eval.metrics``) and lexical passage signals
(``retrieval.links``) compare text through it.
"""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
