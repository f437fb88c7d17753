"""One line defining each metric a run reports, for ``selfrag analyze`` (its footer and ``--help``).

The full definitions, edge cases and worked examples are in docs/evaluation.md;
these lines say enough that numbers which look contradictory side by side
(``match 0.333`` and ``truthfulness -1.000``) read as the different questions
they answer. A test checks every metric a summary can hold has a line here.
"""

from __future__ import annotations

from collections.abc import Iterable

from .evidence import ABSTENTION_METRICS, EVIDENCE_METRICS
from .summary import MAIN_METRICS

DEFINITIONS: dict[str, str] = {
    "em": "1 if the normalised answer equals a gold answer, else 0",
    "f1": "token overlap (F1) of the normalised answer with the best gold answer, 0..1",
    "match": "1 if a gold answer occurs (whole words) anywhere in the answer, else 0 (lenient: "
             "a long answer that mentions it counts)",
    "accuracy": "yes/no/maybe and multiple choice only: 1 if the label or option the answer gives is the gold one",
    "retrieval_recall@k": "share of the gold paragraphs among the passages the method retrieved",
    "abstention": "1 if the method declined to answer (\"insufficient evidence\"), else 0",
    "answered_accuracy": "over the questions answered (not abstained): 1 if correct (accuracy 1, else F1 >= 0.5)",
    "truthfulness": "+1 correct, 0 abstained, -1 wrong (correct: accuracy 1, else F1 >= 0.5; stricter than match)",
    "withheld_correct": "over abstentions: 1 if the withheld answer would have been correct",
    "said_insufficient": "1 if the answer's first line said the documents do not seem to hold it (the fitted "
                         "sufficiency below its floor), else 0; only where the sufficiency was read",
    "evidence_precision": "share of the cited passages that are gold paragraphs",
    "evidence_recall": "share of the gold paragraphs that are cited",
    "evidence_f1": "F1 of evidence precision and recall (0 when nothing is cited)",
    "joint_f1": "HotpotQA's joint F1: answer and evidence both right",
    "answer_in_citations": "1 if the answer's words occur in a passage it cites, else 0 (0 when nothing is cited)",
}

# Every metric a summary's "metrics" may hold (retrieval_recall@k stands for every k).
KNOWN = (*MAIN_METRICS, *ABSTENTION_METRICS, *EVIDENCE_METRICS, "retrieval_recall@k")


def definition(metric: str) -> str | None:
    if metric.startswith("retrieval_recall@"):
        return DEFINITIONS["retrieval_recall@k"]
    return DEFINITIONS.get(metric)


def footer(metrics: Iterable[str]) -> str:
    """``metric: definition`` lines for ``metrics`` (those with a definition), in their order."""
    names = [m for m in dict.fromkeys(metrics) if definition(m)]
    if not names:
        return ""
    width = max(len(m) for m in names)
    return "Metrics:\n" + "\n".join(f"  {m.ljust(width)}  {definition(m)}" for m in names)


def help_text() -> str:
    """Every definition, for ``selfrag analyze --help`` (argparse keeps its line breaks with a raw formatter)."""
    width = max(len(m) for m in DEFINITIONS)
    lines = [f"  {m.ljust(width)}  {text}" for m, text in DEFINITIONS.items()]
    return "metrics (docs/evaluation.md has the full definitions):\n" + "\n".join(lines)
