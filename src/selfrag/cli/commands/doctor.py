"""selfrag doctor: check the installation, the machine and (optionally) a backend."""

from __future__ import annotations

import argparse
import json
import sys

from ...doctor.checks import run_checks

NAME = "doctor"
HELP = "check the installation: versions, CPU and llama.cpp build, a decode smoke test, caches"
ORDER = 90


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", metavar="SPEC", help="also check that this backend answers")
    parser.add_argument("--json", action="store_true", help="print the checks as one JSON object")


def run(args: argparse.Namespace) -> int:
    checks = run_checks(args.llm)
    problems = [c for c in checks if not c.ok]
    if args.json:
        print(json.dumps({"ok": not problems, "checks": [c.as_dict() for c in checks]}, indent=2))
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            print(f"{'ok ' if c.ok else 'BAD'}  {c.name:<{width}}  {c.value}")
    for c in problems:
        print(f"selfrag doctor: {c.name}: {c.problem}; fix: {c.fix}", file=sys.stderr)
    if not args.json:
        print(f"\n{len(problems)} problem(s)" if problems else "\nno problems found")
    return 1 if problems else 0
