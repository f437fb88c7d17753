"""What the runs view reads from a run's files, parsed once while the files stay the same.

A run's ``predictions.jsonl`` can be hundreds of megabytes (every question's
trace); parsing it on every request made each click of the runs page take
seconds and its memory. :class:`FileCache` keeps a value computed from some
files until one of them changes (its inode, size or modification time), for
the :data:`KEPT_RUNS` runs used last. What is kept is small: a run's summary,
and :class:`RunIndex`, each question's table row and where its record's line
is in the file; a question's trace is read from that line when it is opened.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..eval.results import unique_records
from ..validation import load_json

# Runs whose parsed files are kept (the least recently used one goes first).
KEPT_RUNS = 8
# The fields of a record a table row reads (see selfrag.serve.runs.row); the trace is left in the file.
ROW_FIELDS = ("id", "question", "gold", "prediction", "type", "error", "abstained", "metrics", "accounting")
_SPAN = "__span__"


def signature(paths: Sequence[Path]) -> tuple:
    """What says a file changed: inode, size and modification time of each (None for a missing one)."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class FileCache:
    """Values computed from files, kept while the files are unchanged; at most ``size`` of them.

    Two requests for the same value while it is computed wait for one computation.
    """

    def __init__(self, size: int = KEPT_RUNS) -> None:
        self.size = size
        self._entries: OrderedDict[Any, tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[Any, threading.Lock] = {}

    def get(self, key: Any, paths: Sequence[Path], build: Callable[[], Any]) -> Any:
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:
            sig = signature(paths)
            with self._lock:
                hit = self._entries.get(key)
                if hit is not None and hit[0] == sig:
                    self._entries.move_to_end(key)
                    return hit[1]
            value = build()  # files that change meanwhile give another signature next time: built again
            with self._lock:
                self._entries[key] = (sig, value)
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            return value

    def forget(self, key: Any) -> None:
        with self._lock:
            self._entries.pop(key, None)


@dataclass(frozen=True)
class RunIndex:
    """One record per question (as the run's readers count them): its row fields, and where its line is."""

    records: list[dict[str, Any]]  # ROW_FIELDS of each kept record
    spans: dict[str, tuple[int, int]]  # question id (as text) -> (start, end) of its line in the file
    dropped: int  # lines that are not a record (a torn last line, a damaged one)


def index_predictions(raw: bytes) -> RunIndex:
    """Read a predictions file's bytes line by line, keeping only what a table row needs."""
    slim: list[dict[str, Any]] = []
    dropped = 0
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        end = len(raw) if end < 0 else end
        line = raw[pos:end]
        if line.strip():
            try:
                obj = load_json(line, surrogates="replace")
            except ValueError:
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("id"), (str, int)) and not isinstance(obj["id"], bool):
                slim.append({**{k: obj[k] for k in ROW_FIELDS if k in obj}, _SPAN: (pos, end)})
            else:
                dropped += 1
        pos = end + 1
    kept, _ = unique_records(slim)
    spans = {str(rec["id"]): rec.pop(_SPAN) for rec in kept}
    return RunIndex(kept, spans, dropped)
