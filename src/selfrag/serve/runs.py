"""The run directories under ``--runs``, read with selfrag's own readers, never outside it.

A run is named by its path relative to the root (``a``, ``quality/embedded/self_rag``).
:meth:`RunsRoot.resolve` is the only way from a name to a folder: it refuses
absolute paths, ``..``, hidden parts and anything whose real path (links
followed) is not inside the root. Every file of a run is then read with the
root as its bound (``within``, :func:`selfrag.eval.results.read_bytes`): a
``summary.json``, ``predictions.jsonl``, ``ledger.jsonl`` or ``config.yaml``
that links out of the root is refused with 403, never read.

What is read is kept while the files stay the same (:mod:`selfrag.serve.run_cache`),
and an error about a run names it by its name, never by where the server keeps it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..eval.report import compare_row, load_run
from ..eval.results import (
    CONFIG_FILE,
    PREDICTIONS_FILE,
    RUN_FILES,
    SUMMARY_FILE,
    OutsideRoot,
    check_within,
    read_bytes,
    read_json,
)
from ..validation import load_json
from .errors import ApiError
from .run_cache import FileCache, RunIndex, index_predictions
from .settings import Limits
from .view import trace_view

log = logging.getLogger("selfrag.serve")

MAX_DEPTH = 6
MAX_RUNS = 1000
# The metric that says whether an answer is right, first one present wins.
CORRECTNESS = ("accuracy", "match", "em")


class RunsRoot:
    def __init__(self, root: Path, *, max_file_bytes: int = Limits().max_run_file_bytes) -> None:
        self.root = Path(root).expanduser().resolve()
        self.max_file_bytes = max_file_bytes
        self.cache = FileCache()

    # -- names to folders -------------------------------------------------------------

    def resolve(self, run_id: Any) -> Path:
        if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 1000:
            raise ApiError(400, "give a run: ?run=NAME, a path inside the runs folder", param="run")
        parts = run_id.split("/")
        if (
            run_id.startswith("/")
            or "\\" in run_id
            or "\x00" in run_id
            or any(p in ("", ".", "..") or p.startswith(".") for p in parts)
        ):
            raise ApiError(400, f"run {run_id!r} is not a plain path inside the runs folder (no '..', no '/' first)",
                           param="run", code="bad_run")
        path = (self.root / run_id).resolve()
        if not path.is_relative_to(self.root):
            raise ApiError(403, f"run {run_id!r} is outside the runs folder", param="run", code="outside_runs")
        if not (path / CONFIG_FILE).is_file():
            raise ApiError(404, f"no run {run_id!r} in the runs folder", param="run", code="no_run")
        with confined():
            for name in RUN_FILES:
                check_within(path / name, self.root)
        return path

    def _walk(self, folder: Path, depth: int) -> Iterator[Path]:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
                continue
            if (entry / CONFIG_FILE).is_file():
                yield entry
            elif depth < MAX_DEPTH:
                yield from self._walk(entry, depth + 1)

    def list(self) -> list[dict[str, Any]]:
        """Every run under the root (up to MAX_RUNS), with what its summary.json says."""
        out = []
        for path in self._walk(self.root, 1):
            facts: dict[str, Any] = {}
            if (path / SUMMARY_FILE).is_file():
                try:
                    self.check_size(path / SUMMARY_FILE, path.relative_to(self.root).as_posix())
                    facts = read_json(path / SUMMARY_FILE, self.root)
                except Exception:  # a half-written summary, a huge one, one linked out: list the run all the same
                    facts = {}
            if not isinstance(facts, dict):  # a summary that is not an object: the run is listed without its facts
                facts = {}
            metrics = facts.get("metrics") if isinstance(facts.get("metrics"), dict) else {}
            out.append({
                "id": path.relative_to(self.root).as_posix(),
                "method": facts.get("method"),
                "model": facts.get("model"),
                "dataset": facts.get("dataset"),
                "n_answered": facts.get("n_answered"),
                "em": metrics.get("em"),
                "f1": metrics.get("f1"),
            })
            if len(out) >= MAX_RUNS:
                break
        return out

    # -- one run ----------------------------------------------------------------------

    def index(self, run_id: str) -> RunIndex:
        """Each question's row fields and where its record is (one per question id, the first answer)."""
        path = self.resolve(run_id)
        predictions = path / PREDICTIONS_FILE

        def build() -> RunIndex:
            with self.named(run_id):
                if not predictions.is_file():
                    check_within(predictions, self.root)
                    return RunIndex([], {}, 0)
                self.check_size(predictions, run_id)
                return index_predictions(read_bytes(predictions, self.root))

        return self.cache.get(("index", path), [predictions], build)

    def records(self, run_id: str) -> list[dict[str, Any]]:
        return self.index(run_id).records

    def record(self, run_id: str, qid: str) -> dict[str, Any] | None:
        """A question's whole record (its trace included), read from its line; None: no such question."""
        path = self.resolve(run_id)
        for _ in range(2):  # the file changed since it was indexed: index it again, once
            span = self.index(run_id).spans.get(qid)
            if span is None:
                return None
            with self.named(run_id):
                self.check_size(path / PREDICTIONS_FILE, run_id)
                line = read_bytes(path / PREDICTIONS_FILE, self.root)[span[0]:span[1]]
            try:
                rec = load_json(line, surrogates="replace")
            except ValueError:
                rec = None
            if isinstance(rec, dict) and str(rec.get("id")) == qid:
                return rec
            self.cache.forget(("index", path))
        raise ApiError(409, f"run {run_id!r} is being written; try again", param="run", code="run_changed")

    def summary(self, run_id: str) -> dict[str, Any]:
        path = self.resolve(run_id)

        def build() -> dict[str, Any]:
            with self.named(run_id):
                for name in RUN_FILES:
                    self.check_size(path / name, run_id)
                if (path / SUMMARY_FILE).is_file():
                    written = read_json(path / SUMMARY_FILE, self.root)
                    if not isinstance(written, dict):
                        raise ApiError(400, f"run {run_id!r}: its {SUMMARY_FILE} is not a JSON object, as "
                                       "`selfrag run` writes it", param="run", code="bad_run")
                try:
                    return load_run(path, within=self.root)
                except (AttributeError, TypeError, ValueError) as exc:  # a file edited by hand
                    log.warning("run %s: its files do not read as `selfrag run` writes them (%s: %s)",
                                run_id, type(exc).__name__, exc)
                    raise ApiError(400, f"run {run_id!r}: its {SUMMARY_FILE} or {PREDICTIONS_FILE} holds a value of "
                                   "the wrong type (not as `selfrag run` writes it)", param="run",
                                   code="bad_run") from None

        summary = dict(self.cache.get(("summary", path), [path / name for name in RUN_FILES], build))
        summary["run_dir"] = run_id  # the name, not where it is on this machine
        return summary

    def check_size(self, path: Path, run_id: str) -> None:
        """Refuse (413) a run file over the bound, before reading it."""
        try:
            size = path.stat().st_size
        except OSError:
            return  # missing: the readers say so
        if size > self.max_file_bytes:
            mb = self.max_file_bytes / 2**20
            raise ApiError(413, f"{run_id}/{path.name} is {size / 2**20:.0f} MB, over the runs view's limit of "
                           f"{mb:g} MB (--max-run-file-mb); read it with `selfrag analyze`", param="run",
                           code="run_too_large")

    @contextmanager
    def named(self, run_id: str) -> Iterator[None]:
        """Errors reading a run's files: a link out of the root is 403; any other names the run's files by
        their place in the runs folder, not by the server's own path."""
        try:
            yield
        except OutsideRoot as exc:
            raise ApiError(403, str(exc), param="run", code="outside_runs") from None
        except DataError as exc:
            where = str(self.root)
            message = str(exc).replace(where + "/", "").replace(where, self.root.name)
            raise ApiError(400, message, param="run", code="bad_run") from None

    def table(self, run_id: str) -> dict[str, Any]:
        summary = self.summary(run_id)
        return {"run": run_id, "summary": summary, "row": compare_row(summary),
                "questions": [row(r) for r in self.records(run_id)]}

    def question(self, run_id: str, qid: Any) -> dict[str, Any]:
        rec = self.record(run_id, str(qid))
        if rec is None:
            raise ApiError(404, f"run {run_id!r} has no question {qid!r}", param="id", code="no_question")
        return {"run": run_id, "record": rec, "view": trace_view(rec)}

    def compare(self, a: str, b: str) -> dict[str, Any]:
        """Two runs question by question (joined by question id, in the first run's order)."""
        first, second = self.records(a), {str(r["id"]): r for r in self.records(b)}
        pairs = []
        for rec in first:
            other = second.get(str(rec["id"]))
            if other is None:
                continue
            left, right = row(rec), row(other)
            pairs.append({
                "id": rec["id"], "question": rec.get("question"), "gold": rec.get("gold"),
                "a": left, "b": right, "outcome": _outcome(left["correct"], right["correct"]),
                "f1_delta": _delta(left["f1"], right["f1"]),
            })
        return {
            "a": {"run": a, "row": compare_row(self.summary(a))},
            "b": {"run": b, "row": compare_row(self.summary(b))},
            "questions": pairs,
            "only_in_a": len(first) - len(pairs),
            "only_in_b": len(second) - len(pairs),
        }


