"""A run directory on disk: ``config.yaml``, ``predictions.jsonl``, ``summary.json``.

(The run's ``ledger.jsonl`` and ``run.lock`` are in :mod:`.ledger` and :mod:`.run_lock`.)
``predictions.jsonl`` gets one line per question, written and flushed as the
question completes, so a killed run loses at most the line being written. On
resume :func:`repair_predictions` cuts a torn last line and drops error lines
(those questions are answered again; their finished LLM calls come from the
cache). Readers take one record per question id (:func:`unique_records`).

A record keeps the passages the method cited (``citations``: id and title,
like ``sources``) and whether it abstained. Records written before those
fields existed read as "no citation information" (:func:`record_citations`
gives None) and "did not abstain" (:func:`record_abstained`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..config import redact
from ..errors import DataError
from ..serialize import candidates_json, steps_json, to_jsonable
from ..types import Question, RAGResponse
from ..validation import load_json
from .disk import is_disk_full, why_not_written

CONFIG_FILE = "config.yaml"
PREDICTIONS_FILE = "predictions.jsonl"
SUMMARY_FILE = "summary.json"
# Every file of a run a reader opens (ledger.jsonl: selfrag.eval.ledger.LEDGER_FILE).
RUN_FILES = (CONFIG_FILE, PREDICTIONS_FILE, SUMMARY_FILE, "ledger.jsonl")

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class RunFileError(DataError):
    """A file of a run directory could not be written: no question can be recorded, so the run stops."""


def cannot_write(path: Path, exc: OSError, *, then: str | None = None) -> RunFileError:
    """The one-line error for a file of a run directory that cannot be written; a full disk is named.
    ``then`` says how to go on once space is freed (by default: resume the run)."""
    if is_disk_full(path, exc) or exc.errno == errno.EFBIG:
        then = then or f"resume with: selfrag run --resume {path.parent}"
        return RunFileError(f"cannot write {path}: {why_not_written(path, exc)}, then {then}")
    reason = why_not_written(path, exc)
    return RunFileError(f"cannot write {path} ({reason}); make it writable, or start a new run with --output DIR")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an OS error while writing ``path`` into a one-line :class:`DataError`."""
    try:
        yield
    except OSError as exc:
        raise cannot_write(path, exc) from None


def _unusable_output(root: Path, exc: OSError) -> DataError:
    fix = "give --output (or experiment.output_dir) a folder you can write to"
    for path in (root, *root.parents):
        if path.exists() and not path.is_dir():
            where = "" if path == root else f", so {root} cannot be created"
            return DataError(f"{path} is a file, not a folder{where}; {fix}")
    return DataError(f"cannot create a run directory in {root} ({exc.strerror or type(exc).__name__}); {fix}")


def _make_dir(path: Path, root: Path) -> bool:
    """Create ``path`` (and, for the root, its parents); False if ``path`` already exists."""
    try:
        path.mkdir(parents=path == root)
    except FileExistsError as exc:
        if path == root and not path.is_dir():
            raise _unusable_output(root, exc) from None
        return False
    except OSError as exc:
        raise _unusable_output(root, exc) from None
    return True


def new_run_dir(root: Path, name: str, run_id: str | None = None) -> Path:
    """Create ``root/<run_id>``; the default id is ``<UTC time>_<experiment name>``."""
    _make_dir(root, root)
    if run_id is not None:
        if not run_id or _UNSAFE.search(run_id) or run_id in (".", ".."):
            raise DataError(f"run id {run_id!r} may hold only letters, digits, '_', '.' and '-'")
        path = root / run_id
        if not _make_dir(path, root):
            raise DataError(f"{path} already exists; pick another --run-id or --resume it")
        return path
    base = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}_{_UNSAFE.sub('-', name).strip('-') or 'run'}"
    for n in range(1, 1000):
        path = root / (base if n == 1 else f"{base}-{n}")
        if _make_dir(path, root):
            return path
    raise DataError(f"cannot create a run directory under {root}")


