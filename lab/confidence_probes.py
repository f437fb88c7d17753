"""Is this answer right, given that the documents held it? The confidence's hidden-state choices, held out (issue 68).

    python -m lab.confidence_probes [--model TAG ...] [--against FIT.json]

The fitted critic's confidence says how likely an answer is right when the
documents hold it. ``selfrag critic fit`` builds it from the answer's scalar
readings and, when cross-validation says it helps, one recorded hidden state:
either its first 8 principal directions or a probe of the whole state (one
direction fitted to the labels; :func:`selfrag.reflection.heads.fit_head`).
This study fits every one of those choices separately, with the library's
own code, on the answerable questions of the fitting sets
(:data:`lab.critic_study.FIT_SETS`, each kind counted equally), and
measures each on the evaluation sets' answerable questions, which none was
fitted on: AUROC and ECE, with the 95% paired bootstrap interval of its
AUROC minus the readings-only head's (does the state add anything?), every
set pooled as well. Beside them: the sequence probability, the lab fit's
confidence (``results/critic_fits/<model>.json``) and, with ``--against``,
another fit's (an earlier one), each with its interval against the lab
fit's. A learning curve follows for the choice the fitting questions' cross-
validated AUROC picks (100, 250 and all fitting answers; five random subsets
below all). Needs the full reading files (hidden states). No model call.

Writes ``results/confidence_probes.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab.critic_reads import models_read, readings_path
from lab.critic_report import fmt, interval, write
from lab.critic_study import (
    FIT_SETS,
    FITS,
    _diff,
    _states,
    cluster_interval,
    evaluation_sets,
    fitting,
)
from lab.machine import machine, machine_lines
from selfrag.eval.critic_fit import DIRECTIONS, POSITIONS, kind_weights, recorded_state
from selfrag.methods.critique.signals import ANSWER, CALLED
from selfrag.reflection.critic_fit import CriticFit
from selfrag.reflection.heads import Head, auroc, ece, fit_head

READINGS = tuple(f for f in ANSWER if f not in CALLED)  # what the answer's own pass gives, no extra call
CURVE, SUBSETS = (100, 250), 5
POOLED = "all held out"  # every evaluation set's answerable questions together, each question once


def answerable(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answered questions whose gold was kept, with a label and every recorded position's states."""
    return [r for r in records if r.get("answer") is not None and r.get("right") is not None
            and r.get("answerable", True) and all((r.get("states") or {}).get(where) for where in POSITIONS)]


def choices(pool: list[dict[str, Any]], seed: int = 0) -> dict[str, Head]:
    """Every head the fit may choose for the confidence, each fitted on ``pool``."""
    rows = [r.get("readings") or {} for r in pool]
    labels = [bool(r["right"]) for r in pool]
    weights = kind_weights([r.get("kind") for r in pool])
    out = {"readings": fit_head("confidence", rows, labels, READINGS, seed=seed, weights=weights)}
    layers = sorted({int(k) for r in pool[:1] for k in (r.get("states") or {}).get(POSITIONS[0], {})})
    for where in POSITIONS:
        for layer in layers:
            states = [recorded_state(r, where, layer) for r in pool]
            for probe in (False, True):
                head = fit_head("confidence", rows, labels, READINGS, states=states, where=where, layer=layer,
                                k=DIRECTIONS, probe=probe, seed=seed, weights=weights)
                out[head.hidden.label] = head
                print(f"[probes] {head.hidden.label}: CV AUROC {head.report['cv_auroc']:.3f}", flush=True)
    return out


def scores(head: Head, records: Sequence[dict[str, Any]]) -> list[float]:
    return [head.probability(r.get("readings") or {}, _states(r)) for r in records]


def versus(p: Sequence[float], base: Sequence[float], labels: Sequence[bool]) -> list[float] | None:
    """95% paired bootstrap interval over questions of AUROC(p) - AUROC(base)."""
    return cluster_interval([[(a, b, None, y)] for a, b, y in zip(p, base, labels, strict=True)],
                            lambda g: _diff(g, 1))


