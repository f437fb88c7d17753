"""selfrag grid: configs x datasets x backends x seeds, each cell a resumable run, on Ray when it is there."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from ...errors import ConfigError, MissingDependencyError

NAME = "grid"
HELP = "run a grid of configs x datasets x backends x seeds (each cell a resumable run), on Ray if installed"
DESCRIPTION = (
    "Run every cell of a grid file (see docs/scale.md): each is a normal run directory under "
    "OUTPUT/NAME/cells/, resumed where it stopped when the grid runs again. With Ray installed "
    "(pip install 'selfrag[ray]') the cells run as Ray tasks on this machine (or on a cluster with "
    "--address); without it, one after another in this process. Ends with the compare table of all cells."
)
ORDER = 52


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("grid", metavar="GRID.yaml", help="the grid file")
    parser.add_argument("--output", metavar="DIR", help="folder for the grid (default: the file's output)")
    parser.add_argument("--address", metavar="ADDR", help="a Ray cluster (ray://HOST:10001 or auto); default: "
                        "start Ray on this machine")
    parser.add_argument("--in-process", action="store_true", help="run the cells one by one here, without Ray")
    parser.add_argument("--slots", type=int, default=4, metavar="N",
                        help="local Ray: API cells running at once (default 4)")
    parser.add_argument("--cpus", type=int, metavar="N", help="local Ray: cores to offer (default: all)")
    parser.add_argument("--json", action="store_true", help="print the grid's record as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from ...eval.grid import read_grid
    from ...eval.grid_run import GRID_FILE, InProcess, OnRay, run_grid, write_report

    if args.slots < 1 or (args.cpus is not None and args.cpus < 1):
        raise ConfigError("--slots and --cpus must be at least 1")
    if args.in_process and args.address:
        raise ConfigError("--in-process runs without Ray; drop --address")
    grid = read_grid(args.grid, output=args.output)
    have_ray = importlib.util.find_spec("ray") is not None
    if args.address and not have_ray:
        raise MissingDependencyError("--address needs Ray: pip install 'selfrag[ray]'")
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    if args.in_process or not have_ray:
        if not args.in_process:
            say("grid: Ray is not installed (pip install 'selfrag[ray]'); running the cells one by one here")
        executor = InProcess()
    else:
        executor = OnRay(args.address, cpus=args.cpus, slots=args.slots)
    say(f"grid: {len(grid.cells)} cells on {executor.name} -> {grid.root}")
    try:
        record = run_grid(grid, executor, say=say)
    finally:
        executor.close()
    table = write_report(grid, record)
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(f"\n{table}\n\nreport: {grid.root / 'report.md'} · cells: {grid.root / GRID_FILE}")
    return 0 if record["complete"] else 1
