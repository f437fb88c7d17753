"""The experiment runner: every question of a dataset through one method.

Questions run concurrently (at most ``run.concurrency`` at a time). Each one
is scored after the method answers and written to ``predictions.jsonl`` at
once; ``summary.json`` is refreshed as the run goes and written at the end.
A question that fails (a backend error after its retries, a bad record) becomes
an error line and the run goes on; errors that no question can survive (a
missing dependency, a rejected API key) stop the run.

Resuming (``resume_dir``) keeps the questions already answered, answers the
rest, and, with the cache on, replays every LLM call that had finished, so no
call is paid twice.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assemble import build_backend, build_method, build_retriever
from ..config import ExperimentConfig, dump_yaml, redact, with_absolute_paths
from ..errors import BackendError, ConfigError, DataError, MissingDependencyError
from ..methods.base import Method
from ..types import Question
from .datasets import Dataset, load_dataset
from .results import (
    CONFIG_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    PredictionWriter,
    check_run_dir,
    error_record,
    new_run_dir,
    prediction_record,
    read_json,
    repair_predictions,
    write_json,
)
from .scoring import accounting, question_metrics
from .summary import summarize

log = logging.getLogger(__name__)
SUMMARY_EVERY_S = 30.0
# Backend statuses that say the backend itself is unusable (bad key, no such model).
FATAL_STATUSES = {401, 403, 404}


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]


def is_fatal(exc: BaseException) -> bool:
    """Errors that would fail every question alike: stop the run instead of recording them."""
    if isinstance(exc, (ConfigError, MissingDependencyError)):
        return True
    return isinstance(exc, BackendError) and exc.status in FATAL_STATUSES


def method_top_k(cfg: ExperimentConfig) -> int:
    return int(cfg.method_section().get("top_k", cfg.retrieval.top_k))


def _check_documents(method: Method, has_shared: bool, questions: Sequence[Question]) -> None:
    if not method.uses_retrieval or has_shared:
        return
    bare = [q.id for q in questions if not q.contexts]
    if bare:
        raise DataError(
            f"method {method.name} retrieves, but {len(bare)} question(s) (e.g. {bare[0]}) have no contexts; "
            "give a shared collection with data.corpus or retrieval.index"
        )


class Progress:
    """A tqdm bar on stderr: done/total, running EM/F1, spent cost, errors."""

    def __init__(self, total: int, done: Sequence[dict[str, Any]], label: str, enabled: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, initial=len(done), desc=label, unit="q", file=sys.stderr,
            disable=not enabled, dynamic_ncols=True, leave=True,
        )
        self.em = self.f1 = self.cost = 0.0
        self.scored = self.errors = 0
        for rec in done:
            self._add(rec)
        self._show()

    def _add(self, rec: dict[str, Any]) -> None:
        if rec.get("error") is not None:
            self.errors += 1
            return
        metrics = rec.get("metrics") or {}
        self.scored += 1
        self.em += metrics.get("em", 0.0)
        self.f1 += metrics.get("f1", 0.0)
        self.cost += (rec.get("accounting") or {}).get("cost_usd", 0.0) or 0.0

    def _show(self) -> None:
        n = self.scored or 1
        text = f"EM {self.em / n:.3f} F1 {self.f1 / n:.3f} ${self.cost:.4f}"
        if self.errors:
            text += f" errors {self.errors}"
        self.bar.set_postfix_str(text, refresh=False)

    def update(self, rec: dict[str, Any]) -> None:
        self._add(rec)
        self._show()
        self.bar.update(1)

    def say(self, message: str) -> None:
        if self.bar.disable:
            log.warning(message)
        else:
            self.bar.write(f"selfrag: {message}", file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


class Experiment:
    """One invocation of a run (a fresh run or a resumption) and its bookkeeping."""

    def __init__(self, cfg: ExperimentConfig, dataset: Dataset, run_dir: Path, llm: Any, method: Method) -> None:
        self.cfg = cfg
        self.dataset = dataset
        self.run_dir = run_dir
        self.llm = llm
        self.method = method
        self.top_k = method_top_k(cfg)
        self.records: list[dict[str, Any]] = []
        self.sessions: list[dict[str, Any]] = []
        self.session: dict[str, Any] = {}
        self.started = time.perf_counter()
        self._last_summary = 0.0

    # -- bookkeeping -------------------------------------------------------------
    def begin(self, resumed: list[dict[str, Any]], previous: dict[str, Any] | None) -> None:
        self.records = list(resumed)
        if previous:
            for s in previous.get("sessions") or []:
                s = dict(s)
                s.setdefault("finished", None)
                self.sessions.append(s)
        self.session = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "finished": None,
            "resumed": bool(resumed) or previous is not None,
            "answered": 0,
            "errors": 0,
            "wall_time_s": 0.0,
            "cache_hits": 0,
            "cache_misses": 0,
        }
        (self.run_dir / CONFIG_FILE).write_text(dump_yaml(self.cfg), encoding="utf-8")
        self.write_summary()

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self.session["errors" if record.get("error") is not None else "answered"] += 1
        if time.perf_counter() - self._last_summary > SUMMARY_EVERY_S:
            self.write_summary()

    def write_summary(self, finished: bool = False) -> dict[str, Any]:
        self._last_summary = time.perf_counter()
        self.session["wall_time_s"] = round(time.perf_counter() - self.started, 3)
        self.session["cache_hits"] = int(getattr(self.llm, "hits", 0) or 0)
        self.session["cache_misses"] = int(getattr(self.llm, "misses", 0) or 0)
        if finished:
            self.session["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sessions = [*self.sessions, self.session]
        cfg = self.cfg
        answered_ids = {r["id"] for r in self.records}
        summary = {
            "run_id": self.run_dir.name,
            "experiment": cfg.experiment.name,
            "description": cfg.experiment.description,
            "method": self.method.name,
            "retriever": cfg.retrieval.method if self.method.uses_retrieval else None,
            "top_k": self.top_k if self.method.uses_retrieval else None,
            "model": str(getattr(self.llm, "model", "") or ""),
            "llm_spec": str(getattr(self.llm, "spec", cfg.llm.spec) or ""),
            "dataset": cfg.data.dataset,
            "data_path": cfg.data.path,
            "skipped_records": self.dataset.skipped,
            "complete": all(q.id in answered_ids for q in self.dataset.questions),
            **summarize(self.records, len(self.dataset)),
            "wall_time_s": round(sum(float(s.get("wall_time_s") or 0) for s in sessions), 3),
            "cache": {
                "enabled": cfg.cache.enabled,
                "hits": sum(int(s.get("cache_hits") or 0) for s in sessions),
                "misses": sum(int(s.get("cache_misses") or 0) for s in sessions),
            },
            "sessions": sessions,
        }
        summary = redact(summary)
        write_json(self.run_dir / SUMMARY_FILE, summary)
        return summary

    # -- answering ---------------------------------------------------------------
    async def answer_one(self, question: Question, progress: Progress) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            response = await self.method.answer(question)
        except Exception as exc:  # one question's failure is recorded; the run goes on
            if is_fatal(exc):
                raise
            progress.say(f"question {question.id} failed: {type(exc).__name__}: {redact(str(exc))}")
            return error_record(question, exc, (time.perf_counter() - start) * 1000)
        metrics = question_metrics(question, response, self.top_k)
        return prediction_record(question, response, metrics, accounting(response))

    async def answer_all(self, pending: list[Question], concurrency: int, progress: Progress) -> None:
        writer = PredictionWriter(self.run_dir / PREDICTIONS_FILE)
        queue = iter(pending)

        async def worker() -> None:
            for question in queue:  # a shared iterator: each question is taken once
                record = await self.answer_one(question, progress)
                writer.write(record)
                self.add(record)
                progress.update(record)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(concurrency, len(pending))):
                    group.create_task(worker())
        except BaseExceptionGroup as eg:
            # Surface the first real error (a fatal one), not the group.
            first = eg.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
        finally:
            writer.close()


def _resume_state(run_dir: Path, dataset: Dataset) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    done = repair_predictions(run_dir / PREDICTIONS_FILE)
    wanted = {q.id for q in dataset.questions}
    stray = [r["id"] for r in done if r["id"] not in wanted]
    if stray:
        raise DataError(
            f"{run_dir / PREDICTIONS_FILE} answers questions outside this selection (e.g. {stray[0]}); "
            "resume with the run's own data settings"
        )
    summary_path = run_dir / SUMMARY_FILE
    previous = read_json(summary_path) if summary_path.is_file() else {"sessions": []}
    return done, previous


async def run_experiment_async(
    cfg: ExperimentConfig,
    *,
    output_root: str | Path | None = None,
    run_id: str | None = None,
    resume_dir: str | Path | None = None,
    progress: bool = True,
    llm: Any = None,
) -> RunResult:
    """Run (or resume) an experiment; returns the run directory and its summary.

    ``llm`` replaces the configured backend (the caller then closes it).
    """
    cfg = with_absolute_paths(cfg)
    dataset = load_dataset(cfg.data)
    if dataset.skipped:
        log.warning("skipped %d malformed record(s), e.g. %s", dataset.skipped, dataset.skipped_examples[0])
    own_llm = llm is None
    llm = build_backend(cfg) if own_llm else llm
    progress_bar: Progress | None = None
    experiment: Experiment | None = None
    try:
        retriever = build_retriever(cfg, dataset.corpus)
        method = build_method(cfg, llm, retriever)
        _check_documents(method, retriever is not None, dataset.questions)
        if resume_dir is not None:
            run_dir = check_run_dir(Path(resume_dir)).resolve()
            done, previous = _resume_state(run_dir, dataset)
            if not cfg.cache.enabled and len(done) < len(dataset.questions):
                log.warning("the cache is off: calls of questions cut short by the interruption are made again")
        else:
            root = Path(output_root).expanduser() if output_root is not None else Path(cfg.experiment.output_dir)
            run_dir = new_run_dir(root, cfg.experiment.name, run_id)
            done, previous = [], None
        experiment = Experiment(cfg, dataset, run_dir, llm, method)
        experiment.begin(done, previous)
        finished = {r["id"] for r in done}
        pending = [q for q in dataset.questions if q.id not in finished]
        progress_bar = Progress(len(dataset), done, cfg.experiment.name, progress)
        await experiment.answer_all(pending, cfg.run.concurrency, progress_bar)
        progress_bar.close()
        progress_bar = None
        summary = experiment.write_summary(finished=True)
        return RunResult(run_dir=run_dir, summary=summary)
    except BaseException:
        if experiment is not None:
            experiment.write_summary()
            log.warning("run stopped; resume it with: selfrag run --resume %s", experiment.run_dir)
        raise
    finally:
        if progress_bar is not None:
            progress_bar.close()
        if own_llm:
            await llm.aclose()


def run_experiment(cfg: ExperimentConfig, **kwargs: Any) -> RunResult:
    """Synchronous wrapper of :func:`run_experiment_async`."""
    return asyncio.run(run_experiment_async(cfg, **kwargs))
