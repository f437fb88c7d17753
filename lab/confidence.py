"""Does the confidence know when an answer is wrong? Measured on the quality runs, beside two baselines.

    python -m lab.confidence                       # every model with runs on disk
    python -m lab.confidence --fit-out PATH         # also write the development fit of the first model
    python -m lab.confidence --method NAME          # another self_rag variant's runs (confidence_NAME.md)

For each model it reads the ``self_rag`` and ``vanilla_rag_evidence`` runs of
``lab/results/runs/quality/<model>/`` and:

1. takes the rule selfrag ships (fitted on the 1.5B model's ``self_rag``
   answers to the development sample, HotpotQA questions 0-99, ``hotpotqa``;
   never on the test sample), and refits it on each model's own
   development answers for comparison;
2. on the test sample (HotpotQA questions 200-299, ``hotpotqa_next``) gives
   the AUROC of right (F1 >= 0.5) against wrong answers for the fitted
   confidence, for ``vanilla_rag_evidence``'s answer sequence probability
   and for P(True) (the two baselines), with paired bootstrap intervals of
   the differences (questions resampled), each signal's own AUROC (the
   support readings), and the risk-coverage curve, its area and the share
   right at 50% and 80% coverage, for the three;
3. on ``hotpotqa_mix`` and ``hotpotqa_mix_next`` (about half the questions
   without their gold paragraphs; the first asks the development questions
   again, the second questions 300-399) abstains below the threshold that
   maximised truthfulness on the development sample, and compares the
   truthfulness with ``vanilla_rag_evidence`` abstaining by its sequence
   probability on as many questions.

It writes ``results/confidence.md`` / ``.json`` / ``.png``. Nothing here calls
a model.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path
from typing import Any

from lab.confidence_drafts import (
    OTHER_DRAFTS,
    drafts_report,
    fmt,
    joint_drafts_report,
    render_drafts,
    render_joint_drafts,
)
from lab.machine import machine
from lab.quality_kept import predictions
from lab.quality_stats import read_predictions
from selfrag.eval.confidence import confidence_rows
from selfrag.normalize import normalize_answer
from selfrag.reflection.confidence import (
    SIGNALS,
    ConfidenceModel,
    Signals,
    area_under,
    auroc,
    fit,
    quality_at,
    risk_coverage,
)

HERE = Path(__file__).resolve().parent
RUNS = HERE / "results" / "runs" / "quality"
RESAMPLES = 2000
DEV, TEST, MIX = "hotpotqa", "hotpotqa_next", "hotpotqa_mix"
# hotpotqa_mix asks the development questions again (half without their gold paragraphs), so the rule
# has seen the answerable half; hotpotqa_mix_next asks questions 300-399, which no rule was fitted on.
MIXES = (MIX, "hotpotqa_mix_next")
METHOD, BASELINE = "self_rag", "vanilla_rag_evidence"


def records(model: str, dataset: str, variant: str) -> list[dict[str, Any]]:
    dest = RUNS / model / dataset / variant
    return read_predictions(predictions(dest)) if dest.is_dir() else []


def rows_by_id(recs: list[dict[str, Any]]) -> dict[str, tuple[Signals, float | None, bool]]:
    return {q: (s, c, r) for s, c, r, q in confidence_rows(recs)}


def bootstrap_diff(a: list[float], b: list[float], right: list[bool], seed: int = 0) -> tuple[float, float]:
    """95% interval of AUROC(a) - AUROC(b) over the same questions, resampled with replacement."""
    rng = random.Random(seed)
    n, diffs = len(right), []
    for _ in range(RESAMPLES):
        idx = [rng.randrange(n) for _ in range(n)]
        r = [right[i] for i in idx]
        x, y = auroc([a[i] for i in idx], r), auroc([b[i] for i in idx], r)
        if x is not None and y is not None:
            diffs.append(x - y)
    diffs.sort()
    return diffs[int(0.025 * len(diffs))], diffs[int(0.975 * len(diffs)) - 1]


def truthfulness(scores: list[float], right: list[bool], threshold: float) -> tuple[float, float]:
    """(coverage, mean truthfulness) abstaining below ``threshold``: right +1, wrong -1, abstained 0."""
    kept = [r for s, r in zip(scores, right, strict=True) if s >= threshold]
    total = sum(1 if r else -1 for r in kept)
    return len(kept) / len(right), total / len(right)


def best_threshold(scores: list[float], right: list[bool]) -> float:
    """The threshold with the highest truthfulness (the lowest such, so fewer abstentions)."""
    candidates = sorted(set(scores)) + [math.inf]
    return max(candidates, key=lambda t: (truthfulness(scores, right, t)[1], -t))


def keep_top(scores: list[float], right: list[bool], answered: int) -> float:
    """Mean truthfulness answering only the ``answered`` highest scores (ties in order)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:answered]
    return sum(1 if right[i] else -1 for i in order) / len(right)