@contextmanager
def confined() -> Iterator[None]:
    """A run file that links out of the runs folder as a 403 refusal."""
    try:
        yield
    except OutsideRoot as exc:
        raise ApiError(403, str(exc), param="run", code="outside_runs") from None


def correct(metrics: dict[str, Any]) -> bool | None:
    for key in CORRECTNESS:
        value = metrics.get(key)
        if isinstance(value, (int, float)):
            return value >= 1
    return None


def row(rec: dict[str, Any]) -> dict[str, Any]:
    """One question of a run as a table row (no trace)."""
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    acc = rec.get("accounting") if isinstance(rec.get("accounting"), dict) else {}
    error = rec.get("error")
    return {
        "id": rec.get("id"),
        "question": rec.get("question"),
        "gold": rec.get("gold"),
        "prediction": rec.get("prediction"),
        "type": rec.get("type"),
        "error": error.get("message") if isinstance(error, dict) else None,
        "abstained": rec.get("abstained") is True,
        "correct": None if error else correct(metrics),
        "em": metrics.get("em"),
        "f1": metrics.get("f1"),
        "latency_ms": acc.get("latency_ms"),
        "cost_usd": acc.get("cost_usd"),
        "llm_calls": acc.get("llm_calls"),
        "retrieved": acc.get("retrieved"),
    }


def _outcome(a: bool | None, b: bool | None) -> str:
    if a is None or b is None:
        return "unscored"
    return {(True, True): "both right", (True, False): "a only", (False, True): "b only"}.get((a, b), "both wrong")


def _delta(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(b - a, 4)
    return None
