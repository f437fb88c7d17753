"""Fitting ``adaptive_rag``'s router on runs of its strategies over the same questions.

``selfrag router fit RUN_DIR... --out FILE`` reads one run directory per
strategy (``no_retrieval``, ``vanilla_rag``, ``ircot``: the method is read off
the records), keeps the questions every run answered, labels each with the
cheapest strategy that answered it right (:func:`~.evidence.is_correct`: F1
at least 0.5, or the gold label), else the one with the best F1, and fits the
router (:func:`selfrag.reflection.router.fit_router`) on the features of the
question's text. The fit file records the runs, the labels and what routing
by it would have given out of fold: F1 and calls against each strategy alone
and against the oracle that always picks the label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..reflection.router import STRATEGIES, Router, features, fit_router, label
from .confidence import read_run
from .evidence import is_correct
from .results import unique_records

MIN_QUESTIONS = 4


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    path: str
    records: dict[str, dict[str, Any]]  # question id -> its answered record
    model: str


def read_strategy_run(run_dir: str | Path) -> StrategyRun:
    """One run directory's answered records and the strategy (method) that wrote them."""
    if not Path(run_dir).is_dir():
        raise DataError(f"{run_dir}: no such run directory; give run directories of `selfrag run`")
    records, _ = unique_records(read_run(run_dir))
    answered = [r for r in records if r.get("error") is None and r.get("prediction") is not None]
    methods = sorted({str(r.get("method")) for r in answered})
    if len(methods) != 1:
        raise DataError(f"{run_dir}: its answers come from {', '.join(methods) or 'no method'}; give one run "
                        "directory per strategy")
    method = methods[0]
    if method not in STRATEGIES:
        raise DataError(f"{run_dir}: a run of {method}, which adaptive_rag does not route to; give runs of "
                        f"{', '.join(STRATEGIES)}")
    models = sorted({str(r.get("model") or "") for r in answered})
    return StrategyRun(method, str(run_dir), {str(r["id"]): r for r in answered}, models[0] if len(models) == 1 else "")


def read_strategy_runs(run_dirs: Sequence[str | Path]) -> dict[str, StrategyRun]:
    """The runs by strategy: one per strategy, at least two strategies, one model."""
    runs: dict[str, StrategyRun] = {}
    for d in run_dirs:
        run = read_strategy_run(d)
        if run.strategy in runs:
            raise DataError(f"{runs[run.strategy].path} and {d} are both runs of {run.strategy}; give one run "
                            "directory per strategy")
        runs[run.strategy] = run
    if len(runs) < 2:
        raise DataError(f"give runs of at least two of {', '.join(STRATEGIES)} over the same questions "
                        f"(got {', '.join(runs) or 'none'})")
    models = sorted({r.model for r in runs.values()})
    if len(models) > 1:
        raise DataError(f"the runs are of different models ({', '.join(m or '?' for m in models)}); a router is "
                        "fitted on one model's runs")
    return {s: runs[s] for s in STRATEGIES if s in runs}


@dataclass(frozen=True)
class Labelled:
    ids: list[str]
    questions: list[str]
    labels: list[str | None]  # None: no strategy right and all the same F1 (not fitted on)
    f1: dict[str, list[float]]  # strategy -> each question's F1
    calls: dict[str, list[float]]  # strategy -> each question's LLM calls
    skipped: int  # questions some run did not answer


def labelled(runs: Mapping[str, StrategyRun]) -> Labelled:
    """The questions every run answered, each with its label and every strategy's F1 and calls."""
    first = next(iter(runs.values()))
    ids = [q for q in first.records if all(q in r.records for r in runs.values())]
    every = set().union(*(r.records for r in runs.values()))
    if len(ids) < MIN_QUESTIONS:
        raise DataError(f"the runs share {len(ids)} answered question(s); a router needs at least {MIN_QUESTIONS} "
                        "questions answered by every strategy")
    questions, labels = [], []
    f1: dict[str, list[float]] = {s: [] for s in runs}
    calls: dict[str, list[float]] = {s: [] for s in runs}
    for q in ids:
        text = first.records[q].get("question")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{first.path}: question {q} has no question text; give runs written by `selfrag run`")
        results = {}
        for s, run in runs.items():
            metrics = run.records[q].get("metrics") or {}
            results[s] = (float(metrics.get("f1", 0.0)), is_correct(metrics))
            f1[s].append(results[s][0])
            calls[s].append(float((run.records[q].get("accounting") or {}).get("llm_calls", 0)))
        questions.append(text)
        labels.append(label(results))
    return Labelled(ids, questions, labels, f1, calls, len(every) - len(ids))


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def routed(data: Labelled, choices: Sequence[str]) -> dict[str, Any]:
    """Mean F1 and calls when each question goes where ``choices`` says, and the share sent to each."""
    f1 = [data.f1[c][i] for i, c in enumerate(choices)]
    calls = [data.calls[c][i] for i, c in enumerate(choices)]
    shares = {s: round(sum(c == s for c in choices) / len(choices), 4) for s in data.f1}
    return {"f1": _mean(f1), "calls": _mean(calls), "shares": shares}


def fit_runs(run_dirs: Sequence[str | Path], out: str | Path) -> tuple[Router, dict[str, Any]]:
    """Fit the router on ``run_dirs`` and write it to ``out``; returns it and its report."""
    runs = read_strategy_runs(run_dirs)
    data = labelled(runs)
    rows = [features(q) for q in data.questions]
    told = [i for i, y in enumerate(data.labels) if y is not None]
    try:
        router, oof = fit_router([rows[i] for i in told], [data.labels[i] for i in told])
    except ValueError as exc:
        raise DataError(f"cannot fit a router on these runs: {exc} (questions that told the strategies apart: "
                        f"{len(told)} of {len(data.ids)})") from None
    # Every question routed as a new one would be: the fitted ones out of fold, the rest by the whole fit.
    choices = [router.choose(r) for r in rows]
    for i, c in zip(told, oof, strict=True):
        choices[i] = c
    report = dict(router.meta["report"])
    report["questions"] = len(data.ids)
    report["alone"] = {s: {"f1": _mean(data.f1[s]), "calls": _mean(data.calls[s])} for s in runs}
    report["routed_out_of_fold"] = routed(data, choices)
    # The oracle sends a question nothing told apart to the cheapest strategy.
    report["oracle"] = routed(data, [y or next(iter(runs)) for y in data.labels])
    meta = {
        "fitted_on": {"runs": [{"strategy": s, "run_dir": str(Path(r.path).resolve())} for s, r in runs.items()],
                      "questions": len(data.ids), "skipped": data.skipped,
                      "label": "the cheapest strategy whose answer was right (F1 >= 0.5, or the gold label), "
                               "else the one with the best F1; a question every strategy got wrong with the "
                               "same F1 is not fitted on"},
        "report": report,
    }
    router = replace(router, model=next(iter(runs.values())).model, meta=meta)
    router.write(out)
    return router, report
