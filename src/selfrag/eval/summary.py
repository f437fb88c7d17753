"""Aggregating prediction records into a run summary (a pure function of the records).

Metric means are over the questions that were answered (error lines are
counted, not scored); a metric that applies to only some questions (accuracy,
retrieval recall, evidence F1) is averaged over those, with its count in
``metric_counts``. A record written before abstention metrics existed gets
them from its own answer metrics (it did not abstain), so old and resumed runs
read like new ones. With ``data.remove_gold``, ``by_answerable`` splits the
questions into ``answerable`` and ``unanswerable``.
:func:`run_status` says whether a run is complete, incomplete or failed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .evidence import ABSTENTION_METRICS, EVIDENCE_METRICS, abstention_scores
from .results import record_abstained

MAIN_METRICS = ("em", "f1", "match", "accuracy", *ABSTENTION_METRICS, *EVIDENCE_METRICS)
GROUPS = (("by_type", "type"), ("by_level", "level"), ("by_subject", "subject"))


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def record_metrics(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's metrics, with the abstention metrics filled in for a record from before them."""
    metrics = dict(rec.get("metrics") or {})
    scored = "f1" in metrics or "accuracy" in metrics
    if rec.get("error") is None and scored and "truthfulness" not in metrics:
        metrics.update(abstention_scores(record_abstained(rec), metrics))
    return metrics


def metric_means(records: Iterable[dict[str, Any]]) -> tuple[dict[str, float | None], dict[str, int]]:
    values: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        for key, value in record_metrics(rec).items():
            if isinstance(value, (int, float)):
                values[key].append(float(value))
    order = [k for k in MAIN_METRICS if k in values] + sorted(k for k in values if k not in MAIN_METRICS)
    return {k: _mean(values[k]) for k in order}, {k: len(values[k]) for k in order}


def _group(records: Sequence[dict[str, Any]], key) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        label = key(rec)
        if label not in (None, ""):
            groups[str(label)].append(rec)
    out = {}
    for label in sorted(groups):
        means, _ = metric_means(groups[label])
        out[label] = {"n": len(groups[label]), **means}
    return out


def _retrieval_label(rec: dict[str, Any]) -> str:
    return "retrieved" if (rec.get("accounting") or {}).get("retrieved") else "no retrieval"


def answerable_label(rec: dict[str, Any]) -> str:
    """``unanswerable`` for a question whose gold paragraphs were removed, else ``answerable``."""
    return "unanswerable" if rec.get("answerable") is False else "answerable"


def summarize(records: Sequence[dict[str, Any]], n_questions: int | None = None) -> dict[str, Any]:
    """Means of every metric, cost and token totals, latency percentiles, calls, breakdowns."""
    answered = [r for r in records if r.get("error") is None]
    errors = [r for r in records if r.get("error") is not None]
    acc = [r.get("accounting") or {} for r in answered]
    n = len(answered)

    def total(key: str) -> float:
        return float(sum(a.get(key, 0) or 0 for a in acc))

    latencies = [float(a["latency_ms"]) for a in acc if a.get("latency_ms") is not None]
    # A cached call takes no model time: the questions none of whose calls came from the cache time the model.
    uncached = [float(a["latency_ms"]) for a in acc if a.get("latency_ms") is not None and not a.get("cached_calls")]
    means, counts = metric_means(answered)
    cost = total("cost_usd")
    summary: dict[str, Any] = {
        "n_questions": n_questions if n_questions is not None else len(records),
        "n_answered": n,
        "n_errors": len(errors),
        "metrics": means,
        "metric_counts": counts,
        "cost_usd": {"total": cost, "per_question": cost / n if n else None},
        "tokens": {
            "total": int(total("total_tokens")),
            "prompt": int(total("prompt_tokens")),
            "completion": int(total("completion_tokens")),
            "per_question": total("total_tokens") / n if n else None,
        },
        "latency_ms": {
            "mean": _mean(latencies),
            "p50": _percentile(latencies, 50),
            "p95": _percentile(latencies, 95),
            "uncached_p50": _percentile(uncached, 50),
            "uncached_questions": len(uncached),
        },
        "llm_calls": {"total": int(total("llm_calls")), "per_question": total("llm_calls") / n if n else None},
        "retrieval_calls": {
            "total": int(total("retrieval_calls")),
            "per_question": total("retrieval_calls") / n if n else None,
        },
        "retrieval_rate": sum(1 for a in acc if a.get("retrieved")) / n if n else None,
        "cached_llm_calls": int(total("cached_calls")),
    }
    for name, field in GROUPS:
        groups = _group(answered, lambda r, f=field: r.get(f))
        if groups or name != "by_subject":
            summary[name] = groups
    summary["by_retrieval"] = _group(answered, _retrieval_label)
    if any("answerable" in r for r in records):
        summary["by_answerable"] = _group(answered, answerable_label)
    summary["errors_by_type"] = dict(
        sorted(_count(r["error"].get("type", "Error") for r in errors if isinstance(r["error"], dict)).items())
    )
    return summary


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return dict(out)


def _percent(share: float) -> str:
    return f"{share * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _first_error(records: Sequence[dict[str, Any]]) -> str:
    rec = next(r for r in records if r.get("error") is not None)
    err = rec["error"] if isinstance(rec["error"], dict) else {"message": str(rec["error"])}
    message = " ".join(str(err.get("message", "")).split())
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{rec['id']}: {err.get('type', 'Error')}: {message}"


def run_status(records: Sequence[dict[str, Any]], n_questions: int, max_error_rate: float) -> tuple[str, str | None]:
    """``incomplete``, ``failed`` with the reason, or ``complete``, from one record per question.

    A run fails when every question failed, or when the share of failed
    questions is above ``max_error_rate`` (``run.max_error_rate``). The reason
    names the first error in ``records`` order.
    """
    if len(records) < n_questions:
        return "incomplete", None
    failed = sum(1 for r in records if r.get("error") is not None)
    if not failed:
        return "complete", None
    share = failed / len(records)
    if failed == len(records):
        head = f"{failed} of {len(records)} questions failed"
    elif share > max_error_rate:
        head = (f"{failed} of {len(records)} questions failed "
                f"({_percent(share)} > run.max_error_rate {_percent(max_error_rate)})")
    else:
        return "complete", None
    return "failed", f"{head}; first: {_first_error(records)}"
