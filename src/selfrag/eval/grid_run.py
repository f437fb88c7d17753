"""Running a grid's cells: on Ray (this machine or a cluster) or one by one in this process.

On Ray each cell is a task bounded to what it needs: a local llama.cpp cell
holds its whole cores (``num_cpus``), any other cell one concurrency slot (the
custom resource ``selfrag_slot``: ``--slots`` of them on a local cluster; a
cluster's nodes declare theirs with ``ray start --resources
'{"selfrag_slot": N}'``). A cell that fails, or whose worker process dies, is
run again from its run directory (the questions it answered are kept, the
rest answered), up to the grid's ``retries``; an error that a retry cannot
fix (a config, data or missing-package error) is not retried.

``OUTPUT/NAME/grid.json`` records every cell's attempts as they happen; at the
end :func:`write_report` puts the compare table of all cells in
``report.md``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, MissingDependencyError, SelfragError, require
from .grid import Cell, Grid, run_cell
from .results import write_json

SLOT = "selfrag_slot"
GRID_FILE = "grid.json"
REPORT_FILE = "report.md"
# Errors a second attempt would meet again.
_FINAL = (ConfigError, DataError, MissingDependencyError)


class InProcess:
    """Cells one after another in this process."""

    name = "in-process"

    def __init__(self) -> None:
        self._queue: list[Cell] = []

    def submit(self, cell: Cell) -> None:
        self._queue.append(cell)

    def busy(self) -> bool:
        return bool(self._queue)

    def next(self) -> tuple[Cell, dict[str, Any] | None, BaseException | None]:
        cell = self._queue.pop(0)
        try:
            return cell, run_cell(cell.payload()), None
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # recorded against the cell; the grid goes on
            return cell, None, exc

    def close(self) -> None:
        pass


class OnRay:
    """Cells as Ray tasks; ``address`` None starts a local cluster with ``cpus`` cores and ``slots`` slots."""

    def __init__(self, address: str | None = None, *, cpus: int | None = None, slots: int = 4) -> None:
        self.ray = require("ray", "ray", "selfrag grid on Ray")
        env = {"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}} if os.environ.get("PYTHONPATH") else None
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR, "runtime_env": env}
        try:
            if address:
                self.ray.init(address=address, **options)
            else:
                self.ray.init(num_cpus=cpus or os.cpu_count() or 1, resources={SLOT: slots},
                              include_dashboard=False, **options)
        except Exception as exc:  # Ray's own exception types (a cluster not reached, a start that failed)
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise DataError(f"cannot start {where}: {' '.join(str(exc).split())[:300]}; "
                            "or run the grid without Ray: --in-process") from None
        self.name = f"Ray ({address or 'local'})"
        self.resources = self.ray.cluster_resources()
        self._remote = self.ray.remote(max_retries=0)(run_cell)
        self._refs: dict[Any, Cell] = {}
        if not address:
            self.warm_up(slots)

    def warm_up(self, workers: int) -> list[int]:
        """Start ``workers`` worker processes with selfrag imported, before any cell is handed out.

        A worker starts in seconds (Python, Ray, selfrag's imports); started on demand, the first
        worker would take a second cell while the next one was still starting, and a grid whose
        cells are few would end one cell late. Each warm-up task waits at a barrier until all have
        arrived, so they run on ``workers`` distinct processes. Returns their pids.
        """
        barrier = self.ray.remote(num_cpus=0)(_Barrier).remote(workers)
        warm = self.ray.remote(num_cpus=0, resources={SLOT: 1}, max_retries=0)(_arrive)
        try:
            return self.ray.get([warm.remote(barrier) for _ in range(workers)], timeout=300)
        finally:
            self.ray.kill(barrier)

    def check(self, cells: list[Cell]) -> None:
        """Refuse cells the cluster can never run (Ray would wait for them for ever)."""
        cores = int(self.resources.get("CPU", 0))
        for cell in cells:
            if cell.cpus > cores:
                raise ConfigError(f"grid cell {cell.id} holds {cell.cpus} cores (a local model) but the Ray "
                                  f"cluster has {cores}; give its backend cpus: {cores} or fewer")
            if not cell.cpus and not self.resources.get(SLOT):
                raise ConfigError(f"the Ray cluster has no '{SLOT}' resource for API cells such as {cell.id}; "
                                  f"start its nodes with: ray start --resources '{{\"{SLOT}\": 4}}'")

    def submit(self, cell: Cell) -> None:
        needs = {"num_cpus": cell.cpus} if cell.cpus else {"num_cpus": 0, "resources": {SLOT: 1}}
        self._refs[self._remote.options(**needs).remote(cell.payload())] = cell

    def busy(self) -> bool:
        return bool(self._refs)

    def next(self) -> tuple[Cell, dict[str, Any] | None, BaseException | None]:
        ready, _ = self.ray.wait(list(self._refs), num_returns=1)
        cell = self._refs.pop(ready[0])
        try:
            return cell, self.ray.get(ready[0]), None
        except Exception as exc:  # a task error or a worker that died; recorded against the cell
            return cell, None, exc

    def close(self) -> None:
        self.ray.shutdown()


class _Barrier:
    """A Ray actor: ``arrive()`` returns once ``n`` callers have arrived."""

    def __init__(self, n: int) -> None:
        import asyncio

        self.n, self.arrived, self.all_here = n, 0, asyncio.Event()

    async def arrive(self) -> None:
        self.arrived += 1
        if self.arrived >= self.n:
            self.all_here.set()
        await self.all_here.wait()


def _arrive(barrier: Any) -> int:
    import ray

    from . import runner  # noqa: F401 - the imports every cell needs, done before the first cell

    ray.get(barrier.arrive.remote())
    return os.getpid()


def describe(error: BaseException) -> str:
    """A cell's error as one line; a dead worker said as such."""
    cause = getattr(error, "cause", None) or error
    name = type(error).__name__
    if "WorkerCrashed" in name or "NodeDied" in name or "ActorDied" in name:
        return "its worker process died"
    text = " ".join(str(cause).split())
    return f"{type(cause).__name__}: {text[:300]}" if not isinstance(cause, SelfragError) else text[:300]


def _final(error: BaseException) -> bool:
    return isinstance(getattr(error, "cause", None) or error, _FINAL)


def run_grid(grid: Grid, executor: Any, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every cell (retrying as the module docstring says); the grid's record, also in grid.json."""
    grid.root.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "name": grid.name, "grid_file": str(grid.source) if grid.source else None, "executor": executor.name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "retries": grid.retries,
        "cells": {c.id: {"run_dir": c.run_dir, "labels": grid.labels.get(c.id, {}), "cpus": c.cpus,
                         "status": "pending", "attempts": []} for c in grid.cells},
    }
    write_json(grid.root / GRID_FILE, record)
    if hasattr(executor, "check"):
        executor.check(grid.cells)
    start = time.perf_counter()
    for cell in grid.cells:
        executor.submit(cell)
    while executor.busy():
        cell, outcome, error = executor.next()
        entry = record["cells"][cell.id]
        attempt = {"ended": round(time.perf_counter() - start, 3)}
        if error is None:
            attempt.update(outcome or {})
            ok = attempt.get("status") == "complete"
            why = None if ok else f"the run ended {attempt.get('status')} ({attempt.get('n_errors', 0)} errors)"
        else:
            ok, why = False, describe(error)
            attempt["error"] = why
        entry["attempts"].append(attempt)
        if ok:
            entry["status"] = "complete"
            say(f"grid: {cell.id} complete ({attempt.get('n_answered')} answered)")
        elif error is not None and _final(error):
            entry["status"] = "failed"
            say(f"grid: {cell.id} failed: {why}")
        elif len(entry["attempts"]) <= grid.retries:
            entry["status"] = "retrying"
            say(f"grid: {cell.id}: {why}; running it again from its run directory "
                f"(attempt {len(entry['attempts']) + 1} of {grid.retries + 1})")
            executor.submit(cell)
        else:
            entry["status"] = "failed"
            say(f"grid: {cell.id} failed after {len(entry['attempts'])} attempts: {why}")
        write_json(grid.root / GRID_FILE, record)
    record["wall_time_s"] = round(time.perf_counter() - start, 3)
    record["complete"] = all(c["status"] == "complete" for c in record["cells"].values())
    write_json(grid.root / GRID_FILE, record)
    return record


def write_report(grid: Grid, record: dict[str, Any]) -> str:
    """The compare table (and the evidence table) of every cell that has answers, also in report.md."""
    from .report import compare_row, compare_table, grounding_rows, grounding_table, load_run

    summaries = [load_run(c.run_dir) for c in grid.cells if (Path(c.run_dir) / "config.yaml").is_file()]
    rows = [compare_row(s) for s in summaries]
    failed = [cid for cid, c in record["cells"].items() if c["status"] != "complete"]
    text = compare_table(rows) if rows else "(no cell has answers yet)"
    grounding = [r for s in summaries for r in grounding_rows(s)]
    if grounding:
        text += "\n\nEvidence and abstention:\n" + grounding_table(grounding)
    if failed:
        text += f"\n\nnot complete: {', '.join(failed)}"
    (grid.root / REPORT_FILE).write_text(
        f"# Grid {grid.name}\n\n{len(grid.cells)} cells, {record['executor']}, "
        f"{record.get('wall_time_s', 0):.1f} s\n\n```\n{text}\n```\n", encoding="utf-8")
    write_json(grid.root / "compare.json", json.loads(json.dumps(rows, default=str)))
    return text
