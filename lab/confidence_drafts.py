"""The drafts behind the confidence's ``agreement`` signal, read back from the quality runs.

For every answered record whose confidence sampled drafts (the last
``confidence_draft`` step's ``details.drafts``):

* how well agreement (mean token F1 between the answer and the first ``k``
  drafts) separates right from wrong answers, for each ``k`` up to the
  number recorded: how many drafts the signal needs;
* what choosing among the answer and its drafts would give: the answer the
  method returned, the medoid (the text agreeing most with all the others,
  self-consistency), and the best of them by F1 against the gold answer
  (the oracle), each as mean F1 over the same questions.

Nothing here calls a model.
"""

from __future__ import annotations

from typing import Any

from selfrag.eval.evidence import is_correct
from selfrag.eval.metrics import best_over, f1_score
from selfrag.normalize import token_overlap
from selfrag.reflection.confidence import agreement, auroc

DRAFT_COUNTS = (1, 2, 4, 6, 8, 10)


def drafts_of(record: dict[str, Any]) -> list[str] | None:
    """The drafts a record's confidence sampled (None: it sampled none)."""
    found = None
    for step in record.get("reasoning_chain") or []:
        details = step.get("details") if isinstance(step, dict) else None
        if step.get("action") == "confidence_draft" and isinstance(details, dict) and details.get("drafts"):
            found = [str(d) for d in details["drafts"]]
    return found


def medoid(texts: list[str]) -> str:
    """The text with the highest total token F1 against the others (the first such: the answer on a tie)."""
    return max(texts, key=lambda a: sum(token_overlap(a, b)[0] for b in texts))


def drafts_report(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    rows = []
    for record in records:
        drafts = drafts_of(record)
        if drafts is None or record.get("abstained") or record.get("error"):
            continue
        gold = record.get("gold") or []
        rows.append((str(record.get("prediction") or ""), drafts, gold if isinstance(gold, list) else [gold],
                     is_correct(record.get("metrics") or {})))
    if not rows:
        return None
    right = [r for *_, r in rows]
    most = min(len(d) for _, d, _, _ in rows)
    out: dict[str, Any] = {"n": len(rows), "right": sum(right), "drafts": most, "auroc": {}}
    for k in (k for k in DRAFT_COUNTS if k <= most):
        out["auroc"][k] = auroc([agreement(a, d[:k]) for a, d, _, _ in rows], right)

    def mean_f1(pick: Any) -> float:
        return sum(best_over(f1_score, pick(a, d), gold) for a, d, gold, _ in rows) / len(rows)

    out["selection"] = {
        "answer": mean_f1(lambda a, d: a),
        "medoid": mean_f1(lambda a, d: medoid([a, *d])),
        "oracle": sum(max(best_over(f1_score, t, gold) for t in [a, *d]) for a, d, gold, _ in rows) / len(rows),
    }
    out["medoid_changes"] = sum(medoid([a, *d]) != a for a, d, _, _ in rows)
    return out


def render_drafts(label: str, rep: dict[str, Any] | None) -> list[str]:
    if not rep:
        return []
    counts = ", ".join(f"{k}: {v:.3f}" for k, v in rep["auroc"].items() if v is not None)
    sel = rep["selection"]
    return [f"Drafts, {label} ({rep['n']} answers, {rep['right']} right, {rep['drafts']} drafts each): AUROC of "
            f"agreement by number of drafts read, {counts}. Mean F1 of the answer returned {sel['answer']:.3f}, "
            f"of the medoid of the answer and its drafts {sel['medoid']:.3f} (a different text on "
            f"{rep['medoid_changes']}), of the best of them (oracle) {sel['oracle']:.3f}.", ""]
