"""What git keeps of a quality run directory: ``predictions.slim.jsonl.gz``.

A run's ``predictions.jsonl`` carries each question's whole trace: every step's
thought and observation, the text of every passage a candidate read, the joint
context. For the Self-RAG runs that is 2-5 MB per 100 questions, too much to
commit for every run. The lab keeps beside it a slim copy, gzip-compressed,
with the same records minus the bulk:

* the reasoning chain keeps only the steps the report reads (``rank_evidence``,
  ``retrieval_decision`` and the all-passages-filtered marker), each as its
  action and details; a ranked passage keeps its index, title, the model's
  reading, whether it was judged, the lexical prior, the fused score and
  whether the joint kept it;
* a candidate keeps everything but the passage text it read;
* ``details`` keeps everything but the joint context (``context_used``) and the
  free text of ``self_corrective``'s searches (query, the judge's reason, the
  rewritten query).

So every question keeps its answer, metrics and cost, the ids of the passages
retrieved and cited, and every candidate with its answer text, its critique
readings and scores, the passages it read and whether it was selected: the
records the report's tables and intervals are computed from, and enough to
compute selection oracles or a confidence's AUROC later.

Each slim line is a valid prediction record (marked ``"trace_trimmed": true``),
so on a fresh clone, where ``predictions.jsonl`` is not in git, the slim copy
is unpacked to ``predictions.jsonl`` and the run resumes from it: answered
questions are not asked again, and the report reads the same numbers. Full
traces of the restored questions are gone; rerun a question to see its trace.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from lab.quality_stats import NO_RELEVANT_DOCUMENTS, read_jsonl

PREDICTIONS = "predictions.jsonl"
KEPT = "predictions.slim.jsonl.gz"
KEPT_STEPS = frozenset({"rank_evidence", "retrieval_decision", "confidence_draft", NO_RELEVANT_DOCUMENTS})
RANKED_PASSAGE = ("index", "title", "model", "judged", "prior", "fused", "kept")
SEARCH_TEXT = frozenset({"query", "reason", "reformulated_query"})


def _step(step: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"action": step.get("action")}
    details = step.get("details")
    if isinstance(details, dict) and details:
        details = dict(details)
        if isinstance(details.get("passages"), list):
            details["passages"] = [{k: p[k] for k in RANKED_PASSAGE if k in p} if isinstance(p, dict) else p
                                   for p in details["passages"]]
        out["details"] = details
    return out


def _details(details: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in details.items() if k != "context_used"}
    if isinstance(out.get("iterations"), list):
        out["iterations"] = [{k: v for k, v in it.items() if k not in SEARCH_TEXT} if isinstance(it, dict) else it
                             for it in out["iterations"]]
    return out


def slim(row: dict[str, Any]) -> dict[str, Any]:
    """One prediction record without the parts of its trace the report does not read."""
    out = dict(row)
    if isinstance(row.get("reasoning_chain"), list):
        out["reasoning_chain"] = [_step(step) for step in row["reasoning_chain"]
                                  if isinstance(step, dict) and step.get("action") in KEPT_STEPS]
    if isinstance(row.get("candidates"), list):
        out["candidates"] = [{k: v for k, v in c.items() if k != "passage"} if isinstance(c, dict) else c
                             for c in row["candidates"]]
    if isinstance(row.get("details"), dict):
        out["details"] = _details(row["details"])
    out["trace_trimmed"] = True
    return out


def slim_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(slim(r), ensure_ascii=False) + "\n" for r in rows)


def read_kept(path: Path) -> str:
    """The JSONL text of a slim copy."""
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def write_kept(path: Path, text: str) -> None:
    """Write a slim copy through a temporary file and a rename (a kill never leaves a torn copy).
    The gzip header carries no time stamp, so the same records always give the same bytes."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    os.replace(tmp, path)


def refresh(dest: Path) -> bool:
    """Rewrite ``dest``'s slim copy from its ``predictions.jsonl`` when they differ; True if written.

    A copy written after the last change to ``predictions.jsonl`` is taken as current without
    reading either file (the report calls this for every run directory each time it is written).
    """
    source, target = dest / PREDICTIONS, dest / KEPT
    if not source.is_file():
        return False
    if target.is_file() and target.stat().st_mtime_ns > source.stat().st_mtime_ns:
        return False
    text = slim_text(read_jsonl(source))
    if target.is_file() and read_kept(target) == text:
        return False
    write_kept(target, text)
    return True


def restore(dest: Path) -> bool:
    """Unpack the slim copy to ``predictions.jsonl`` when only the slim copy is here (a fresh clone)."""
    source, target = dest / KEPT, dest / PREDICTIONS
    if target.exists() or not source.is_file():
        return False
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(read_kept(source), encoding="utf-8")
    os.replace(tmp, target)
    return True


def has_predictions(dest: Path) -> bool:
    return (dest / PREDICTIONS).is_file() or (dest / KEPT).is_file()


def predictions(dest: Path) -> Path:
    """``dest``'s ``predictions.jsonl``, restored from the slim copy if need be, with the copy up to date."""
    restore(dest)
    refresh(dest)
    return dest / PREDICTIONS
