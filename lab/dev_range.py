"""What the dev measurements (``relevance_dev.py``, ``judge_dev.py``) share.

Each reads a range of HotpotQA dev questions outside the quality benchmark's
samples, writes one JSON line per question under
``results/runs/quality/<model>/critics/``, resumes where it stopped, and
prints a summary of what is on disk.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from quality_runs import DATASETS
from quality_stats import read_jsonl

HERE = Path(__file__).resolve().parent


def out_path(tag: str, name: str, skip: int) -> Path:
    return HERE / "results" / "runs" / "quality" / tag / "critics" / f"{name}_{skip}.jsonl"


def pending(skip: int, n: int, path: Path, done: set[str] | None = None) -> list[Any]:
    """Questions ``skip`` .. ``skip + n - 1`` not in ``done`` (default: the ids ``path`` has a line for);
    the folder of ``path`` is made."""
    from selfrag.config import DataSection
    from selfrag.eval.datasets import load_dataset

    data = DataSection(dataset="hotpotqa", path=str(DATASETS["hotpotqa"].path), skip=skip, subset_size=n)
    if done is None:
        done = {r.get("id") for r in read_jsonl(path)}
    path.parent.mkdir(parents=True, exist_ok=True)
    return [q for q in load_dataset(data).questions if q.id not in done]


def append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def arguments(doc: str, llm_help: str, skip: int, n: int) -> argparse.ArgumentParser:
    """The options every dev measurement takes: --llm, --skip, --n, --report-only."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--llm", required=True, help=llm_help)
    ap.add_argument("--skip", type=int, default=skip, help=f"first question (0-based) of the range (default {skip})")
    ap.add_argument("--n", type=int, default=n, help=f"questions (default {n})")
    ap.add_argument("--report-only", action="store_true", help="read what is on disk; run nothing")
    return ap