def _question_fields(question: Question) -> dict[str, Any]:
    fields = {
        "id": question.id,
        "question": question.text,
        "gold": list(question.answers),
        "type": question.type,
        "level": question.level,
    }
    if question.metadata.get("subject"):
        fields["subject"] = question.metadata["subject"]
    if "answerable" in question.metadata:  # set by data.remove_gold
        fields["answerable"] = bool(question.metadata["answerable"])
    return fields


def prediction_record(
    question: Question, response: RAGResponse, metrics: dict[str, float], accounting: dict[str, Any]
) -> dict[str, Any]:
    return {
        **_question_fields(question),
        "prediction": response.answer,
        "metrics": metrics,
        "accounting": accounting,
        "method": response.architecture,
        "model": response.model,
        "sources": [{"id": d.id, "title": d.title} for d in response.sources],
        "citations": [{"id": d.id, "title": d.title} for d in response.citations],
        "read": [{"id": d.id, "title": d.title} for d in response.read],
        "abstained": response.abstained,
        "confidence": response.confidence,  # how it was read: details.confidence
        "reasoning_chain": steps_json(response.reasoning_chain),
        "candidates": candidates_json(response.candidates),
        "details": to_jsonable(response.details),
    }


def error_record(question: Question, exc: BaseException, latency_ms: float) -> dict[str, Any]:
    return {
        **_question_fields(question),
        "prediction": None,
        "error": {"type": type(exc).__name__, "message": redact(str(exc) or repr(exc))},
        "metrics": {},
        "accounting": {"latency_ms": round(latency_ms, 3)},
    }


