"""A second kind of fitting corpus for the sufficiency floor, measured (issue 68).

    python -m lab.critic_kinds [--model TAG ...]

From the readings of ``lab.critic_reads``, without a model call: the critic
fitted on the HotpotQA pool alone against the one fitted on the pool and
PubMedQA's official training ids (``pubmedqa_pool``: one-hop questions over
untitled abstract sections, the nearest other abstract in place of their own
for about half; what ``lab.critic_study`` and the package fit on). On every
evaluation set: the sufficiency head's AUROC (gold read or not) with the
95% paired bootstrap interval of the difference, and at each fit's own floor
the share of answers whose first line says the documents do not seem to
hold them, on answerable and on gold-removed questions, with truthfulness
(+1 right, 0 said so, -1 wrong). Then a learning curve in the second kind:
the pool with 0, 40, 80 and every PubMedQA training question read (five
random subsets of each size). MMLU-evidence is in neither fit: it tells
whether what the second kind taught carries to a third. Last, the same two
sets pooled (each question once) against balanced (each set's questions
weighted so that both sets count equally, as ``selfrag critic fit`` weights
its --data files), with the same curve balanced.

Writes ``results/critic_kinds_<model>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from lab.critic_reads import models_read
from lab.critic_report import fmt, interval, write
from lab.critic_study import (
    _states,
    evaluation_sets,
    fit_on,
    fitting,
    items,
    measure,
    said,
)
from lab.machine import machine, machine_lines
from lab.quality_stats import paired_bootstrap

SECOND = "pubmedqa_pool"
CURVE = (0, 40, 80)
SUBSETS = 5


def flags(fit: Any, records: Sequence[dict[str, Any]], answerable: bool) -> list[float]:
    """1 where the answer's first line would say the documents do not seem to hold it."""
    head = fit.head("sufficiency")
    return [1.0 if head.probability(r.get("readings") or {}, _states(r)) < fit.threshold else 0.0
            for r in records if r.get("answer") is not None and r["answerable"] is answerable]


