"""How well a run's confidence knows when its answers are wrong, and fitting the confidence rule.

Each record of a run whose method read a confidence (``details.confidence``)
carries its signals and value; an answer is *right* by
:func:`~.evidence.is_correct` (token F1 at least 0.5, or the gold label).
:func:`measure` gives, for the confidence and for each signal alone, the
AUROC of right against wrong answers, and for the confidence the
risk-coverage curve (answering the most confident first), its area and
the share right at 50% and 80% coverage. :func:`fit_runs` fits the rule
(:func:`selfrag.reflection.confidence.fit`) on development runs and writes
it where ``self_rag.confidence_model`` can name it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..reflection.confidence import (
    SIGNALS,
    ConfidenceModel,
    Signals,
    area_under,
    auroc,
    fit,
    quality_at,
    risk_coverage,
)
from .evidence import is_correct
from .results import read_predictions

PREDICTIONS = "predictions.jsonl"


def confidence_rows(records: Iterable[Mapping[str, Any]]) -> list[tuple[Signals, float | None, bool, str]]:
    """(signals, confidence, right, question id) of every answered record that read a confidence."""
    out = []
    for record in records:
        if record.get("abstained") or record.get("error"):
            continue
        conf = (record.get("details") or {}).get("confidence")
        if not isinstance(conf, Mapping):
            continue
        signals = Signals.from_mapping(conf.get("signals") or {})
        value = conf.get("confidence")
        out.append((signals, None if value is None else float(value), is_correct(record.get("metrics") or {}),
                    str(record.get("id", ""))))
    return out


def read_run(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / PREDICTIONS
    records = read_predictions(path)
    if not records:
        raise DataError(f"{run_dir}: no answered questions in {PREDICTIONS}; give a run directory of `selfrag run`")
    return records


def measure(rows: Sequence[tuple[Signals, float | None, bool, str]]) -> dict[str, Any]:
    """AUROC of the confidence and of each signal alone; the confidence's risk-coverage figures."""
    right = [r for _, _, r, _ in rows]
    out: dict[str, Any] = {"n": len(rows), "right": sum(right), "auroc": {}}
    scored = [(c if c is not None else 0.0) for _, c, _, _ in rows]
    out["auroc"]["confidence"] = auroc(scored, right) if rows else None
    for name in SIGNALS:
        values = [getattr(s, name) for s, _, _, _ in rows]
        known = [(v, r) for v, r in zip(values, right, strict=True) if v is not None]
        out["auroc"][name] = auroc([v for v, _ in known], [r for _, r in known]) if known else None
    curve = risk_coverage(scored, [float(r) for r in right])
    out["risk_coverage_area"] = area_under(curve)
    out["right_at_50"] = quality_at(curve, 0.5)
    out["right_at_80"] = quality_at(curve, 0.8)
    out["curve"] = [(round(c, 4), round(q, 4)) for c, q in curve]
    return out


def fit_runs(run_dirs: Sequence[str | Path], out: str | Path, features: Sequence[str] = SIGNALS,
             l2: float = 1.0) -> tuple[ConfidenceModel, dict[str, Any]]:
    """Fit the confidence rule on the answered records of ``run_dirs``, write it to ``out``; the model
    and its in-sample measurement."""
    unknown = set(features) - set(SIGNALS)
    if unknown:
        raise DataError(f"unknown signal(s) {sorted(unknown)}; use: {', '.join(SIGNALS)}")
    runs = {str(d): read_run(d) for d in run_dirs}
    rows = [row for recs in runs.values() for row in confidence_rows(recs)]
    if not rows:
        raise DataError("no record read a confidence: run the method with confidence: reflection first")
    right = [r for _, _, r, _ in rows]
    if all(right) or not any(right):
        raise DataError(f"all {len(rows)} answers are {'right' if right[0] else 'wrong'}: a fit needs both")
    # A signal no record read would cost its calls at every answer for a weight fitted on nothing.
    read = [f for f in features if any(getattr(s, f) is not None for s, _, _, _ in rows)]
    if not read:
        raise DataError(f"no record read any of the signals {', '.join(features)}; run the method with them first")
    features = read
    models = sorted({str(r.get("model")) for recs in runs.values() for r in recs if r.get("model")})
    names = ", ".join("/".join(Path(d).resolve().parts[-3:]) for d in run_dirs)  # never a whole local path
    source = (f"fitted on {len(rows)} answers ({sum(right)} right) of {', '.join(models) or 'an unnamed model'} "
              f"in {names}, on {time.strftime('%Y-%m-%d')}")
    model = fit([s for s, _, _, _ in rows], right, features, l2=l2, source=source)
    refit = [(s, model.score(s), r, q) for s, _, r, q in rows]
    Path(out).write_text(json.dumps(model.as_dict(), indent=2) + "\n", encoding="utf-8")
    return model, measure(refit)
