"""The pure half of the quality benchmark: reading predictions, summarising a run, statistics.

Nothing here calls a model. A run is summarised from its ``predictions.jsonl``
(not from ``summary.json``), restricted to the questions asked for, so a
partial run, a run made by hand with a larger n and a finished run are all
reported the same way.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from selfrag.eval.metrics import best_over, f1_score, normalize_answer
from selfrag.eval.report import GROUNDING_KEYS
from selfrag.methods.catalog.self_rag.candidates import NO_RELEVANT_DOCUMENTS

# The lab's only imports from selfrag.methods, kept in this one module.
from selfrag.methods.core.answer_shape import malformed

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
SUPPORT_LEVELS = {"fully supported": 1.0, "partially supported": 0.5, "no support": 0.0}


# -- reading -------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path`` (a torn last line, as a kill leaves it, is ignored)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_predictions(path: Path, wanted: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One record per question id: the first answer, else the last error; in ``wanted`` order if given."""
    by_id: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(path):
        qid = rec.get("id")
        if not isinstance(qid, str):
            continue
        old = by_id.get(qid)
        if old is None or (old.get("error") is not None and rec.get("error") is None):
            by_id[qid] = rec
    if wanted is None:
        return list(by_id.values())
    return [by_id[q] for q in wanted if q in by_id]


def answered(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("error") is None]


def join_by_id(
    rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Answered questions present in both, as ``(id, a, b)`` in ``rows_a`` order."""
    b_by = {r["id"]: r for r in answered(rows_b)}
    return [(r["id"], r, b_by[r["id"]]) for r in answered(rows_a) if r["id"] in b_by]


# -- per-question scores -------------------------------------------------------


def yes_no_correct(prediction: str | None, gold: Sequence[str]) -> float:
    """1.0 when the normalised prediction is exactly the gold yes/no."""
    pred = normalize_answer(prediction or "")
    return float(any(pred == normalize_answer(g) for g in gold))


def question_score(row: dict[str, Any], metric: str) -> float:
    """The metric the paired comparison uses for one answered question (missing counts 0)."""
    if metric == "yesno":
        return yes_no_correct(row.get("prediction"), row.get("gold") or [])
    return float((row.get("metrics") or {}).get(metric) or 0.0)


def malformed_reasons(rows: Iterable[dict[str, Any]]) -> Counter[str]:
    """Why answered questions' final answers are not answers (empty, reflection label, JSON, prompt text)."""
    out: Counter[str] = Counter()
    for r in answered(rows):
        reason = malformed(str(r.get("prediction") or ""), str(r.get("question") or ""))
        if reason is not None:
            out[reason] += 1
    return out


# -- statistics ----------------------------------------------------------------


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED, level: float = 0.95,
) -> dict[str, float] | None:
    """Mean of ``a - b`` over paired questions and its percentile bootstrap interval."""
    if len(a) != len(b):
        raise ValueError("paired samples need the same length")
    if not a:
        return None
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return {"diff": float(diff.mean()), "lo": float(lo), "hi": float(hi), "n": len(diff)}


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """P(score of a positive > score of a negative), ties counted one half (Mann-Whitney U)."""
    if not pos or not neg:
        return None
    scores = np.concatenate([np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)])
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # mid-ranks for ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    n_pos, n_neg = len(pos), len(neg)
    u = ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def auc_row(name: str, pos: Sequence[float], neg: Sequence[float], n_questions: int, **extra: Any) -> dict:
    return {
        "source": name, "n_questions": n_questions, "n_pos": len(pos), "n_neg": len(neg),
        "n_pairs": len(pos) * len(neg), "auc": auc(pos, neg), **extra,
    }


