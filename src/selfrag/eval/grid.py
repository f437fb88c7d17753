"""Evaluation grids: configs x datasets x backends x seeds, one resumable run directory per cell.

A grid file (YAML) lists the axes; every combination is a *cell*, an ordinary
run (``selfrag run``) of one config on one dataset with one backend and one
seed, written to ``OUTPUT/NAME/cells/<cell id>/``::

    name: small-models                  # the grid's folder: OUTPUT/NAME
    output: results/grids               # default results/grids
    configs: [../configs/vanilla_rag.yaml, ../configs/self_rag.yaml]
    datasets:                           # each replaces the config's data section
      - {label: hotpot, dataset: hotpotqa, path: ../data/hotpot.jsonl, subset_size: 50}
    backends:                           # llm.spec values, or mappings
      - openai:gpt-4o-mini
      - {spec: "llamacpp:/models/qwen.gguf", label: qwen, cpus: 2}
    seeds: [0, 1]                       # llm.seed and run.seed
    set: ["cache.enabled=false"]        # --set overrides for every cell
    retries: 2                          # attempts after the first for a failed cell (0-10)

Paths in a grid file are relative to the grid file. A backend mapping may
give ``cpus`` (the whole cores a local llama.cpp cell holds; default its
``llm.n_threads``, else every core) and ``delay`` (seconds added to every call,
a stand-in for an API's round trip in dry runs and benchmarks).

:func:`run_cell` runs or resumes one cell in this process; it is what a Ray
task runs (:mod:`.grid_ray`), and what the grid runs cell by cell without Ray.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from ..config import ExperimentConfig, Override, load_config, validate, with_absolute_paths
from ..errors import ConfigError, DataError
from ..validation import StrictModel, load_yaml, parse_model
from .results import CONFIG_FILE, PREDICTIONS_FILE

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
CELLS_DIR = "cells"
# Files a run writes before its config: a directory holding only these never got going.
_EARLY_FILES = {"run.lock", "ledger.jsonl", "summary.json"}
# A failed cell is run again at most this many times: a cell that failed 10 times has a cause
# to fix, and each attempt may pay for its calls again.
MAX_RETRIES = 10


class BackendEntry(StrictModel):
    spec: str | None = None  # None: the embedded llama.cpp model
    label: str | None = None
    cpus: int | None = Field(None, ge=1)
    delay: float = Field(0.0, ge=0)


class DatasetEntry(StrictModel, extra="allow"):  # the other keys are the data section's (checked per cell)
    label: str | None = None


class GridFile(StrictModel):
    name: str = "grid"
    output: str = "results/grids"
    configs: list[str] = Field(min_length=1)
    datasets: list[DatasetEntry] = Field(default_factory=lambda: [DatasetEntry()])
    backends: list[BackendEntry | str] = Field(default_factory=lambda: [BackendEntry()])
    seeds: list[int] = Field(default_factory=lambda: [0])
    set: list[str] = Field(default_factory=list)
    retries: int = Field(2, ge=0, le=MAX_RETRIES)


@dataclass
class Cell:
    """One run of the grid: its config (absolute paths), run directory and what it needs to run."""

    id: str
    config: dict[str, Any]
    run_dir: str
    cpus: int = 0  # whole cores held (a local model); 0: an API-style cell, one concurrency slot
    delay: float = 0.0

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "config": self.config, "run_dir": self.run_dir, "delay": self.delay}


@dataclass
class Grid:
    name: str
    root: Path  # OUTPUT/NAME
    cells: list[Cell]
    retries: int
    source: Path | None = None
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # cell id -> its axis labels


def _label(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "x"


def _backend_label(spec: str | None) -> str:
    if not spec:
        return "llamacpp"
    provider, _, rest = spec.partition(":")
    rest = rest.split("@")[0]
    return _label(f"{provider}-{Path(rest).stem if '/' in rest or rest.endswith(('.json', '.gguf')) else rest}"
                  if rest else provider)


def _is_local_model(spec: str | None) -> bool:
    return not spec or spec.split(":", 1)[0].lower() == "llamacpp"


def _relative(base: Path, value: Any) -> Any:
    return str((base / Path(value).expanduser()).resolve()) if isinstance(value, str) and value else value


def _spec(base: Path, spec: str | None) -> str | None:
    """A backend spec whose file (``scripted:PATH``, ``llamacpp:PATH``) is resolved against the grid file."""
    provider, sep, rest = (spec or "").partition(":")
    if sep and provider.lower() in ("scripted", "llamacpp") and rest and not Path(rest).expanduser().is_absolute():
        candidate = base / rest
        if candidate.exists():
            return f"{provider}:{candidate.resolve()}"
    return spec


def read_grid(path: str | Path, *, output: str | None = None) -> Grid:
    """The grid file at ``path`` with every cell's config loaded and validated (a one-line error otherwise)."""
    src = Path(path).expanduser()
    if not src.is_file():
        raise ConfigError(f"grid file not found: {src}")
    try:
        text = src.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = src.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(f"grid file {src}:{line} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); "
                          "save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"grid file {src} cannot be read ({exc.strerror or exc})") from None
    try:
        raw = load_yaml(text, str(src))
    except RecursionError:
        raise ConfigError(f"{src}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{src}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: a grid file is a mapping with configs, datasets, backends and seeds")
    spec = parse_model(GridFile, raw, source=str(src))
    base = src.resolve().parent
    root = Path(output).expanduser().resolve() if output else Path(_relative(base, spec.output))
    root = root / _label(spec.name)
    return build_grid(spec, base, root, source=src.resolve())


def build_grid(spec: GridFile, base: Path, root: Path, source: Path | None = None) -> Grid:
    backends = [b if isinstance(b, BackendEntry) else BackendEntry(spec=b) for b in spec.backends]
    cells: list[Cell] = []
    labels: dict[str, dict[str, str]] = {}
    for config, dataset, backend, seed in itertools.product(spec.configs, spec.datasets, backends, spec.seeds):
        data = {k: v for k, v in (dataset.model_extra or {}).items()}
        for key in ("path", "corpus"):
            data[key] = _relative(base, data.get(key))
        data = {k: v for k, v in data.items() if v is not None}
        parts = {
            "config": Path(config).stem,
            "dataset": _label(dataset.label or str(data.get("dataset", "data"))),
            "backend": _label(backend.label or _backend_label(backend.spec)),
            "seed": f"s{seed}",
        }
        cell_id = ".".join(parts.values())
        if cell_id in labels:
            raise ConfigError(f"two cells are both named {cell_id}; give the datasets or backends distinct labels")
        labels[cell_id] = parts
        overrides: list[Override] = [*spec.set, ("experiment.name", cell_id, "grid"),
                                     ("llm.seed", seed, "grid"), ("run.seed", seed, "grid")]
        if data:
            overrides.append(("data", data, "grid"))
        if backend.spec is not None:
            overrides.append(("llm.spec", _spec(base, backend.spec), "grid"))
        config_path = Path(_relative(base, config))
        try:
            cfg = with_absolute_paths(load_config(config_path, overrides))
        except ConfigError as exc:
            raise ConfigError(f"grid cell {cell_id}: {exc}") from None
        cpus = 0
        if _is_local_model(cfg.llm.spec):
            cpus = backend.cpus or cfg.llm.n_threads or os.cpu_count() or 1
        cells.append(Cell(cell_id, cfg.to_dict(), str(root / CELLS_DIR / cell_id), cpus, backend.delay))
    return Grid(spec.name, root, cells, spec.retries, source, labels)


# -- one cell ----------------------------------------------------------------------------------------


def _prepare(run_dir: Path) -> Path | None:
    """The directory to resume (None: start the cell afresh), clearing one that never got going."""
    if (run_dir / CONFIG_FILE).is_file():
        return run_dir
    if run_dir.is_dir():
        leftovers = {p.name for p in run_dir.iterdir()}
        if leftovers - _EARLY_FILES:
            raise DataError(f"{run_dir} is not a run directory of this grid (it holds {sorted(leftovers)[0]}); "
                            "move it away and run the grid again")
        for name in leftovers:
            (run_dir / name).unlink()
        run_dir.rmdir()
    return None


def run_cell(payload: dict[str, Any]) -> dict[str, Any]:
    """Run (or resume, keeping the questions already answered) one cell; its status and counts."""
    from ..assemble import build_backend
    from ..llm.delayed import DelayedBackend
    from .runner import run_experiment

    cfg: ExperimentConfig = validate(payload["config"])
    run_dir = Path(payload["run_dir"])
    resume = _prepare(run_dir)
    llm = DelayedBackend(build_backend(cfg), payload["delay"]) if payload.get("delay") else None
    try:
        result = run_experiment(cfg, output_root=run_dir.parent, run_id=None if resume else run_dir.name,
                                resume_dir=resume, progress=False, llm=llm)
    finally:
        if llm is not None:
            asyncio.run(llm.aclose())
    s = result.summary
    return {"id": payload["id"], "status": s.get("status"), "n_answered": s.get("n_answered", 0),
            "n_errors": s.get("n_errors", 0), "n_questions": s.get("n_questions"), "resumed": resume is not None,
            "pid": os.getpid(), "run_dir": str(result.run_dir)}


def answered_ids(run_dir: str | Path) -> list[str]:
    """The question ids a cell's predictions answer, in file order (error lines left out)."""
    from .results import read_predictions

    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.is_file():
        return []
    return [r["id"] for r in read_predictions(path) if r.get("error") is None]
