"""Citations measured on recorded HotpotQA answers: the supporting-passage rule against citing everything.

    python -m lab.citations                        # every recorded HotpotQA run under lab/results/runs/quality
    python -m lab.citations --runs DIR --out DIR    # another root of run directories, another report folder

No model runs: each recorded answer (a run's ``predictions.slim.jsonl.gz`` or
``predictions.jsonl``) is taken with the passages its answer was written from
(``read``; a record from before ``read`` existed: its ``citations``, which
were every passage read) and the passages' texts from the HotpotQA file.
Two rules cite from them:

* **cite everything read**, what every method did before;
* **supporting** (:func:`selfrag.reflection.citing.supporting`, today's
  rule): the read passages that hold the answer, are named in the question,
  or bridge to a passage that holds it.

Each is scored like a run's evidence metrics (``selfrag.eval.evidence``):
precision, recall and F1 of the cited titles against the gold supporting
titles, and whether the answer occurs in a cited passage. Writes
``citations.md`` and ``citations.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selfrag.config import DataSection
from selfrag.eval.datasets import load_dataset
from selfrag.eval.evidence import answer_in_passages, evidence_scores
from selfrag.reflection.citing import supporting
from selfrag.types import Document

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOTPOT = ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
RULES = ("cite everything read", "supporting")


def records(run: Path) -> Iterator[dict[str, Any]]:
    """The prediction records of a run directory (the slim gzip file, else the full one)."""
    slim, full = run / "predictions.slim.jsonl.gz", run / "predictions.jsonl"
    if not slim.is_file() and not full.is_file():
        return
    with (gzip.open(slim, "rt", encoding="utf-8") if slim.is_file() else full.open(encoding="utf-8")) as fh:
        for line in fh:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line being written by a run in progress


def runs(root: Path) -> Iterator[tuple[str, str, str, Path]]:
    """(model, dataset, method, run directory) of every HotpotQA run under ``root``."""
    for model in sorted(p for p in root.iterdir() if p.is_dir()):
        for dataset in sorted(p for p in model.iterdir() if p.is_dir() and p.name.startswith("hotpotqa")):
            for run in sorted(p for p in dataset.iterdir() if p.is_dir()):
                yield model.name, dataset.name, run.name, run


def score(rows: list[dict[str, Any]], questions: dict[str, Any], rule: str) -> dict[str, Any] | None:
    """Mean evidence precision, recall, F1 and answer-in-citations of one rule over a run's answered records."""
    totals = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    found, checked, n, cited_count = 0.0, 0, 0, 0
    for row in rows:
        question = questions.get(str(row.get("id")))
        answer = row.get("prediction")
        if question is None or row.get("abstained") or not isinstance(answer, str) or row.get("error"):
            continue
        by_title = {d.title: d for d in question.contexts}
        named = row.get("read") if isinstance(row.get("read"), list) else row.get("citations") or []
        read: list[Document] = [by_title[c["title"]] for c in named if isinstance(c, dict) and c.get("title") in by_title]
        cited = read if rule == RULES[0] else [read[i] for i in supporting(question.text, answer, read)]
        evidence = evidence_scores([d.title for d in cited], question.metadata.get("supporting_titles") or [])
        if evidence is None:
            continue
        n += 1
        cited_count += len(cited)
        totals["precision"] += evidence.precision
        totals["recall"] += evidence.recall
        totals["f1"] += evidence.f1
        hit = answer_in_passages(answer, [f"{d.title}\n{d.text}" for d in cited])
        if hit is not None:
            checked += 1
            found += hit
    if not n:
        return None
    return {**{k: v / n for k, v in totals.items()}, "answer_in_citations": found / checked if checked else None,
            "n": n, "n_answer_checked": checked, "cited_per_answer": cited_count / n}


def measure(root: Path) -> list[dict[str, Any]]:
    questions = {q.id: q for q in load_dataset(DataSection(dataset="hotpotqa", path=str(HOTPOT))).questions}
    out = []
    for model, dataset, method, run in runs(root):
        rows = list(records(run))
        for rule in RULES:
            result = score(rows, questions, rule)
            if result is not None:
                out.append({"model": model, "dataset": dataset, "method": method, "rule": rule, **result})
    return out


def report(rows: list[dict[str, Any]], root: Path) -> str:
    lines = [
        "# Citations on recorded HotpotQA answers: supporting passages against citing everything read",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `lab/citations.py` from the records "
        f"under `{root.relative_to(ROOT) if root.is_relative_to(ROOT) else root}` (no model ran). Each answer is "
        "taken with the passages it was written from; the two rules cite from those. Evidence P / R / F1: the "
        "cited titles against the gold supporting titles (paragraph level), averaged over the answered "
        "questions; answer in citations: the share of checkable answers (not yes/no) found in a cited passage.",
        "",
        "| model | questions | method | rule | n | cited / answer | evidence P | evidence R | evidence F1 | "
        "answer in citations |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        aic = "-" if r["answer_in_citations"] is None else f"{r['answer_in_citations']:.3f}"
        lines.append(
            f"| {r['model']} | {r['dataset']} | `{r['method']}` | {r['rule']} | {r['n']} | "
            f"{r['cited_per_answer']:.2f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} | {aic} |")
    lines += ["", "The rule: `selfrag.reflection.citing` (docs/methods.md, \"Citations and abstention\")."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Citation rules scored on recorded HotpotQA answers.")
    parser.add_argument("--runs", type=Path, default=HERE / "results" / "runs" / "quality",
                        help="a folder of <model>/<dataset>/<method>/ run directories")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="where citations.md/.json go")
    args = parser.parse_args(argv)
    if not HOTPOT.is_file():
        print(f"the HotpotQA file is missing: {HOTPOT}", file=sys.stderr)
        return 1
    rows = measure(args.runs.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "citations.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    (args.out / "citations.md").write_text(report(rows, args.runs.resolve()), encoding="utf-8")
    print(f"{len(rows)} rows -> {args.out / 'citations.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
