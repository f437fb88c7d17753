"""The experiment runner: every question of a dataset through one method.

Questions run concurrently (at most ``run.concurrency`` at a time). Each one
is scored after the method answers and written to ``predictions.jsonl`` at
once; ``summary.json`` is refreshed as the run goes and written at the end.
A question that fails (a backend error after its retries, a bad record) becomes
an error line and the run goes on; errors that no question can survive (a
missing dependency, an import that fails, a rejected API key) stop the run. A finished run whose
share of failed questions is above ``run.max_error_rate`` (or in which every
question failed) has the status ``failed``.

One process at a time works in a run directory (:mod:`.run_lock`). Every LLM
call and every session is flushed to ``ledger.jsonl`` as it happens
(:mod:`.ledger`), and the summary's sessions, wall time, cache hits and misses
and spending are computed from it, so they stay exact across ``kill -9``.

Resuming (``resume_dir``) keeps the questions already answered, answers the
rest, and, with the cache on, replays every LLM call that had finished, so no
call is paid twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assemble import build_backend, build_method, build_retriever
from ..config import ExperimentConfig, dump_yaml, redact, with_absolute_paths
from ..errors import BackendError, ConfigError, DataError, MissingDependencyError, SelfragError
from ..methods.core.base import Method
from ..types import Question
from .datasets import Dataset, load_dataset
from .ledger import LEDGER_FILE, Ledger, LedgerBackend, account, current_question
from .progress import Progress
from .results import (
    CONFIG_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    PredictionWriter,
    RunFileError,
    check_run_dir,
    error_record,
    new_run_dir,
    prediction_record,
    read_json,
    repair_predictions,
    write_atomically,
    write_json,
    writing,
)
from .resume import METHOD_SETTINGS, check_same_settings
from .run_lock import RunLock
from .scoring import accounting, question_metrics
from .summary import run_status, summarize

log = logging.getLogger(__name__)
SUMMARY_EVERY_S = 30.0
# Backend statuses that say the backend itself is unusable (bad key, no such model).
FATAL_STATUSES = {401, 403, 404}


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]


def is_fatal(exc: BaseException) -> bool:
    """Errors that would fail every question alike: stop the run instead of recording them.

    An ``ImportError`` is one: the installation is broken or was changed under a running process; so is
    a run file that cannot be written (a full disk): no answer could be recorded.
    """
    if isinstance(exc, (ConfigError, MissingDependencyError, ImportError, RunFileError)):
        return True
    return isinstance(exc, BackendError) and exc.status in FATAL_STATUSES


def _check_documents(method: Method, has_shared: bool, questions: Sequence[Question], hint: str = "") -> None:
    if not method.uses_retrieval or has_shared:
        return
    bare = [q.id for q in questions if not q.contexts]
    if bare:
        raise DataError(
            f"method {method.name} retrieves, but {len(bare)} question(s) (e.g. {bare[0]}) have no contexts; "
            "give a shared collection with data.corpus or retrieval.index" + hint
        )


class Experiment:
    """One invocation of a run (a fresh run or a resumption) and its bookkeeping."""

    def __init__(self, cfg: ExperimentConfig, dataset: Dataset, run_dir: Path, llm: Any, method: Method,
                 ledger: Ledger) -> None:
        self.cfg = cfg
        self.dataset = dataset
        self.run_dir = run_dir
        self.llm = llm
        self.method = method
        self.ledger = ledger
        # recall@k names the method's own resolved top_k (None: a method that does not retrieve).
        self.top_k = method.config.get("top_k")
        self.records: list[dict[str, Any]] = []
        self._order = {q.id: i for i, q in enumerate(dataset.questions)}
        self._last_summary = 0.0

    # -- bookkeeping -------------------------------------------------------------
    def begin(self, resumed: list[dict[str, Any]], previous: dict[str, Any] | None) -> None:
        self.records = list(resumed)
        if previous and not self.ledger.events:
            self.ledger.import_sessions(previous.get("sessions") or [])  # a run from before the ledger
        self.ledger.begin(resumed=previous is not None)
        # Through a rename: a kill mid-write never leaves an empty config.yaml (which --resume needs).
        write_atomically(self.run_dir / CONFIG_FILE, dump_yaml(self.cfg), sync=True)
        self.write_summary("running")

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if time.perf_counter() - self._last_summary > SUMMARY_EVERY_S:
            self.write_summary("running")

    def finish(self, stopped: bool = False) -> dict[str, Any]:
        """Close the session: its ``end`` event, then the summary."""
        status = "stopped" if stopped else self.status()[0]
        self.ledger.end(status)
        return self.write_summary(status)

    def status(self) -> tuple[str, str | None]:
        ordered = sorted(self.records, key=lambda r: self._order.get(r["id"], len(self._order)))
        return run_status(ordered, len(self.dataset), self.cfg.run.max_error_rate)

    def write_summary(self, status: str) -> dict[str, Any]:
        self._last_summary = time.perf_counter()
        failure = self.status()[1] if status == "failed" else None
        cfg = self.cfg
        totals = account(self.ledger.events, self.records)
        summary = {
            "run_id": self.run_dir.name,
            "experiment": cfg.experiment.name,
            "description": cfg.experiment.description,
            "method": self.method.name,
            "retriever": cfg.retrieval.method if self.method.uses_retrieval else None,
            "top_k": self.top_k if self.method.uses_retrieval else None,
            # Every setting the method ran with, defaults included: a resume compares them (resume.py).
            METHOD_SETTINGS: self.method.config.model_dump(mode="json"),
            "model": str(getattr(self.llm, "model", "") or ""),
            "llm_spec": str(getattr(self.llm, "spec", cfg.llm.spec) or ""),
            "dataset": cfg.data.dataset,
            "data_path": cfg.data.path or (self.dataset.source if self.dataset.sample else None),
            "skipped_records": self.dataset.skipped,
            "status": status,
            "complete": status == "complete",
            "failure": failure,
            "max_error_rate": cfg.run.max_error_rate,
            **summarize(self.records, len(self.dataset)),
            "wall_time_s": totals["wall_time_s"],
            "cache": {"enabled": cfg.cache.enabled, **totals["cache"]},
            "spent": totals["spent"],
            "sessions": totals["sessions"],
        }
        summary = redact(summary)
        write_json(self.run_dir / SUMMARY_FILE, summary)
        return summary

    # -- answering ---------------------------------------------------------------
    async def answer_one(self, question: Question, progress: Progress) -> dict[str, Any]:
        start = time.perf_counter()
        token = current_question.set(question.id)  # the ledger files this question's calls under its id
        try:
            response = await self.method.answer(question)
        except Exception as exc:  # one question's failure is recorded; the run goes on
            if is_fatal(exc):
                raise
            progress.say(f"question {question.id} failed: {type(exc).__name__}: {redact(str(exc))}")
            record = error_record(question, exc, (time.perf_counter() - start) * 1000)
            record["accounting"].update(self.ledger.take_counts(question.id))
        else:
            metrics = question_metrics(question, response, self.top_k)
            counts = self.ledger.take_counts(question.id)
            acc = {**accounting(response), "cache_hits": counts["cache_hits"], "cache_misses": counts["cache_misses"]}
            record = prediction_record(question, response, metrics, acc)
        finally:
            current_question.reset(token)
        record["session"] = self.ledger.session
        return record

    async def answer_all(self, pending: list[Question], concurrency: int, progress: Progress,
                         on_record: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        """Answer ``pending``; ``on_record(record)`` may return a line to print as each is answered."""
        writer = PredictionWriter(self.run_dir / PREDICTIONS_FILE)
        queue = iter(pending)

        async def worker() -> None:
            for question in queue:  # a shared iterator: each question is taken once
                record = await self.answer_one(question, progress)
                writer.write(record)
                error = record.get("error")
                self.ledger.question(record["id"], error["type"] if error else None)
                self.add(record)
                progress.update(record)
                if on_record is not None and (line := on_record(record)):
                    progress.print(line)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(concurrency, len(pending))):
                    group.create_task(worker())
        except BaseExceptionGroup as eg:
            writer.abandon()
            # Surface the first real error (a fatal one), not the group.
            first = eg.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
        except BaseException:
            writer.abandon()  # the error being raised is the one to show, not a second failed flush
            raise
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
    on_record: Callable[[dict[str, Any]], str | None] | None = None,
) -> RunResult:
    """Run (or resume) an experiment; returns the run directory and its summary.

    ``on_record(record)`` hears of each answered question and may return a line
    to print (``selfrag run --trace``).
    ``llm`` replaces the configured backend (the caller then closes it). The
    run directory is locked for the whole call; a second process is refused.
    """
    cfg = with_absolute_paths(cfg)
    with ExitStack() as held:
        if resume_dir is not None:
            # Lock before anything is read, repaired or loaded.
            resume_dir = check_run_dir(Path(resume_dir), config_optional=True).resolve()
            held.enter_context(RunLock.acquire(resume_dir))
            check_same_settings(cfg, resume_dir)  # before the dataset, index or model is loaded
        return await _run(cfg, held, output_root, run_id, resume_dir, progress, llm, on_record)


async def _run(cfg: ExperimentConfig, held: ExitStack, output_root: str | Path | None, run_id: str | None,
               resume_dir: Path | None, progress: bool, llm: Any,
               on_record: Callable[[dict[str, Any]], str | None] | None = None) -> RunResult:
    dataset = load_dataset(cfg.data)
    if dataset.skipped:
        log.warning("skipped %d malformed record(s), e.g. %s", dataset.skipped, dataset.skipped_examples[0])
    own_llm = llm is None
    llm = build_backend(cfg) if own_llm else llm
    tracked = LedgerBackend(llm)
    progress_bar: Progress | None = None
    experiment: Experiment | None = None
    try:
        retriever = build_retriever(cfg, dataset.corpus)
        method = build_method(cfg, tracked, retriever)
        _check_documents(method, retriever is not None, dataset.questions, dataset.missing_contexts_hint)
        if resume_dir is not None:
            run_dir = resume_dir
            done, previous = _resume_state(run_dir, dataset)
            if not cfg.cache.enabled and len(done) < len(dataset.questions):
                log.warning("the cache is off: calls of questions cut short by the interruption are made again")
        else:
            root = Path(output_root).expanduser() if output_root is not None else Path(cfg.experiment.output_dir)
            run_dir = new_run_dir(root, cfg.experiment.name, run_id)
            held.enter_context(RunLock.acquire(run_dir, fresh=True))
            done, previous = [], None
        with writing(run_dir / LEDGER_FILE):
            tracked.ledger = held.enter_context(Ledger(run_dir / LEDGER_FILE))
        experiment = Experiment(cfg, dataset, run_dir, llm, method, tracked.ledger)
        experiment.begin(done, previous)
        finished = {r["id"] for r in done}
        pending = [q for q in dataset.questions if q.id not in finished]
        progress_bar = Progress(len(dataset), done, cfg.experiment.name, progress)
        await experiment.answer_all(pending, cfg.run.concurrency, progress_bar, on_record)
        progress_bar.close()
        progress_bar = None
        summary = experiment.finish()
        return RunResult(run_dir=run_dir, summary=summary)
    except BaseException:
        if experiment is not None:
            with suppress(SelfragError):  # e.g. the disk is full: the first error is the one to show
                experiment.finish(stopped=True)
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