def model_report(model: str, method: str = METHOD) -> dict[str, Any] | None:
    dev = confidence_rows(records(model, DEV, method))
    test = rows_by_id(records(model, TEST, method))
    base = rows_by_id(records(model, TEST, BASELINE))
    if len(dev) < 10 or not test:
        return None
    rule = ConfidenceModel.load()  # the rule selfrag ships, fitted on the 1.5B model's development answers
    refit = fit([s for s, _, _, _ in dev], [r for _, _, r, _ in dev], rule.features, source=f"{model} {DEV}")
    ids = [q for q in test if q in base and base[q][0].seq is not None]
    right = [test[q][2] for q in ids]
    conf = [rule.score(test[q][0]) for q in ids]
    seq_base = [base[q][0].seq for q in ids]
    p_true = [test[q][0].p_true if test[q][0].p_true is not None else 0.5 for q in ids]
    out: dict[str, Any] = {"model": model, "method": method, "n_dev": len(dev), "n_test": len(ids), "right_test": sum(right),
                           "rule": rule.as_dict()}
    out["auroc"] = {"confidence": auroc(conf, right), "sequence (vanilla_rag_evidence)": auroc(seq_base, right),
                    "p_true": auroc(p_true, right),
                    "refit on this model's development answers": auroc([refit.score(test[q][0]) for q in ids], right)}
    # The same scores against a lenient "right": F1 >= 0.5, or one answer contains the other (how much
    # of the miss is the metric's: a right answer in other words).
    by_id = {str(r.get("id")): r for r in records(model, TEST, method)}
    loose = [right[i] or contains_gold(by_id.get(q, {})) for i, q in enumerate(ids)]
    out["auroc_lenient"] = {"right": sum(loose), "confidence": auroc(conf, loose),
                            "sequence (vanilla_rag_evidence)": auroc(seq_base, loose), "p_true": auroc(p_true, loose)}
    out["refit"] = refit.as_dict()
    out["diff"] = {"vs sequence": bootstrap_diff(conf, seq_base, right),
                   "vs p_true": bootstrap_diff(conf, p_true, right)}
    out["signals"] = {}
    for name in SIGNALS:
        pairs = [(getattr(test[q][0], name), test[q][2]) for q in ids if getattr(test[q][0], name) is not None]
        out["signals"][name] = (auroc([v for v, _ in pairs], [r for _, r in pairs]) if pairs else None, len(pairs))
    out["coverage"] = {}
    for name, scores in (("confidence", conf), ("sequence", seq_base), ("p_true", p_true)):
        curve = risk_coverage(scores, [float(r) for r in right])
        out["coverage"][name] = {"area": area_under(curve), "at_50": quality_at(curve, 0.5),
                                 "at_80": quality_at(curve, 0.8), "curve": curve}
    out["abstention"] = {mix: mix_report(model, rule, dev, method, mix) for mix in MIXES}
    out["drafts"] = {"development": drafts_report(records(model, DEV, method)),
                     "test": drafts_report(records(model, TEST, method))}
    out["joint_drafts"] = joint_drafts_report(records(model, TEST, method),
                                              {v: records(model, TEST, v) for v in OTHER_DRAFTS})
    return out


def contains_gold(record: dict[str, Any]) -> bool:
    """The normalised answer contains a gold answer or is contained in one."""
    answer = normalize_answer(str(record.get("prediction") or ""))
    golds = record.get("gold") or []
    golds = golds if isinstance(golds, list) else [golds]
    return bool(answer) and any((g := normalize_answer(str(gold))) and (g in answer or answer in g) for gold in golds)


