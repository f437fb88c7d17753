"""selfrag compare: runs side by side, and a plot of F1 against cost and latency.

A second table shows evidence and abstention per run; a run with both
answerable and unanswerable questions gets one row for each.
"""

from __future__ import annotations

import argparse
import json

NAME = "compare"
HELP = ("compare runs: one row per run (method, retriever, model, n, EM, F1, cost, calls, cached calls, latency), "
        "then evidence and abstention (answerable vs unanswerable)")
ORDER = 56


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by `selfrag run`")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also plot F1 against cost (LLM calls when every run cost $0) and latency per question "
                        "(needs the plot extra: pip install 'selfrag[plot]')")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def run(args: argparse.Namespace) -> int:
    from ...eval.report import (
        compare_row,
        compare_table,
        grounding_rows,
        grounding_table,
        load_run,
        plot_compare,
    )
    from .analyze import warn

    if args.plot:
        from ...extras import need

        need("plot", "compare --plot")  # before any run is read or a table printed
    summaries = [load_run(d, warn=warn) for d in args.run_dirs]
    rows = [compare_row(s) for s in summaries]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        print(compare_table(rows))
        grounding = [row for s in summaries for row in grounding_rows(s)]
        print("\nEvidence and abstention:\n" + grounding_table(grounding))
    if args.plot:
        path = plot_compare(rows, args.plot)
        if not args.json:
            print(f"\nplot: {path}")
    return 0