def record_citations(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The passages a record cites (``id``, ``title``); None for a record from before citations."""
    cited = record.get("citations")
    return list(cited) if isinstance(cited, list) else None


def record_abstained(record: dict[str, Any]) -> bool:
    """Whether the method abstained; a record from before abstention did not."""
    return record.get("abstained") is True


class PredictionWriter:
    """Appends one JSON line per question and flushes it at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with writing(path):
            self._fh = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        with writing(self.path):
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file; what is still buffered is written (an OS error is a one-line error)."""
        with writing(self.path):
            self._fh.close()  # the descriptor is closed even when the last flush fails

    def abandon(self) -> None:
        """Close after an error that is being reported: a second failure to flush is not news."""
        with suppress(OSError):
            self._fh.close()


class OutsideRoot(DataError):
    """A file of a run links out of the folder it may be read from (the server's ``--runs``)."""


def _real_path(fd: int, path: Path) -> Path:
    """Where the open file ``fd`` really is (links followed), from the kernel when it can say."""
    proc = Path(f"/proc/self/fd/{fd}")
    try:
        return Path(os.readlink(proc))
    except OSError:
        return path.resolve()


def read_bytes(path: Path, within: Path | None = None) -> bytes:
    """The bytes of a run's file; with ``within``, only a regular file whose real path is inside it.

    Every reader of a run's files (summary, predictions, ledger, config) goes
    through here, so a server showing the runs under a folder never reads what a
    symbolic link inside a run points to elsewhere. The check is made on the
    opened file itself, so swapping a link in between cannot get around it; a
    FIFO or device is refused without blocking on it.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if within is not None:
            real = _real_path(fd, path)
            if not real.is_relative_to(within):
                raise OutsideRoot(f"{path.name} of run {path.parent.name} links outside the runs folder; refused")
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutsideRoot(f"{path.name} of run {path.parent.name} is not a regular file; refused")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def check_within(path: Path, within: Path | None) -> None:
    """Refuse (:class:`OutsideRoot`) a file whose real path is not inside ``within``; None: no check."""
    if within is not None and path.exists() and not path.resolve().is_relative_to(within):
        raise OutsideRoot(f"{path.name} of run {path.parent.name} links outside the runs folder; refused")


def read_predictions(path: Path, within: Path | None = None) -> list[dict[str, Any]]:
    """Every complete, valid line of a predictions file (a torn last line is ignored)."""
    if not path.is_file():
        check_within(path, within)
        return []
    records, _ = _parse(read_bytes(path, within), path)
    return records


def _parse(raw: bytes, path: Path) -> tuple[list[dict[str, Any]], int]:
    """Records and the number of lines that had to be dropped."""
    records: list[dict[str, Any]] = []
    dropped = 0
    lines = raw.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = load_json(line, surrogates="replace")
        except (json.JSONDecodeError, UnicodeDecodeError):
            obj = None
        if not isinstance(obj, dict) or "id" not in obj:
            dropped += 1
            torn = lineno == len(lines)
            log.warning("%s:%d: %s line dropped", path, lineno, "torn last" if torn else "unreadable")
            continue
        records.append(obj)
    return records, dropped


def unique_records(records: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One record per question id, and the ids that were repeated (in the order first seen twice).

    The first answer of a question is kept (an error line only when there is
    no answer), which is what ``--resume`` keeps too, so a file reads the same
    before and after a resumption repairs it.
    """
    kept: dict[str, dict[str, Any]] = {}
    repeated: dict[str, None] = {}
    for rec in records:
        qid = rec["id"]
        first = kept.get(qid)
        if first is None:
            kept[qid] = rec
            continue
        repeated[qid] = None
        if first.get("error") is not None and rec.get("error") is None:
            kept[qid] = rec
    return list(kept.values()), list(repeated)


def repair_predictions(path: Path) -> list[dict[str, Any]]:
    """Keep the answered questions of an interrupted run; rewrite the file if needed.

    Drops a torn last line, unreadable lines, error lines and repeated ids
    (keeping the first), so every remaining question appears exactly once.
    """
    if not path.is_file():
        return []
    raw = path.read_bytes()
    records, dropped = _parse(raw, path)
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    repeated = 0
    for rec in records:
        if rec.get("error") is not None or rec["id"] in seen:
            dropped += 1
            repeated += rec["id"] in seen
            continue
        seen.add(rec["id"])
        kept.append(rec)
    if repeated:
        log.warning("%s: dropped %d repeated answer(s), keeping the first answer of each question", path, repeated)
    if dropped or (raw and not raw.endswith(b"\n")):
        write_atomically(path, "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in kept), sync=True)
    return kept


def write_atomically(path: Path, text: str, *, sync: bool = False) -> None:
    """Write ``text`` to ``path`` through ``PATH.tmp`` and a rename, so neither a reader nor a kill
    mid-write ever finds half a file; ``sync`` also forces it to the disk before the rename. A write
    that fails (a full disk) leaves no ``.tmp`` behind and raises a one-line error."""
    tmp = path.with_name(path.name + ".tmp")
    with writing(path):
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError:
            with suppress(OSError):
                tmp.unlink()
            raise


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
    write_atomically(path, json.dumps(to_jsonable(data), indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path, within: Path | None = None) -> Any:
    """A run's JSON file (``within``: see :func:`read_bytes`)."""
    try:
        return load_json(read_bytes(path, within), surrogates="replace")
    except FileNotFoundError:
        raise DataError(f"{path} not found; is {path.parent} a run directory?") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def check_run_dir(path: Path, within: Path | None = None, *, config_optional: bool = False) -> Path:
    """``path`` if it is a run directory: it holds a ``config.yaml`` or, with ``config_optional`` (a
    resume given the run's config), the run's other files."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise DataError(f"run directory not found: {path}")
    if not (path / CONFIG_FILE).is_file():
        others = [name for name in RUN_FILES if name != CONFIG_FILE and (path / name).is_file()]
        if not others:
            raise DataError(f"{path} is not a run directory (no {CONFIG_FILE})")
        if not config_optional:
            raise DataError(f"{path} has no {CONFIG_FILE} (its run was stopped before writing it); resume it "
                            f"with the config it was started with: selfrag run CONFIG --resume {path}")
        return path
    check_within(path / CONFIG_FILE, within)
    return path