def model_report(model: str, against: Path | None) -> dict[str, Any] | None:
    fitted = fitting(model)
    pool = answerable(fitted)
    if not readings_path(model, FIT_SETS[0]).is_file() or len(pool) < 50:
        return None
    heads = choices(pool)
    refs = {"lab fit": CriticFit.read(FITS / f"{model}.json").head("confidence")} if (FITS / f"{model}.json").is_file() \
        else {}
    if against is not None:
        refs["against"] = CriticFit.read(against).head("confidence")
    refs = {k: h for k, h in refs.items() if h is not None}  # a fit without a confidence has nothing to compare
    evals = {name: answerable(recs) for name, recs in evaluation_sets(model, fitted).items() if answerable(recs)}
    evals[POOLED] = list({r["id"]: r for recs in evals.values() for r in recs}.values())
    best = max(heads, key=lambda k: heads[k].report["cv_auroc"] or 0)
    out: dict[str, Any] = {"model": model, "fitting_answers": len(pool), "chosen": best, "sets": {},
                           "choices": {k: h.report["cv_auroc"] for k, h in heads.items()},
                           "references": {k: None if h.hidden is None else h.hidden.label for k, h in refs.items()}}
    for name, recs in evals.items():
        labels = [bool(r["right"]) for r in recs]
        if len(set(labels)) < 2:
            continue
        base = scores(heads["readings"], recs)
        row: dict[str, Any] = {"n": len(recs), "right": int(sum(labels)),
                               "sequence probability": {"auroc": auroc([float((r.get("readings") or {})
                                                                              .get("seq") or 0) for r in recs], labels)}}
        for key, head in heads.items():
            p = scores(head, recs)
            row[key] = {"auroc": auroc(p, labels), "ece": ece(p, labels), "vs": versus(p, base, labels)}
        lab = scores(refs["lab fit"], recs) if "lab fit" in refs else None
        for key, head in refs.items():
            p = scores(head, recs)
            row[key] = {"auroc": auroc(p, labels), "ece": ece(p, labels),
                        "vs": versus(lab, p, labels) if key != "lab fit" and lab else None}
        out["sets"][name] = row
    out["curve"] = curve(pool, best, evals)
    return out


def curve(pool: list[dict[str, Any]], key: str, evals: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The chosen head's held-out AUROC per set at each fitting size (mean over random subsets)."""
    where, layer = key.split()[-1].split("@") if "@" in key else ("", "-1")
    rows: dict[str, Any] = {}
    for n in (*[c for c in CURVE if c < len(pool)], len(pool)):
        found: dict[str, list[float]] = {}
        for seed in range(1 if n == len(pool) else SUBSETS):
            part = pool if n == len(pool) else random.Random(seed).sample(pool, n)
            labels = [bool(r["right"]) for r in part]
            if min(sum(labels), len(labels) - sum(labels)) < 5:
                continue
            states = None if key == "readings" else [recorded_state(r, where, int(layer)) for r in part]
            head = fit_head("confidence", [r.get("readings") or {} for r in part], labels, READINGS, states=states,
                            where=where, layer=int(layer), k=DIRECTIONS, probe=key.startswith("probe"),
                            weights=kind_weights([r.get("kind") for r in part]))
            for name, recs in evals.items():
                if (value := auroc(scores(head, recs), [bool(r["right"]) for r in recs])) is not None:
                    found.setdefault(name, []).append(value)
        rows[str(n)] = {name: float(np.mean(v)) for name, v in found.items()}
    return rows


def render(reports: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = ["# The confidence's hidden-state choices, held out", "",
             " ".join((__doc__ or "").split("\n\n")[2].split()), "", *machine_lines(env)]
    for rep in reports:
        keys = list(rep["choices"]) + list(rep["references"])
        lines += ["", f"## {rep['model']}", "", f"Fitted on {rep['fitting_answers']} answerable fitting questions; "
                  f"their cross-validated AUROC picks `{rep['chosen']}`. References: "
                  + "; ".join(f"{k} reads {v or 'no state'}" for k, v in rep["references"].items()) + ".", "",
                  "| choice | CV AUROC (fitting) |", "|---|---|"]
        lines += [f"| {k} | {fmt(v)} |" for k, v in rep["choices"].items()]
        lines += ["", "Held out, answerable questions only: AUROC (ECE) [interval: minus the readings-only head's; "
                  "for `against`, the lab fit's minus its].", ""]
        for name, s in rep["sets"].items():
            lines += [f"**{name}** ({s['n']} answers, {s['right']} right; sequence probability "
                      f"{fmt(s['sequence probability']['auroc'])}): " + "; ".join(
                          f"{k} {fmt(s[k]['auroc'])} ({fmt(s[k]['ece'])}) {interval(s[k]['vs'])}".rstrip()
                          for k in keys if k in s), ""]
        lines += [f"Learning curve of `{rep['chosen']}` (held-out AUROC; mean of {SUBSETS} random subsets "
                  "below all):", "", "| fitting answers | " + " | ".join(rep["sets"]) + " |",
                  "|---|" + "---|" * len(rep["sets"])]
        lines += [f"| {n} | " + " | ".join(fmt(row.get(s)) for s in rep["sets"]) + " |" for n, row in rep["curve"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="a model tag under results/runs/critic/")
    parser.add_argument("--against", type=Path, default=None, help="another fit file whose confidence to compare")
    args = parser.parse_args(argv)
    reports = [rep for model in models_read(args.model) if (rep := model_report(model, args.against)) is not None]
    env = machine()
    write("confidence_probes", {"models": reports}, render(reports, env), env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