def bootstrap_truth_diff(scores: list[float], right: list[bool], threshold: float, base_scores: list[float],
                         base_right: list[bool], seed: int = 0) -> tuple[float, float]:
    """95% interval of (truthfulness abstaining below ``threshold``) minus (the baseline answering as many
    of its highest scores), the questions resampled with replacement."""
    rng = random.Random(seed)
    n, diffs = len(right), []
    for _ in range(RESAMPLES):
        idx = [rng.randrange(n) for _ in range(n)]
        mine = [scores[i] for i in idx]
        answered = sum(v >= threshold for v in mine)
        diffs.append(truthfulness(mine, [right[i] for i in idx], threshold)[1]
                     - keep_top([base_scores[i] for i in idx], [base_right[i] for i in idx], answered))
    diffs.sort()
    return diffs[int(0.025 * len(diffs))], diffs[int(0.975 * len(diffs)) - 1]


def mix_report(model: str, rule: Any, dev: list, method: str = METHOD, mix: str = MIX) -> dict[str, Any] | None:
    mine = rows_by_id(records(model, mix, method))
    theirs = rows_by_id(records(model, mix, BASELINE))
    mix_ids = [q for q in mine if q in theirs and theirs[q][0].seq is not None]
    if not mix_ids:
        return None
    threshold = best_threshold([rule.score(s) for s, _, _, _ in dev], [r for _, _, r, _ in dev])
    scores = [rule.score(mine[q][0]) for q in mix_ids]
    right = [mine[q][2] for q in mix_ids]
    coverage, truth = truthfulness(scores, right, threshold)
    answered = sum(s >= threshold for s in scores)
    base_right = [theirs[q][2] for q in mix_ids]
    base_seq = [theirs[q][0].seq for q in mix_ids]
    p_true = [mine[q][0].p_true if mine[q][0].p_true is not None else 0.5 for q in mix_ids]
    aurocs = {"confidence": auroc(scores, right), "sequence": auroc(base_seq, base_right), "p_true": auroc(p_true, right)}
    return {"n": len(mix_ids), "auroc": aurocs, "vs_sequence": bootstrap_diff(scores, base_seq, right),
            "vs_p_true": bootstrap_diff(scores, p_true, right),
            "threshold": threshold, "coverage": coverage, "truthfulness": truth,
            "answer_all": sum(1 if r else -1 for r in right) / len(right),
            "baseline_truthfulness_same_coverage": keep_top(base_seq, base_right, answered),
            "baseline_answer_all": sum(1 if r else -1 for r in base_right) / len(base_right),
            "difference_interval": bootstrap_truth_diff(scores, right, threshold, base_seq, base_right)}