# -- one run -------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def summarize_rows(rows: Sequence[dict[str, Any]], *, target_n: int, metrics: Sequence[str],
                   yes_no: bool = False) -> dict[str, Any]:
    """n, quality metrics, malformed answers and cost per question of one run's records."""
    ok = answered(rows)
    acc = [r.get("accounting") or {} for r in ok]
    out: dict[str, Any] = {
        "n": len(ok),
        "target_n": target_n,
        "partial": len(ok) < target_n,
        "errors": len(rows) - len(ok),
        "metrics": {m: _mean([question_score(r, m) for r in ok]) for m in metrics},
        "retrieval_rate": _mean([float(bool(a.get("retrieved"))) for a in acc]),
        # Retrieved, then every passage judged irrelevant by the separate mode's filter.
        "kept_none": sum(1 for r in ok if any(step.get("action") == NO_RELEVANT_DOCUMENTS
                                             for step in r.get("reasoning_chain") or [])),
        "llm_calls_per_q": _mean([float(a.get("llm_calls") or 0) for a in acc]),
        "tokens_per_q": _mean([float(a.get("total_tokens") or 0) for a in acc]),
        "seconds_per_q": _mean([float(a.get("latency_ms") or 0) / 1000 for a in acc]),
    }
    if yes_no:
        out["metrics"]["yesno"] = _mean([yes_no_correct(r.get("prediction"), r.get("gold") or []) for r in ok])
        # The label bias in one number: how often the method says "yes", and how often it should.
        out["metrics"]["answered_yes"] = _mean([yes_no_correct(r.get("prediction"), ["yes"]) for r in ok])
        out["metrics"]["gold_yes"] = _mean([yes_no_correct("yes", r.get("gold") or []) for r in ok])
    reasons = malformed_reasons(ok)
    out["malformed"] = sum(reasons.values())
    out["malformed_reasons"] = dict(reasons)
    return out


def compare_to(rows: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], metric: str) -> dict | None:
    """Paired bootstrap of ``metric`` (method - baseline) on the questions both answered."""
    pairs = join_by_id(rows, baseline)
    if not pairs:
        return None
    a = [question_score(x, metric) for _, x, _ in pairs]
    b = [question_score(y, metric) for _, _, y in pairs]
    out = paired_bootstrap(a, b)
    if out is not None:
        out["metric"] = metric
    return out


# -- candidates: support against correctness -----------------------------------------


def support_score(candidate: dict[str, Any]) -> float | None:
    """A candidate's support: the critic's probability (``details.sup``), else its label as 1 / 0.5 / 0."""
    sup = (candidate.get("details") or {}).get("sup")
    if isinstance(sup, (int, float)) and not isinstance(sup, bool):
        return float(sup)
    label = candidate.get("support")
    return SUPPORT_LEVELS.get(label) if isinstance(label, str) else None


def support_pairs(rows: Iterable[dict[str, Any]]) -> tuple[list[float], list[float], int]:
    """Support scores of correct (F1 >= 0.5) and wrong (F1 == 0) candidates, and the questions they came from."""
    correct: list[float] = []
    wrong: list[float] = []
    questions = 0
    for r in answered(rows):
        gold = r.get("gold") or []
        seen = False
        for c in r.get("candidates") or []:
            score = support_score(c)
            if score is None:
                continue
            f1 = best_over(f1_score, str(c.get("text") or ""), gold)
            if f1 >= 0.5:
                correct.append(score)
            elif f1 == 0.0:
                wrong.append(score)
            else:
                continue
            seen = True
        questions += seen
    return correct, wrong, questions


def grounding(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Issue 17's metrics of one run, split into answerable and unanswerable questions: the mean
    over the questions where each is defined (evidence metrics are absent on unanswerable ones,
    answered accuracy on abstentions), with its n."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in answered(rows):
        groups.setdefault("answerable" if r.get("answerable", True) else "unanswerable", []).append(r)
    out = {}
    for name, recs in sorted(groups.items()):
        cell: dict[str, Any] = {"n": len(recs)}
        for m in GROUNDING_KEYS:
            values = [float(v) for v in ((r.get("metrics") or {}).get(m) for r in recs) if isinstance(v, int | float)]
            cell[m] = _mean(values)
            cell[f"{m}_n"] = len(values)
        out[name] = cell
    return out
