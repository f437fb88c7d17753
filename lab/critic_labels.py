"""What "right" means to the confidence head: F1 alone against F1 or a short answer naming the gold (issue 68).

    python -m lab.critic_labels [--model TAG ...]

The confidence head learns "is this answer right" from labels. Under the
benchmarks' F1 test (F1 >= 0.5 against a gold answer) a model that answers
in sentences is wrong whenever it is right: "The museum is closed on
Mondays." scores 0.29 against "Mondays". Since label rule 2 the readings
also count an answer of at most 40 words that contains a gold answer
(Self-RAG's *match*), and a choice question by its choice. From the same
readings of ``lab.critic_reads`` (rule 2; each keeps the answer's F1), two
fits on the fitting sets: one whose confidence learned F1 alone, one that
learned rule 2. On every evaluation set: the share right by each rule, each
fit's confidence AUROC and ECE against each rule, and what a user sees on the
answers rule 2 calls right: the mean confidence and the share below the
"low confidence" line. The support head (its candidates' labels are the
readings', rule 2) and the share of answerable questions the sufficiency line
flags, per fit. When ``results/critic_fits/<model>.json`` exists (the lab's
committed fit, which may have been fitted on other readings or an earlier
rule), it is measured beside the two on the same answers. Beside each ECE, the
ECE a perfectly calibrated head would show on as many items (by chance) and
the share of such heads whose ECE is at least this one (calibration p): at
100 questions a calibrated head's ECE is often above 0.08; where both are
read, HotpotQA 0-99 and 200-299 are also measured as one set of 200. No
model call.

Writes ``results/critic_labels_<model>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from lab.critic_reads import models_read
from lab.critic_report import fit_sets as fitted_on
from lab.critic_report import fmt, interval, write
from lab.critic_study import (
    FIT_SETS,
    FITS,
    _flat,
    _states,
    all_read,
    evaluation_sets,
    fit_on,
    fitting,
    items,
    measure,
    said,
)
from lab.machine import machine, machine_lines
from lab.quality_stats import paired_bootstrap
from selfrag.eval.critic_read import LABELS, RIGHT_F1
from selfrag.reflection.answer_text import LOW
from selfrag.reflection.critic_fit import CriticFit
from selfrag.reflection.heads import ece

RULES = ("F1 alone", "rule 2")
COMMITTED = "the committed lab fit"
POOLED = ("hotpotqa", "hotpotqa_next")  # two answerable HotpotQA report sets, also measured as one
CURVE = (100, 250, 500)  # the learning curve's fitting sizes (random subsets), and all
SUBSETS = 5


def by_f1(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records labelled by F1 alone (an answer without a gold answer keeps its None)."""
    return [{**r, "right": None if r.get("f1") is None else r["f1"] >= RIGHT_F1} for r in records]