def render(reports: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = ["# Confidence: does it know when the answer is wrong?", "",
             f"{env.get('date')}, {env.get('platform')}, {env.get('cpu_count')} CPUs, commit {env.get('commit')}. "
             "Written by `python -m lab.confidence` from the quality runs (no model call). Right: F1 >= 0.5. "
             f"The shipped rule was fitted on HotpotQA 0-99 (`{DEV}`); everything below is measured on 200-299 "
             f"(`{TEST}`).", ""]
    for rep in reports:
        lines += [f"## {rep['model']}" + (f" (`{rep['method']}`)" if rep["method"] != METHOD else ""), "",
                  f"Fitted on {rep['n_dev']} development answers; measured on {rep['n_test']} test answers "
                  f"({rep['right_test']} right).", "",
                  "| score | AUROC | risk-coverage area | right at 50% | right at 80% |", "|---|---|---|---|---|"]
        names = {"confidence": "confidence", "sequence (vanilla_rag_evidence)": "sequence", "p_true": "p_true"}
        refit = rep["auroc"]["refit on this model's development answers"]
        for label, key in names.items():
            cov = rep["coverage"][key]
            lines.append(f"| {label} | {fmt(rep['auroc'][label])} | {fmt(cov['area'])} | {fmt(cov['at_50'])} | "
                         f"{fmt(cov['at_80'])} |")
        lo, hi = rep["diff"]["vs sequence"]
        lo2, hi2 = rep["diff"]["vs p_true"]
        loose = rep["auroc_lenient"]
        lines += ["", f"The rule refitted on this model's own development answers: AUROC {fmt(refit)}.", "",
                  f"With a lenient right (F1 >= 0.5, or the answer contains a gold answer or is contained in one: "
                  f"{loose['right']} right): confidence {fmt(loose['confidence'])}, sequence "
                  f"{fmt(loose['sequence (vanilla_rag_evidence)'])}, P(True) {fmt(loose['p_true'])}.", "",
                  f"AUROC difference, confidence − sequence: [{lo:+.3f}, {hi:+.3f}]; "
                  f"confidence − P(True): [{lo2:+.3f}, {hi2:+.3f}] (paired bootstrap, {RESAMPLES} resamples).", "",
                  "Each signal alone (the support readings among them), on the same answers:", "",
                  "| signal | AUROC | n |", "|---|---|---|"]
        lines += [f"| `{k}` | {fmt(v)} | {n} |" for k, (v, n) in rep["signals"].items()]
        weights = ", ".join(f"`{f}` {w:+.2f}" for f, w in zip(rep["rule"]["features"], rep["rule"]["weights"],
                                                                 strict=True))
        lines += ["", f"Fitted weights per standard deviation: {weights}; intercept {rep['rule']['intercept']:+.2f}.", ""]
        for name, mix in (rep.get("abstention") or {}).items():
            if not mix:
                continue
            seen = " (the development questions again: the rule has seen the answerable half)" if name == MIX else \
                " (questions 300-399: no rule was fitted on them)"
            lines += [f"`{name}`{seen}, {mix['n']} questions, about half without their gold paragraphs: abstaining "
                      f"below {mix['threshold']:.3g} (chosen on the development sample) answers {mix['coverage']:.0%} "
                      f"with truthfulness {mix['truthfulness']:+.3f} (answering all: {mix['answer_all']:+.3f}); "
                      f"`{BASELINE}` abstaining by its sequence probability on as many questions: "
                      f"{mix['baseline_truthfulness_same_coverage']:+.3f} (answering all: "
                      f"{mix['baseline_answer_all']:+.3f}); the difference's paired bootstrap 95% interval "
                      f"[{mix['difference_interval'][0]:+.3f}, {mix['difference_interval'][1]:+.3f}]. AUROC there: "
                      f"confidence {fmt(mix['auroc']['confidence'])}, sequence {fmt(mix['auroc']['sequence'])}, P(True) "
                      f"{fmt(mix['auroc']['p_true'])}; confidence − sequence [{mix['vs_sequence'][0]:+.3f}, "
                      f"{mix['vs_sequence'][1]:+.3f}], confidence − P(True) [{mix['vs_p_true'][0]:+.3f}, "
                      f"{mix['vs_p_true'][1]:+.3f}].", ""]
        for label, drafts in rep["drafts"].items():
            lines += render_drafts(label, drafts)
        lines += render_joint_drafts("test", rep.get("joint_drafts"))
    return "\n".join(lines) + "\n"


def plot(reports: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 4), squeeze=False)
    for ax, rep in zip(axes[0], reports, strict=True):
        for name, cov in rep["coverage"].items():
            xs, ys = zip(*cov["curve"], strict=True)
            ax.plot(xs, ys, label=f"{name} (area {cov['area']:.3f})")
        ax.set_title(rep["model"])
        ax.set_xlabel("coverage (answers kept, most confident first)")
        ax.set_ylabel("share right among those kept")
        ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-out", type=Path, help="write the first model's development refit here")
    parser.add_argument("--method", default=METHOD, help=f"the runs to read (default {METHOD})")
    args = parser.parse_args(argv)
    models = sorted(p.name for p in RUNS.iterdir() if p.is_dir()) if RUNS.is_dir() else []
    reports = [r for r in (model_report(m, args.method) for m in models) if r is not None]
    if not reports:
        print("confidence: no self_rag runs with confidence on both HotpotQA samples yet")
        return 0
    env = machine()
    out = HERE / "results" / ("confidence" if args.method == METHOD else f"confidence_{args.method}")
    data = {"environment": env, "reports": reports}
    out.with_suffix(".json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    out.with_suffix(".md").write_text(render(reports, env), encoding="utf-8")
    plot(reports, out.with_suffix(".png"))
    if args.fit_out:
        args.fit_out.write_text(json.dumps(reports[0]["refit"], indent=2) + "\n", encoding="utf-8")
    print(render(reports, env))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
