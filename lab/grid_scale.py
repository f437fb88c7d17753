"""`selfrag grid` on 1, 2 and 4 Ray workers against the same grid run cell by cell in one process.

The grid has 8 cells (vanilla_rag and no_retrieval x 2 datasets x 2 seeds
over the shipped demo questions) with a scripted backend that sleeps a fixed
time per call (the grid's ``delay``: ``selfrag.llm.DelayedBackend``), so a
cell's time is its calls' round trips, as with an API, and the grid's speed-up
is what the scheduler gives. Each cell answers its 12 questions one at a time
(``run.concurrency=1``): a worker is one sequential stream of calls.

Measured per set-up (a fresh output folder each): wall time of the grid (Ray's
start timed apart), cells per minute, the ratio to one Ray worker and to the
in-process run, and the overhead per cell: wall time beyond the calls' own
sleeps, divided by the cells each worker ran. Then a worker killed with SIGKILL
midway through the 2-worker grid: the grid must finish with every question of
every cell answered exactly once.

Writes ``lab/results/grid_scale.md`` and ``.json``.

    python -m lab.grid_scale               # about 8 minutes
    python -m lab.grid_scale --delay 0.2   # quicker, overhead weighs more
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from lab.machine import machine, machine_lines
from selfrag.eval.grid import read_grid
from selfrag.eval.grid_run import InProcess, OnRay, run_grid
from selfrag.eval.results import read_predictions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


REPLIES = {"Red Planet": "Mars", "largest moon": "Ganymede", "Uranus": "William Herschel", "?": "I do not know"}


def log(msg: str) -> None:
    print(f"grid_scale: {msg}", file=sys.stderr, flush=True)


def write_grid(folder: Path, delay: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "replies.json").write_text(json.dumps(REPLIES))
    path = folder / "grid.yaml"
    path.write_text(f"""
name: scale
output: out
configs: [{ROOT}/configs/vanilla_rag.yaml, {ROOT}/configs/no_retrieval.yaml]
datasets: [{{label: first, dataset: demo}}, {{label: again, dataset: demo, skip: 0}}]
backends: [{{spec: "scripted:replies.json", label: script, delay: {delay}}}]
seeds: [0, 1]
set: ["cache.enabled=false", "run.concurrency=1"]
""")
    return path


def check_answers(root: Path) -> dict:
    """Per cell: questions answered, and whether each appears exactly once."""
    counts, exact = {}, True
    for cell in sorted((root / "cells").iterdir()):
        ids = [r["id"] for r in read_predictions(cell / "predictions.jsonl") if r.get("error") is None]
        counts[cell.name] = len(ids)
        exact = exact and len(ids) == len(set(ids)) == 12
    return {"answered": sum(counts.values()), "each_exactly_once": exact}


def calls(root: Path) -> int:
    return sum(r["accounting"]["llm_calls"] for cell in (root / "cells").iterdir()
               for r in read_predictions(cell / "predictions.jsonl"))


def one(folder: Path, delay: float, workers: int | None, kill_after: float | None = None) -> dict:
    grid = read_grid(write_grid(folder, delay))
    start = time.perf_counter()
    executor = InProcess() if workers is None else OnRay(cpus=os.cpu_count(), slots=workers)
    ray_start = time.perf_counter() - start
    killed: list[int] = []
    if kill_after is not None:
        def killer() -> None:  # a worker running a cell, killed for real
            time.sleep(kill_after)
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        if (entry / "cmdline").read_bytes().startswith(b"ray::run_cell"):
                            os.kill(int(entry.name), signal.SIGKILL)
                            killed.append(int(entry.name))
                            return
                    except OSError:
                        continue
        threading.Thread(target=killer, daemon=True).start()
    try:
        t = time.perf_counter()
        record = run_grid(grid, executor, say=lambda line: None)
        wall = time.perf_counter() - t
    finally:
        executor.close()
    n_calls = calls(grid.root)
    per_worker = math.ceil(len(grid.cells) / (workers or 1))
    ideal = n_calls * delay / (workers or 1)
    return {
        "setup": "in process" if workers is None else f"Ray, {workers} worker{'s' if workers > 1 else ''}",
        "workers": workers or 1, "cells": len(grid.cells), "calls": n_calls, "ray_start_s": round(ray_start, 2),
        "wall_s": round(wall, 2), "cells_per_min": round(len(grid.cells) / wall * 60, 2),
        "overhead_per_cell_s": round((wall - ideal) / per_worker, 3), "complete": record["complete"],
        "retried_cells": sum(len(c["attempts"]) > 1 for c in record["cells"].values()), "killed_pids": killed,
        # How the cells were shared out: cells finished per worker process.
        "cells_per_worker": sorted(Counter(a["pid"] for c in record["cells"].values() for a in c["attempts"]
                                           if a.get("pid")).values(), reverse=True),
        **check_answers(grid.root),
    }


def report(rows: list[dict], info: dict, args: argparse.Namespace) -> str:
    base = next(r for r in rows if r["setup"] == "Ray, 1 worker")
    local = next(r for r in rows if r["setup"] == "in process")
    lines = [
        "# selfrag grid on Ray workers against cell by cell",
        "",
        f"Written by `python -m lab.grid_scale`: 8 cells x 12 questions, {args.delay} s per call (DelayedBackend over "
        "the scripted backend), one question at a time per cell, cache off.",
        "",
        *machine_lines(info),
        "",
        "| set-up | Ray start s | wall s | cells/min | vs 1 Ray worker | vs in process | overhead/cell s | "
        "answered | each once | retried cells | cells per worker |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setup']}{' (a worker killed)' if r['killed_pids'] else ''} | {r['ray_start_s']} | {r['wall_s']} | "
            f"{r['cells_per_min']} | {base['wall_s'] / r['wall_s']:.2f}x | {local['wall_s'] / r['wall_s']:.2f}x | "
            f"{r['overhead_per_cell_s']} | {r['answered']} | {'yes' if r['each_exactly_once'] else 'NO'} | "
            f"{r['retried_cells']} | {' + '.join(map(str, r['cells_per_worker']))} |")
    lines += ["", "Overhead per cell: wall time beyond the calls' own sleeps (calls x delay / workers), "
              "divided by the cells one worker ran. Ray's start (the local cluster and its workers, warmed "
              "up with selfrag imported) is timed apart and not in the wall time."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--out", default=str(HERE / "results" / "grid_scale"))
    args = parser.parse_args()
    info = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="grid-scale-") as tmp:
        for i, workers in enumerate([None, 1, 2, 4]):
            log(f"{'in process' if workers is None else f'{workers} Ray worker(s)'}")
            rows.append(one(Path(tmp) / f"run{i}", args.delay, workers))
            log(json.dumps(rows[-1]))
        log("2 Ray workers, one killed midway")
        rows.append(one(Path(tmp) / "killed", args.delay, 2, kill_after=3 * 12 * args.delay / 2))
        log(json.dumps(rows[-1]))
    info["load_average_at_end"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    Path(args.out + ".json").write_text(json.dumps({"machine": info, "delay_s": args.delay, "rows": rows}, indent=2) + "\n")
    Path(args.out + ".md").write_text(report(rows, info, args))
    print(report(rows, info, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
