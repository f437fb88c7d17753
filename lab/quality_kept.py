"""What git keeps of a quality run directory: ``predictions.slim.jsonl``.

A run's ``predictions.jsonl`` carries each question's whole trace: every step's
thought and observation, the text of every passage a candidate read, the joint
context. For the Self-RAG runs that is 2-5 MB per 100 questions, too much to
commit for every run. The report reads only a few parts of a trace, so the
benchmark keeps beside it a slim copy with the same lines minus the bulk:

* the reasoning chain keeps only the steps the report reads (``rank_evidence``,
  ``retrieval_decision`` and the all-passages-filtered marker), each without
  its thought, action input and observation text;
* a candidate keeps everything but the passage text it read;
* ``details`` keeps everything but ``context_used``.

Each slim line is a valid prediction record (marked ``"trace_trimmed": true``),
so on a fresh clone, where ``predictions.jsonl`` is not in git, the slim copy
is copied back to ``predictions.jsonl`` and the run resumes from it: answered
questions are not asked again, and the report reads the same numbers. Full
traces of the restored questions are gone; rerun a question to see its trace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from quality_stats import read_jsonl

from selfrag.methods.self_rag import NO_RELEVANT_DOCUMENTS

PREDICTIONS = "predictions.jsonl"
KEPT = "predictions.slim.jsonl"
KEPT_STEPS = frozenset({"rank_evidence", "retrieval_decision", NO_RELEVANT_DOCUMENTS})
STEP_TEXT = ("thought", "action_input", "observation")


def slim(row: dict[str, Any]) -> dict[str, Any]:
    """One prediction record without the parts of its trace the report does not read."""
    out = dict(row)
    if isinstance(row.get("reasoning_chain"), list):
        out["reasoning_chain"] = [
            {k: v for k, v in step.items() if k not in STEP_TEXT}
            for step in row["reasoning_chain"]
            if isinstance(step, dict) and step.get("action") in KEPT_STEPS
        ]
    if isinstance(row.get("candidates"), list):
        out["candidates"] = [
            {k: v for k, v in c.items() if k != "passage"} if isinstance(c, dict) else c
            for c in row["candidates"]
        ]
    if isinstance(row.get("details"), dict):
        out["details"] = {k: v for k, v in row["details"].items() if k != "context_used"}
    out["trace_trimmed"] = True
    return out


def _text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(slim(r), ensure_ascii=False) + "\n" for r in rows)


def refresh(dest: Path) -> bool:
    """Rewrite ``dest``'s slim copy from its ``predictions.jsonl`` when they differ; True if written.

    A copy written after the last change to ``predictions.jsonl`` is taken as current without
    reading either file (the report calls this for every run directory each time it is written).
    The write goes through a temporary file and a rename, so a kill never leaves a torn copy.
    """
    source, target = dest / PREDICTIONS, dest / KEPT
    if not source.is_file():
        return False
    if target.is_file() and target.stat().st_mtime_ns > source.stat().st_mtime_ns:
        return False
    text = _text(read_jsonl(source))
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return False
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return True


def restore(dest: Path) -> bool:
    """Copy the slim copy back to ``predictions.jsonl`` when only the slim copy is here (a fresh clone)."""
    source, target = dest / KEPT, dest / PREDICTIONS
    if target.exists() or not source.is_file():
        return False
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(source.read_bytes())
    os.replace(tmp, target)
    return True


def has_predictions(dest: Path) -> bool:
    return (dest / PREDICTIONS).is_file() or (dest / KEPT).is_file()


def predictions(dest: Path) -> Path:
    """``dest``'s ``predictions.jsonl``, restored from the slim copy if need be, with the copy up to date."""
    restore(dest)
    refresh(dest)
    return dest / PREDICTIONS
