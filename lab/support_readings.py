"""Support readings of candidate answers over the passages the answer was written from (issue 58).

    python -m lab.support_readings --llm llamacpp:PATH --dataset hotpotqa --dataset hotpotqa_next
    python -m lab.support_readings --llm llamacpp:PATH --dataset hotpotqa --dataset hotpotqa_next --report-only

The support critique of ``self_rag`` judges each one-passage candidate
against its own passage, and separates right from wrong candidates at AUC
0.63 at best on the 1.5B model. This study reads every candidate of a
recorded run (the joint answer and the one-passage ones; the runs that wrote
all four) again over the *joint answer's* passages, the evidence the method
trusts most, in two ways that share that prompt's evaluation:

* ``p_true``: the model shown the candidate as its own reply and asked
  whether it is correct according to the passages (P(True) at the first
  token), the confidence's ``p_true`` call;
* ``likelihood``: the mean token log-probability of the candidate as the
  reply to the joint answer's prompt (one scoring pass, no generation; what
  ``self_rag.selection: likelihood`` reads);

and, without a call, ``votes`` (how many of the question's candidates say
the same, normalised) and ``contained`` (the share of the candidate's words
found in those passages). It first writes the joint answer again from the
rebuilt prompt and records whether it is the recorded one, so a report says
how faithfully the prompts were rebuilt.

For each reading: the AUC of right (F1 >= 0.5) against wrong (F1 = 0)
candidates, pooled over questions as ``lab.quality_critique`` counts the
critiques', and the F1 of choosing the candidate the reading scores highest
against the recorded answer and the oracle. Results are appended question by
question to ``results/runs/support/<model>/<dataset>.jsonl`` (a run resumes
where it stopped) and summarised in ``results/support_readings.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.confidence_drafts import fmt
from lab.machine import machine
from lab.quality_runs import DATASETS, model_tag, say
from lab.quality_stats import auc, paired_bootstrap
from selfrag.config import DataSection
from selfrag.eval.datasets import load_dataset
from selfrag.eval.metrics import best_over, f1_score
from selfrag.llm.factory import create_backend
from selfrag.methods.catalog.self_rag.config import SelfRAGConfig
from selfrag.methods.core.context import answer_prompt, build_context
from selfrag.methods.core.text import clean_answer
from selfrag.methods.core.trace import Run
from selfrag.methods.critique.confidence import contained, p_true
from selfrag.methods.critique.support_likelihood import evidence_likelihoods
from selfrag.normalize import normalize_answer
from selfrag.types import Document, Question

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
ROOT = OUT / "runs" / "support"
# The last commit whose self_rag quality runs wrote every candidate for every question (since then the
# one-passage candidates are written only when the joint answer is empty); its records are read from git.
RECORDS_COMMIT = "c29f4b1"
READINGS = ("p_true", "likelihood", "votes", "contained")


def records_at(commit: str, model: str, dataset: str) -> list[dict[str, Any]]:
    """The ``self_rag`` run's records of ``model`` on ``dataset`` as committed at ``commit``."""
    path = f"lab/results/runs/quality/{model}/{dataset}/self_rag/predictions.slim.jsonl.gz"
    try:
        blob = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=HERE.parent, capture_output=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"support readings: cannot read {path} at {commit} ({exc.__class__.__name__}); "
                         "run from a git clone that holds that commit") from None
    return [json.loads(line) for line in gzip.decompress(blob).decode("utf-8").splitlines() if line.strip()]


def joint_of(record: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in record.get("candidates") or [] if (c.get("details") or {}).get("joint")), None)


def passages_read(record: dict[str, Any], question: Question) -> list[Document] | None:
    """The joint answer's passages, in the order it read them (None: the record has no joint answer,
    or names a passage the question does not hold)."""
    joint = joint_of(record)
    if joint is None:
        return None
    by_title = {d.title: d for d in question.contexts}
    order = [by_title.get(s.get("title")) for s in record.get("sources") or []]
    indices = joint["details"].get("passage_indices") or []
    if any(not 0 < i <= len(order) or order[i - 1] is None for i in indices):
        return None
    return [order[i - 1] for i in indices]


