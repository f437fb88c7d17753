"""selfrag run: run an experiment config over a dataset, or resume an interrupted run."""

from __future__ import annotations

import argparse
import json
import sys

from ...config import ExperimentConfig, load_config
from ...errors import ConfigError
from ...extras import check_config
from ..options import add_answer_options, flag_overrides

NAME = "run"
HELP = "run an experiment config over its dataset (writes results/<run_id>/)"
DESCRIPTION = (
    "Answer every question of the config's dataset with its method, concurrently, and write "
    "config.yaml, predictions.jsonl (one line per question, as it completes) and summary.json "
    "into a new run directory. An interrupted run continues with --resume RUN_DIR."
)
ORDER = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="a YAML config (see configs/); optional with --resume")
    parser.add_argument("--limit", type=int, metavar="N", help="answer only the first N questions")
    parser.add_argument("--concurrency", type=int, metavar="N", help="questions answered at the same time")
    add_answer_options(parser, NAME)
    parser.add_argument("--output", metavar="DIR", help="folder for run directories (default: experiment.output_dir)")
    parser.add_argument("--run-id", metavar="NAME", help="name of the run directory (default: <time>_<experiment>)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run in RUN_DIR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _config(args: argparse.Namespace) -> ExperimentConfig:
    # --set values are read as YAML; the dedicated flags are taken as given: (key, value, flag).
    overrides: list = [*args.overrides, *flag_overrides(args)]
    if args.concurrency is not None:
        overrides.append(("run.concurrency", args.concurrency, "--concurrency"))
    if args.resume:
        from ...eval.resume import resume_config

        cfg = resume_config(args.resume, args.config, overrides)
    elif args.config:
        cfg = load_config(args.config, overrides)
    else:
        raise ConfigError("give a config file (e.g. selfrag run configs/vanilla_rag.yaml) or --resume RUN_DIR")
    if args.limit is not None:
        if args.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {args.limit}")
        current = cfg.data.subset_size
        cfg.data.subset_size = args.limit if current is None else min(current, args.limit)
    return cfg


def run(args: argparse.Namespace) -> int:
    from ...eval.report import summary_table
    from ...eval.runner import run_experiment

    if args.resume and (args.output or args.run_id):
        raise ConfigError("--resume continues RUN_DIR in place; drop --output/--run-id")
    cfg = _config(args)
    check_config(cfg)  # a missing extra (dense retrieval) before the dataset or model is loaded
    result = run_experiment(
        cfg,
        output_root=args.output,
        run_id=args.run_id,
        resume_dir=args.resume,
        progress=not args.no_progress,
        on_record=_trace_line if args.trace else None,
    )
    if args.json:
        print(json.dumps(result.summary, indent=2, ensure_ascii=False))
    else:
        print(summary_table(result.summary))
        print(f"\nresults: {result.run_dir}")
    predictions = result.run_dir / "predictions.jsonl"
    if result.summary.get("status") == "failed":
        # One line: how many failed, the first error, and how to go on.
        print(f"selfrag: error: {result.summary['failure']}; see {predictions}, fix the cause and retry the "
              f"failed questions with: selfrag run --resume {result.run_dir}", file=sys.stderr)
        return 1
    if result.summary.get("n_errors"):
        print(f"selfrag: {result.summary['n_errors']} question(s) failed; see the error lines in "
              f"{predictions} (resume to retry them)", file=sys.stderr)
    return 0


def _trace_line(record: dict) -> str:
    """--trace: one line per answered question, its answer and what the method did."""
    from ..explain import record_line

    return record_line(record)