def labelled(records: Sequence[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return by_f1(records) if rule == RULES[0] else list(records)


def answered(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("answer") is not None and r.get("right") is not None]


def compared(fits: dict[str, Any], records: Sequence[dict[str, Any]], mine: str = RULES[1],
             theirs: str = RULES[0], support_of: dict[str, list] | None = None) -> dict[str, Any]:
    """Against rule 2's labels: fit ``mine``'s confidence AUROC minus fit ``theirs``'s (95% paired interval
    over questions), the same for the support head, and the share of rule-2-right answers below the low
    line, ``mine`` minus ``theirs``. ``support_of``: each fit's support items, when already built."""
    rows = answered(records)
    support_of = support_of or {k: items(fits[k], records)["support"] for k in (mine, theirs)}
    a = [fits[mine].head("confidence").probability(r.get("readings") or {}, _states(r)) for r in rows]
    b = [fits[theirs].head("confidence").probability(r.get("readings") or {}, _states(r)) for r in rows]
    groups = [[(x, y, y, bool(r["right"]))] for x, y, r in zip(a, b, rows, strict=True)]
    low = [(float(x < LOW), float(y < LOW)) for x, y, r in zip(a, b, rows, strict=True) if r["right"]]
    m = measure(groups) if groups else {}
    support = [[(p, q, q, y) for (p, _, _, y), (q, _, _, _) in zip(g, h, strict=True)]
               for g, h in zip(support_of[mine], support_of[theirs], strict=True)]
    s = measure(support) if any(support) else {}
    return {"auroc_diff": _minus(m.get("auroc"), m.get("baseline_auroc")), "auroc_interval": m.get("baseline_interval"),
            "support_diff": _minus(s.get("auroc"), s.get("baseline_auroc")),
            "support_interval": s.get("baseline_interval"),
            "low_on_right_diff": paired_bootstrap([x for x, _ in low], [y for _, y in low])}


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def curve(fitted: list[dict[str, Any]], sets: dict[str, list], model: str) -> dict[str, Any]:
    """Per number of fitting questions: mean and sd over random subsets of each fit's confidence AUROC
    against rule 2's labels, on every evaluation set."""
    out: dict[str, Any] = {}
    for k in [n for n in CURVE if n < len(fitted)] + [len(fitted)]:
        per: dict[str, list[float]] = {}
        for seed in range(1 if k == len(fitted) else SUBSETS):
            subset = fitted if k == len(fitted) else random.Random(seed).sample(fitted, k)  # all: as fitted
            for rule in RULES:
                fit = fit_on(labelled(subset, rule), model)
                for name, records in sets.items():
                    value = measure(items(fit, answered(records))["confidence"])["auroc"]
                    if value is not None:
                        per.setdefault(f"{name} | {rule}", []).append(value)
        out[str(k)] = {key: [float(np.mean(v)), float(np.std(v))] for key, v in per.items()}
    return out


def measure_set(fits: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rows = answered(records)
    out: dict[str, Any] = {"answers": len(rows),
                           "right": {rule: _share([bool(r["right"]) for r in labelled(rows, rule)])
                                     for rule in RULES}}
    support_of = {k: items(fit, records)["support"] for k, fit in fits.items()}
    for fit_rule, fit in fits.items():
        for rule in RULES:
            groups = items(fit, labelled(rows, rule))["confidence"]
            m = measure(groups)
            out[f"{fit_rule} | {rule}"] = {"auroc": m["auroc"], "ece": m["ece"], "ece_by_chance": m["ece_if_calibrated"],
                                           "calibration_p": calibration_p(*_flat(groups, 0))}
        conf = fit.head("confidence")
        right = [conf.probability(r.get("readings") or {}, _states(r)) for r in rows if r["right"]]
        support = [g for g in support_of[fit_rule] if g]
        m = measure(support) if support else {}
        flags = said(fit, records) or {}
        out[f"{fit_rule} | seen"] = {"mean_on_right": _mean(right), "low_on_right": _share([p < LOW for p in right]),
                                     "support_auroc": m.get("auroc"), "support_ece": m.get("ece"),
                                     "flagged_answerable": flags.get("flagged_answerable")}
    out["versus"] = {f"{RULES[1]} - {other}": compared(fits, records, theirs=other, support_of=support_of)
                     for other in (RULES[0], COMMITTED) if other in fits}
    return out


def calibration_p(probs: Sequence[float], labels: Sequence[bool], draws: int = 1000, seed: int = 0) -> float | None:
    """The share of draws in which a perfectly calibrated head (labels drawn from its own probabilities)
    shows at least this head's ECE on these items: near 0, miscalibrated beyond what chance leaves at this
    n; near 0.5, as calibrated as a perfect head looks here."""
    if not probs:
        return None
    rng, p, seen = np.random.default_rng(seed), np.asarray(probs, dtype=float), ece(probs, labels)
    return float(np.mean([ece(probs, (rng.random(len(p)) < p).tolist()) >= seen for _ in range(draws)]))


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def model_report(model: str, fitted: list[dict[str, Any]]) -> dict[str, Any]:
    """The report from ``fitted``, the fitting sets' readings as ``fitting`` returns them (each its ``kind``)."""
    fits = {rule: fit_on(labelled(fitted, rule), model) for rule in RULES}
    if (FITS / f"{model}.json").is_file():
        fits[COMMITTED] = CriticFit.read(FITS / f"{model}.json")
    sets = evaluation_sets(model, fitted)
    if all(name in sets for name in POOLED):  # calibration read on more answers than one set holds
        sets[" + ".join(POOLED)] = [r for name in POOLED for r in sets[name]]
    report_curve = curve(fitted, sets, model)
    kinds = [r["kind"] for r in fitted]
    return {"model": model, "fitting": len(fitted), "fit_sets": {name: kinds.count(name) for name in dict.fromkeys(kinds)},
            "fitting_right": {rule: _share([bool(r["right"]) for r in labelled(fitted, rule)
                                            if r.get("right") is not None]) for rule in RULES},
            "sets": {name: measure_set(fits, records) for name, records in sets.items()}, "curve": report_curve}


def render(report: dict[str, Any], env: dict[str, Any]) -> str:
    lines = [f"# What \"right\" means to the confidence head: {report['model']}", "",
             (__doc__ or "").split("\n\n")[1].replace("\n", " "), "", *machine_lines(env), "",
             f"Fitting questions: {report['fitting']} ({fitted_on(report)}); right by F1 alone "
             f"{fmt(report['fitting_right'][RULES[0]])}, by rule 2 {fmt(report['fitting_right'][RULES[1]])}.", "",
             "| set | answers | right: F1 alone | right: rule 2 | fit | AUROC vs F1 alone | AUROC vs rule 2 | "
             "ECE vs F1 alone | ECE vs rule 2 | ECE by chance | calibration p | mean confidence on rule-2-right | below the low line "
             "| support AUROC | support ECE | answerable flagged |", "|" + "---|" * 16]
    for name, s in report["sets"].items():
        for fit_rule in [k[:-len(" | seen")] for k in s if k.endswith(" | seen")]:
            a, b, seen = s[f"{fit_rule} | {RULES[0]}"], s[f"{fit_rule} | {RULES[1]}"], s[f"{fit_rule} | seen"]
            label = fit_rule if fit_rule == COMMITTED else f"learned {fit_rule}"
            lines.append(f"| {name} | {s['answers']} | {fmt(s['right'][RULES[0]])} | {fmt(s['right'][RULES[1]])} | "
                         f"{label} | {fmt(a['auroc'])} | {fmt(b['auroc'])} | {fmt(a['ece'])} | {fmt(b['ece'])} | "
                         f"{fmt(b.get('ece_by_chance'))} | {fmt(b.get('calibration_p'))} | {fmt(seen['mean_on_right'])} | {fmt(seen['low_on_right'])} | "
                         f"{fmt(seen.get('support_auroc'))} | {fmt(seen.get('support_ece'))} | "
                         f"{fmt(seen.get('flagged_answerable'))} |")
    lines += ["", "The rule-2 fit minus another, against rule 2's labels (95% paired bootstrap over questions):", "",
              "| set | against | confidence AUROC Δ [95% CI] | support AUROC Δ [95% CI] | rule-2-right answers "
              "below the low line Δ [95% CI] |", "|---|---|---|---|---|"]
    for name, s in report["sets"].items():
        for pair, v in s.get("versus", {}).items():
            low = v.get("low_on_right_diff") or {}
            lines.append(f"| {name} | {pair.split(' - ', 1)[1]} | {_signed(v.get('auroc_diff'))} "
                         f"{interval(v.get('auroc_interval'))} | {_signed(v.get('support_diff'))} "
                         f"{interval(v.get('support_interval'))} | {_signed(low.get('diff'))} "
                         f"{interval([low['lo'], low['hi']] if low else None)} |")
    lines += ["", "Learning curve: confidence AUROC against rule 2's labels, mean ± sd over five random subsets "
              "of the fitting questions (all of them once).", "", "| fitting questions | set | learned F1 alone | "
              "learned rule 2 |", "|---|---|---|---|"]
    for k, per in (report.get("curve") or {}).items():
        for name in report["sets"]:
            cells = [per.get(f"{name} | {rule}") for rule in RULES]
            lines.append(f"| {k} | {name} | " + " | ".join("–" if c is None else f"{c[0]:.3f} ± {c[1]:.3f}"
                                                          for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="a model tag under results/runs/critic/")
    parser.add_argument("--fit-set", action="append", default=None, choices=FIT_SETS,
                        help="fit on this fitting set only (repeatable; default: every one)")
    args = parser.parse_args(argv)
    fit_sets = tuple(args.fit_set or FIT_SETS)
    env = machine()
    for model in models_read(args.model):
        fitted = fitting(model, fit_sets)  # read once: with hidden states, tens of MB per model
        if not all_read(fitted, fit_sets):
            print(f"[critic] {model}: not every fitting set of {', '.join(fit_sets)} is read; nothing to fit")
            continue
        if any(r.get("labels") != LABELS for r in fitted):
            print(f"[critic] {model}: readings written before label rule {LABELS}; read them again first")
            continue
        report = model_report(model, fitted)
        write(f"critic_labels_{model}", report, render(report, env), env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