async def read_question(llm: Any, question: Question, record: dict[str, Any], max_context: int) -> dict[str, Any]:
    """One question's readings: per distinct candidate text, P(True) and likelihood over the joint's passages."""
    read = passages_read(record, question)
    if read is None:
        return {"id": record["id"], "skipped": "no joint answer with known passages"}
    context, _ = build_context(read, max_context, llm.count_tokens)
    run = Run(llm, None, {"max_tokens": 256, "temperature": 0.0})
    prompt = answer_prompt(question)(question.text, context)
    again = await run.generate(prompt, action="support_rewrite", max_tokens=64)
    texts: dict[str, str] = {}
    for c in record.get("candidates") or []:
        text = str(c.get("text") or "").strip()
        if text and normalize_answer(text) not in texts:
            texts[normalize_answer(text)] = text
    truths = [await p_true(run, question, context, text) for text in texts.values()]
    likelihoods = await evidence_likelihoods(run, question, list(texts.values()), context)
    rows = [{"key": key, "text": text, "p_true": truth, "likelihood": likelihood, "contained": contained(text, read)}
            for (key, text), truth, likelihood in zip(texts.items(), truths, likelihoods, strict=True)]
    recorded = (joint_of(record) or {}).get("text") or ""
    return {"id": record["id"], "reproduced": clean_answer(again.text) == recorded.strip(),
            "readings": rows}


async def measure(spec: str, records: list[dict[str, Any]], dataset: str, limit: int | None) -> Path:
    records = records[:limit]
    ds = DATASETS[dataset]
    # Every question of the file, found by id: the records say which were asked.
    questions = {q.id: q for q in load_dataset(DataSection(dataset=ds.kind, path=str(ds.path))).questions}
    out = ROOT / model_tag(spec) / f"{dataset}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()} if out.exists() else set()
    llm = create_backend(spec, n_ctx=4096, seed=0)
    max_context = SelfRAGConfig().max_context_tokens
    todo = [r for r in records if r["id"] not in done and r["id"] in questions]
    say(f"support readings: {len(done)} done, {len(todo)} to read -> {out}")
    for n, record in enumerate(todo, start=1):
        row = await read_question(llm, questions[record["id"]], record, max_context)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        say(f"  {n}/{len(todo)} {record['id']}: {len(row.get('readings', []))} candidates")
    return out


def candidate_scores(record: dict[str, Any], reading_row: dict[str, Any]) -> list[tuple[float, bool, dict[str, float | None]]]:
    """(F1 against the gold, whether it says what the joint answer says, readings) of every recorded
    candidate of one question, the joint answer first."""
    by_key = {r["key"]: r for r in reading_row.get("readings") or []}
    cands = [str(c.get("text") or "").strip() for c in record.get("candidates") or []]
    keys = [normalize_answer(t) for t in cands]
    joint = normalize_answer(str((joint_of(record) or {}).get("text") or ""))
    out = []
    for text, key in zip(cands, keys, strict=True):
        if key not in by_key:
            continue
        r = by_key[key]
        values = {"p_true": r.get("p_true"), "likelihood": r.get("likelihood"), "contained": r.get("contained"),
                  "votes": float(sum(k == key for k in keys))}
        out.append((best_over(f1_score, text, record.get("gold") or []), key == joint, values))
    return out


def _split(scored: Sequence[tuple[float, bool, dict[str, float | None]]], name: str,
           without_joint: bool = False) -> tuple[list[float], list[float]]:
    """A reading's values of right (F1 >= 0.5) and wrong (F1 = 0) candidates (partial ones left out;
    ``without_joint``: those saying what the joint answer says too)."""
    kept = [(f, v[name]) for f, joint, v in scored if v[name] is not None and not (without_joint and joint)]
    return [v for f, v in kept if f >= 0.5], [v for f, v in kept if f == 0.0]


