"""selfrag confidence: how well runs' confidence separates right answers from wrong ones; refit its rule."""

from __future__ import annotations

import argparse
import json

NAME = "confidence"
HELP = "measure a run's confidence (AUROC, risk-coverage) or fit the confidence rule on development runs"
ORDER = 57


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ...reflection.confidence import SIGNALS

    sub = parser.add_subparsers(dest="action", required=True, metavar="{report,fit}")
    report = sub.add_parser("report", help="AUROC of the confidence and of each signal, risk-coverage figures")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    report.add_argument("--json", action="store_true", help="print the figures as JSON (with the curve)")
    fit = sub.add_parser("fit", help="fit the confidence rule on development runs and write it as JSON")
    fit.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    fit.add_argument("--out", required=True, help="the JSON file to write (name it in self_rag.confidence_model)")
    fit.add_argument("--features", default=None,
                     help="comma-separated signals (default: every signal the runs read, of "
                          f"{','.join(SIGNALS)})")
    fit.add_argument("--l2", type=float, default=1.0, help="L2 penalty on the weights (default 1.0)")


def _line(figures: dict) -> str:
    aurocs = ", ".join(f"{k} {v:.3f}" for k, v in figures["auroc"].items() if v is not None)
    area = figures["risk_coverage_area"]
    at50, at80 = figures["right_at_50"], figures["right_at_80"]
    return (f"{figures['n']} answers, {figures['right']} right; AUROC: {aurocs}; risk-coverage area "
            f"{area:.3f}; right at 50% coverage {at50:.3f}, at 80% {at80:.3f}")


def run(args: argparse.Namespace) -> int:
    from ...eval.confidence import confidence_rows, fit_runs, measure, read_run
    from ...reflection.confidence import SIGNALS

    if args.action == "fit":
        features = [f.strip() for f in args.features.split(",")] if args.features else list(SIGNALS)
        model, figures = fit_runs(args.run_dirs, args.out, features, l2=args.l2)
        weights = ", ".join(f"{f} {w:+.3f}" for f, w in zip(model.features, model.weights, strict=True))
        print(f"wrote {args.out}: intercept {model.intercept:+.3f}; weights (per standard deviation): {weights}")
        print("in-sample: " + _line(figures))
        return 0
    rows = [row for d in args.run_dirs for row in confidence_rows(read_run(d))]
    figures = measure(rows)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(_line(figures) if rows else "no record read a confidence")
    return 0