def versus(one: Any, both: Any, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fit ``both`` against fit ``one`` on one set (keys "pool" and "both")."""
    mine, theirs = items(both, records)["sufficiency"], items(one, records)["sufficiency"]
    groups = [[(a[0], b[0], b[0], a[3])] for [a], [b] in zip(mine, theirs, strict=True)]
    out: dict[str, Any] = {"sufficiency": measure(groups) if groups else None,
                           "said": {"pool": said(one, records), "both": said(both, records)}}
    for answerable in (True, False):
        a, b = flags(both, records, answerable), flags(one, records, answerable)
        out["flag_diff_answerable" if answerable else "flag_diff_removed"] = paired_bootstrap(a, b)
    return out


def curve(pool: list[dict[str, Any]], second: list[dict[str, Any]], sets: dict[str, list],
          model: str, balance: bool) -> dict[str, Any]:
    """Per number of second-kind questions: mean and sd over subsets of flag shares and sufficiency AUROC."""
    out: dict[str, Any] = {}
    for k in [n for n in CURVE if n < len(second)] + [len(second)]:
        per: dict[str, dict[str, list[float]]] = {}
        for seed in range(1 if k in (0, len(second)) else SUBSETS):
            fit = fit_on(pool + random.Random(seed).sample(second, k), model, balance=balance)
            for name, recs in sets.items():
                row = per.setdefault(name, {})
                for key, answerable in (("said_answerable", True), ("said_removed", False)):
                    if f := flags(fit, recs, answerable):
                        row.setdefault(key, []).append(float(np.mean(f)))
                groups = items(fit, recs)["sufficiency"]
                if groups and len({g[0][3] for g in groups}) == 2:
                    row.setdefault("auroc", []).append(measure(groups)["auroc"])
        out[str(k)] = {name: {key: [float(np.mean(v)), float(np.std(v))] for key, v in row.items()}
                       for name, row in per.items()}
    return out


def report(model: str) -> dict[str, Any] | None:
    pool, second = fitting(model, ("pool",)), fitting(model, (SECOND,))
    if len(pool) < 20 or len(second) < 20:
        return None
    one, both = fit_on(pool, model), fit_on(pool + second, model, balance=False)
    even = fit_on(pool + second, model, balance=True)
    sets = evaluation_sets(model, pool + second)
    return {"model": model, "pool": len(pool), "second": len(second),
            "floors": {"pool": one.threshold, "both": both.threshold, "balanced": even.threshold},
            "sets": {name: versus(one, both, recs) for name, recs in sets.items()},
            "balanced": {name: versus(both, even, recs) for name, recs in sets.items()},
            "curve": curve(pool, second, sets, model, balance=False),
            "curve_balanced": curve(pool, second, sets, model, balance=True)}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _diff(d: dict[str, float] | None) -> str:
    return "–" if d is None else f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def _table(sets: dict[str, Any], names: tuple[str, str]) -> list[str]:
    one, two = names
    lines = [f"| set | sufficiency AUROC: {one} | {two} | Δ [95% CI] | said so, answerable: {one} | {two} | "
             f"Δ [95% CI] | said so, gold removed: {one} | {two} | Δ [95% CI] | truthful: {one} | {two} |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in sets.items():
        m, a, b = s["sufficiency"] or {}, s["said"]["pool"] or {}, s["said"]["both"] or {}
        lines.append(f"| {name} | {fmt(m.get('baseline_auroc'))} | {fmt(m.get('auroc'))} | "
                     f"{interval(m.get('baseline_interval'))} | {_pct(a.get('flagged_answerable'))} | "
                     f"{_pct(b.get('flagged_answerable'))} | {_diff(s['flag_diff_answerable'])} | "
                     f"{_pct(a.get('flagged_gold_removed'))} | {_pct(b.get('flagged_gold_removed'))} | "
                     f"{_diff(s['flag_diff_removed'])} | {fmt(a.get('truthful'))} | {fmt(b.get('truthful'))} |")
    return lines


def _curve_table(rows: dict[str, Any]) -> list[str]:
    lines = ["| PubMedQA questions | set | said so, answerable | said so, gold removed | sufficiency AUROC |",
             "|---|---|---|---|---|"]
    for k, per in rows.items():
        for name, row in per.items():
            cells = [f"{v[0]:.3f} ± {v[1]:.3f}" if (v := row.get(key)) else "–"
                     for key in ("said_answerable", "said_removed", "auroc")]
            lines.append(f"| {k} | {name} | " + " | ".join(cells) + " |")
    return lines


def render(rep: dict[str, Any], env: dict[str, Any]) -> str:
    floors = rep["floors"]
    lines = [f"# A second kind of fitting corpus: {rep['model']}", "", (__doc__ or "").split("\n\n")[2]
             .replace("\n", " "), "", *machine_lines(env), "",
             f"Fits: the HotpotQA pool ({rep['pool']} questions; floor {floors['pool']:.3f}) against the pool "
             f"and {rep['second']} PubMedQA training questions (floor {floors['both']:.3f}).", "",
             *_table(rep["sets"], ("pool", "both")), "",
             "Learning curve in the second kind (the whole pool always; mean ± sd over random subsets of the "
             "PubMedQA training questions).", "", *_curve_table(rep["curve"])]
    if "balanced" in rep:
        lines += ["", "## Each kind weighted equally", "",
                  f"The same two fitting sets, each question once (\"pooled\", floor {floors['both']:.3f}) against "
                  f"each set's questions weighted so that both sets count equally in every head and in the floor "
                  f"(\"balanced\", floor {floors['balanced']:.3f}).", "",
                  *_table(rep["balanced"], ("pooled", "balanced")), "",
                  "Learning curve in the second kind, balanced.", "", *_curve_table(rep["curve_balanced"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="a model tag under results/runs/critic/")
    args = parser.parse_args(argv)
    env = machine()
    for model in models_read(args.model):
        rep = report(model)
        if rep is None:
            print(f"[critic] {model}: fewer than 20 questions read of the pool or of {SECOND}; nothing to compare")
            continue
        write(f"critic_kinds_{model}", rep, render(rep, env), env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