def summarise(records: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per reading: the AUC of right against wrong candidates pooled over questions (as the critiques'
    support AUC is counted), the same without the candidates that say what the joint answer says (the
    joint answer is the prompt's own greedy reply, so its likelihood is high by construction), the mean
    AUC within a question (questions with a right and a wrong candidate), and the F1 of choosing by it."""
    by_id = {r["id"]: r for r in records}
    read = [r for r in rows if r.get("readings") and r["id"] in by_id]
    report: dict[str, Any] = {"n_questions": len(read), "reproduced": sum(bool(r.get("reproduced")) for r in read)}
    pooled: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in READINGS}
    others: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in READINGS}
    within: dict[str, list[float]] = {k: [] for k in READINGS}
    chosen: dict[str, list[float]] = {k: [] for k in READINGS}
    answer, oracle = [], []
    for row in read:
        record = by_id[row["id"]]
        scored = candidate_scores(record, row)
        if not scored:
            continue
        answer.append(best_over(f1_score, str(record.get("prediction") or ""), record.get("gold") or []))
        oracle.append(max(f for f, _, _ in scored))
        for name in READINGS:
            pos, neg = _split(scored, name)
            pooled[name][0].extend(pos)
            pooled[name][1].extend(neg)
            pos_o, neg_o = _split(scored, name, without_joint=True)
            others[name][0].extend(pos_o)
            others[name][1].extend(neg_o)
            if pos and neg:
                within[name].append(auc(pos, neg))
            known = [(f, v[name]) for f, _, v in scored if v[name] is not None]
            # The first candidate (the joint answer) wins ties: a reading must rank another above it.
            chosen[name].append(max(known, key=lambda fv: fv[1])[0] if known else scored[0][0])
    report["answer_f1"], report["oracle_f1"], report["n_selected"] = _mean(answer), _mean(oracle), len(answer)
    report["readings"] = {
        name: {"auc": auc(*pooled[name]), "n_right": len(pooled[name][0]), "n_wrong": len(pooled[name][1]),
               "auc_others": auc(*others[name]), "n_right_others": len(others[name][0]),
               "n_wrong_others": len(others[name][1]), "auc_within": _mean(within[name]),
               "n_within": len(within[name]), "chosen_f1": _mean(chosen[name]),
               "chosen_vs_answer": paired_bootstrap(chosen[name], answer)}
        for name in READINGS}
    return report


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def render(reports: dict[str, dict[str, Any]], env: dict[str, Any]) -> str:
    lines = ["# Support readings of candidate answers", "",
             f"Written by `python -m lab.support_readings` on {env.get('date', '?')} at commit "
             f"{env.get('commit', '?')}. Every candidate of a recorded run read again over the joint answer's "
             "passages; right = F1 >= 0.5, wrong = F1 = 0 (partial answers left out), pooled over questions.",
             ""]
    for name, rep in reports.items():
        lines += [f"## {name}", "",
                  f"The candidates of the `self_rag` run committed at {rep['records_commit']} "
                  f"(`passage_candidates: always` then). {rep['n_questions']} questions; the joint answer written again from the rebuilt prompt "
                  f"matched the recorded one on {rep['reproduced']}. F1 of the recorded answer "
                  f"{fmt(rep['answer_f1'])}, of the best candidate (oracle) {fmt(rep['oracle_f1'])}.", "",
                  "| reading | AUC right vs wrong | right x wrong | AUC without the joint answer's text | right x wrong "
                  "| AUC within a question (questions) | F1 choosing by it | minus the answer's [95% CI] |",
                  "|---|---|---|---|---|---|---|---|"]
        for reading, r in rep["readings"].items():
            lines.append(f"| {reading} | {fmt(r['auc'])} | {r['n_right']} x {r['n_wrong']} | {fmt(r['auc_others'])} "
                         f"| {r['n_right_others']} x {r['n_wrong_others']} | {fmt(r['auc_within'])} ({r['n_within']}) "
                         f"| {fmt(r['chosen_f1'])} | {_interval(r['chosen_vs_answer'])} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _interval(diff: dict[str, float] | None) -> str:
    return "–" if diff is None else f"{diff['diff']:+.3f} [{diff['lo']:+.3f}, {diff['hi']:+.3f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", required=True, help="llamacpp:PATH of the model that wrote the records")
    ap.add_argument("--dataset", action="append", choices=("hotpotqa", "hotpotqa_next"), required=True,
                    help="a sample whose self_rag records to read (repeat for several)")
    ap.add_argument("--commit", default=RECORDS_COMMIT, help="the commit holding the records (default %(default)s)")
    ap.add_argument("--limit", type=int, help="read only the first N records")
    ap.add_argument("--report-only", action="store_true", help="summarise what was read, no model call")
    args = ap.parse_args(argv)
    model = model_tag(args.llm)
    reports = {}
    for dataset in args.dataset:
        records = records_at(args.commit, model, dataset)
        if not args.report_only:
            asyncio.run(measure(args.llm, records, dataset, args.limit))
        readings = ROOT / model / f"{dataset}.jsonl"
        if readings.exists():
            rows = [json.loads(line) for line in readings.read_text(encoding="utf-8").splitlines() if line.strip()]
            reports[f"{model}, {dataset}"] = summarise(records, rows) | {"records_commit": args.commit}
    env = machine()
    (OUT / f"support_readings_{model}.json").write_text(json.dumps({"env": env, "reports": reports}, indent=2)
                                                         + "\n", encoding="utf-8")
    (OUT / f"support_readings_{model}.md").write_text(render(reports, env), encoding="utf-8")
    say(f"wrote {OUT / f'support_readings_{model}.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
