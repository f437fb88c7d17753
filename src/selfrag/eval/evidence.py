"""Evidence and abstention metrics, computed after answering (like EM and F1).

Pure functions over titles, texts and answer scores; :mod:`.scoring` applies
them to a question and a response. Definitions and edge cases are in
``docs/evaluation.md`` ("Evidence and abstention"):

* evidence precision / recall / F1: the cited passages' titles against the
  question's gold supporting titles, as sets (HotpotQA's supporting-fact
  metric at paragraph level instead of sentence level);
* joint F1: HotpotQA's joint metric, answer precision x evidence precision and
  answer recall x evidence recall, combined into an F1;
* answer in citations: the normalised answer occurs in a cited passage;
* abstention, answered accuracy and truthfulness (+1 correct, 0 abstained,
  -1 wrong), with correctness read by :func:`is_correct`; for an abstention
  that records the answer it withheld, whether that answer was correct
  (``withheld_correct``, applied in :mod:`.scoring`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..normalize import names_nothing, normalize_answer

# An open answer counts as correct from this token F1 on (see is_correct).
CORRECT_F1 = 0.5
# Summary order of the metrics this module defines.
ABSTENTION_METRICS = ("abstention", "answered_accuracy", "truthfulness", "withheld_correct", "said_insufficient")
EVIDENCE_METRICS = ("evidence_precision", "evidence_recall", "evidence_f1", "joint_f1", "answer_in_citations")


@dataclass(frozen=True)
class EvidenceScores:
    precision: float
    recall: float
    f1: float


def evidence_scores(cited_titles: Iterable[str], gold_titles: Iterable[str]) -> EvidenceScores | None:
    """Paragraph-level precision, recall and F1 of cited titles against gold titles.

    Titles are compared as sets (a passage cited twice counts once). None when
    there is no gold title (nothing to measure against). No citation at all
    scores 0 / 0 / 0, as an empty supporting-fact prediction does in the
    official HotpotQA script.
    """
    gold = {t for t in gold_titles if t}
    if not gold:
        return None
    cited = {t for t in cited_titles if t}
    hits = len(cited & gold)
    precision = hits / len(cited) if cited else 0.0
    recall = hits / len(gold)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return EvidenceScores(precision, recall, f1)


def joint_f1(answer_precision: float, answer_recall: float, evidence_precision: float,
             evidence_recall: float) -> float:
    """HotpotQA's joint F1: F1 of (answer P x evidence P, answer R x evidence R); 0 when both are 0."""
    precision = answer_precision * evidence_precision
    recall = answer_recall * evidence_recall
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def answer_in_passages(answer: str, passages: Iterable[str]) -> float | None:
    """1.0 when the normalised answer occurs, as whole tokens, in a normalised passage; else 0.0.

    None when the answer cannot be checked against text: it is empty after
    normalisation, or a bare ``yes`` / ``no``. No passage at all scores 0.0.
    """
    if names_nothing(answer):
        return None
    needle = f" {normalize_answer(answer)} "
    return float(any(needle in f" {normalize_answer(p)} " for p in passages))


def is_correct(metrics: Mapping[str, float]) -> bool:
    """The correctness test of truthfulness and answered accuracy.

    A question with an ``accuracy`` score (yes/no/maybe and multiple choice)
    is correct when the chosen label or option is the gold one; any other
    question when its token F1 is at least :data:`CORRECT_F1` (0.5).
    """
    if "accuracy" in metrics:
        return metrics["accuracy"] >= 1.0
    return metrics.get("f1", 0.0) >= CORRECT_F1


def abstention_scores(abstained: bool, metrics: Mapping[str, float]) -> dict[str, float]:
    """``abstention`` (1/0), ``answered_accuracy`` (only when it answered) and ``truthfulness`` (+1/0/-1)."""
    if abstained:
        return {"abstention": 1.0, "truthfulness": 0.0}
    correct = is_correct(metrics)
    return {"abstention": 0.0, "answered_accuracy": float(correct), "truthfulness": 1.0 if correct else -1.0}
