"""selfrag analyze: a run's summary as a table, optionally broken down.

A run with both answerable and unanswerable questions (``data.remove_gold``
as a share) also gets the two side by side.
"""

from __future__ import annotations

import argparse
import json
import sys

NAME = "analyze"
HELP = "show a run's results (metrics, cost, latency), optionally by question type, level and retrieval"
ORDER = 55


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ...eval.metric_notes import help_text

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = help_text()
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `selfrag run`")
    parser.add_argument("--breakdown", action="store_true", help="also by question type, level and retrieval decision")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--no-definitions", action="store_true", help="leave out the footer that defines each metric")


def warn(message: str) -> None:
    print(f"selfrag: warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ...eval.metric_notes import footer
    from ...eval.report import answerability_table, breakdown_tables, load_run, summary_table

    summary = load_run(args.run_dir, warn=warn)
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return 0
    print(summary_table(summary))
    side_by_side = answerability_table(summary)
    if side_by_side:
        print("\n" + side_by_side)
    if args.breakdown:
        tables = breakdown_tables(summary)
        print("\n" + (tables or "no breakdown: the run has no answered questions"))
    notes = footer(summary.get("metrics") or {})
    if notes and not args.no_definitions:
        print("\n" + notes)
    return 0
