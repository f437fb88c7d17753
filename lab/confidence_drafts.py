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
from selfrag.reflection.confidence import Signals, agreement, auroc

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


# Joint drafts over other passages, each a benchmark variant's answer to the same questions: the BM25 top 5
# instead of the evidence-ranked 5 (vanilla_rag) and every retrieved passage (vanilla_rag_top10).
OTHER_DRAFTS = ("vanilla_rag", "vanilla_rag_top10")


def signals_of(record: dict[str, Any]) -> Signals:
    """The confidence signals a record read (all unknown when it read none)."""
    return Signals.from_mapping(((record.get("details") or {}).get("confidence") or {}).get("signals") or {})


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def joint_drafts_report(answers: list[dict[str, Any]], others: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """Would drafts over other passages, or written another way, tell a wrong answer or choose a better one?

    ``answers``: the method's records; ``others``: each draft variant's records of the same questions.
    On the questions every run answered: each draft's F1 and the AUROC of its agreement with the answer;
    the AUROC of the mean agreement over all drafts; and the mean F1 of choosing among the answer and its
    drafts by medoid (majority), by the highest sequence probability and by the highest P(True) (among the
    texts that have one), and of the best of them (the oracle)."""
    def usable(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {str(r.get("id")): r for r in recs if not r.get("abstained") and not r.get("error")}

    base = usable(answers)
    runs = {name: usable(recs) for name, recs in others.items() if recs}
    ids = [q for q in base if all(q in run for run in runs.values())]
    if not runs or not ids:
        return None
    right = [is_correct(base[q].get("metrics") or {}) for q in ids]

    def text(record: dict[str, Any]) -> str:
        return str(record.get("prediction") or "")

    def gold(q: str) -> list[str]:
        g = base[q].get("gold") or []
        return g if isinstance(g, list) else [g]

    def f1(t: str, q: str) -> float:
        return best_over(f1_score, t, gold(q))

    # The answer's record first, then each draft's: ties and texts without the reading keep the answer.
    written = {q: [base[q]] + [run[q] for run in runs.values()] for q in ids}
    every = {q: [text(r) for r in recs] for q, recs in written.items()}

    out: dict[str, Any] = {"n": len(ids), "right": sum(right), "drafts": {}}
    for name, run in runs.items():
        agree = [token_overlap(text(base[q]), text(run[q]))[0] for q in ids]
        out["drafts"][name] = {"f1": sum(f1(text(run[q]), q) for q in ids) / len(ids), "agreement_auroc": auroc(agree, right),
                               "same": sum(a == 1.0 for a in agree)}
    out["mean_agreement_auroc"] = auroc([agreement(every[q][0], every[q][1:]) for q in ids], right)

    def choose(q: str, key: str) -> str:
        scored = [(v, text(r)) for r in written[q] if (v := getattr(signals_of(r), key)) is not None]
        return max(scored, key=lambda p: p[0])[1] if scored else text(base[q])

    out["selection"] = {
        "answer": sum(f1(text(base[q]), q) for q in ids) / len(ids),
        "medoid": sum(f1(medoid(every[q]), q) for q in ids) / len(ids),
        "by sequence probability": sum(f1(choose(q, "seq"), q) for q in ids) / len(ids),
        "by P(True)": sum(f1(choose(q, "p_true"), q) for q in ids) / len(ids),
        "oracle": sum(max(f1(t, q) for t in every[q]) for q in ids) / len(ids),
    }
    return out


def render_joint_drafts(label: str, rep: dict[str, Any] | None) -> list[str]:
    if not rep:
        return []
    lines = [f"Joint drafts over other passages, {label} ({rep['n']} answers, {rep['right']} right; each draft a "
             "benchmark variant's answer to the same question):", "",
             "| draft | F1 | same answer | AUROC of agreement with the answer |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {d['f1']:.3f} | {d['same']} | {fmt(d['agreement_auroc'])} |"
              for name, d in rep["drafts"].items()]
    choices = ", ".join(f"{k} {v:.3f}" for k, v in rep["selection"].items())
    lines += ["", f"Mean agreement with every draft: AUROC {fmt(rep['mean_agreement_auroc'])}. Mean F1 choosing "
              f"among the answer and its drafts: {choices}.", ""]
    return lines

