"""self_rag (combined critique) through the experiment runner, end to end.

Real files and the real SQLite cache; the model is the in-package scripted
backend loaded from a JSON file (``llm.spec=scripted:PATH``), answering by key
because questions and candidate chains run concurrently:

* the retrieval-decision prompt: "yes";
* a candidate prompt, by its passage's text: an answer plus ``[IsRel]`` / ``[IsSup]`` lines;
* a utility prompt, by the answer it rates: a digit.

Each question has two passages, both retrieved (top_k 2), so every question
costs the combined budget ``1 + 2 × num_candidates`` = 5 calls.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from selfrag.config import load_config
from selfrag.eval.ledger import read_ledger
from selfrag.eval.results import read_predictions
from selfrag.eval.runner import run_experiment_async

DECISION = "checked in reference documents"
STEPS = [
    "retrieval_decision",
    "retrieve",
    "generate_and_critique",
    "rate_utility",
    "generate_and_critique",
    "rate_utility",
    "select_best",
]


# Per question: gold, then each passage's (text, reply, answer, utility), in retrieval order.
# Candidate score = utility + 2 × support bonus (1 / 0.5 / 0) + 0.5 if relevant.
QUESTIONS = {
    "q1": (
        "Paris",
        [
            ("The capital number 1 is Paris.", "Paris\n[IsRel] relevant\n[IsSup] fully supported", "Paris", 5),
            ("Old maps of region 1 show rivers.", "Seine\n[IsRel] irrelevant\n[IsSup] no support", "Seine", 1),
        ],
    ),
    # The second passage's candidate wins (4 + 2 + 0.5 = 6.5 beats 3 + 1 + 0.5 = 4.5), and is wrong.
    "q2": (
        "Berlin",
        [
            ("The capital number 2 is Berlin.", "Berlin\n[IsRel] relevant\n[IsSup] partially supported", "Berlin", 3),
            ("Old maps of region 2 show rivers.", "Bonn\n[IsRel] relevant\n[IsSup] fully supported", "Bonn", 4),
        ],
    ),
    "q3": (
        "Rome",
        [
            ("The capital number 3 is Rome.", "It is Rome, Italy\n[IsRel] relevant\n[IsSup] fully supported",
             "It is Rome, Italy", 5),
            ("Old maps of region 3 show rivers.", "Tiber\n[IsRel] irrelevant\n[IsSup] no support", "Tiber", 2),
        ],
    ),
    "q4": (
        "Madrid",
        [
            ("The capital number 4 is Madrid.", "Madrid\n[IsRel] relevant\n[IsSup] fully supported", "Madrid", 4),
            ("Old maps of region 4 show rivers.", "Tagus\n[IsRel] irrelevant\n[IsSup] no support", "Tagus", 5),
        ],
    ),
}
SELECTED = {"q1": "Paris", "q2": "Bonn", "q3": "It is Rome, Italy", "q4": "Madrid"}
SCORES = {"q1": [7.5, 1.0], "q2": [4.5, 6.5], "q3": [7.5, 2.0], "q4": [6.5, 5.0]}
# em / f1 of the selected answer against the gold one.
METRICS = {"q1": (1.0, 1.0), "q2": (0.0, 0.0), "q3": (0.0, 0.4), "q4": (1.0, 1.0)}
BUDGET = 1 + 2 * 2


def write_dataset(tmp_path: Path) -> Path:
    rows = []
    for n, (qid, (gold, passages)) in enumerate(QUESTIONS.items(), start=1):
        rows.append({
            "id": qid,
            "question": f"What is the capital number {n}?",
            "answers": [gold],
            "type": "bridge",
            "level": "easy",
            "contexts": [{"title": f"{qid}-{i}", "text": text} for i, (text, *_) in enumerate(passages)],
            "supporting_titles": [f"{qid}-0"],
        })
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_script(tmp_path: Path) -> Path:
    script: dict[str, object] = {DECISION: "yes"}
    for _, passages in QUESTIONS.values():
        for _, _, answer, utility in passages:
            script[f"Answer: {answer}\n\nReply with one digit"] = str(utility)
    for _, passages in QUESTIONS.values():
        for text, reply, _, _ in passages:
            script[text] = reply
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path


SEED000 = Path(__file__).resolve().parents[1] / "configs" / "self_rag_seed000.yaml"


def config(tmp_path: Path, *extra: str):
    """Seed 000's preset as it ships, on this test's data and scripted model."""
    return load_config(SEED000, overrides=[
        "data.dataset=jsonl", f"data.path={write_dataset(tmp_path)}",
        f"llm.spec=scripted:{write_script(tmp_path)}",
        f"experiment.output_dir={tmp_path / 'results'}", f"cache.path={tmp_path / 'cache.db'}",
        "experiment.name=self_rag_runner", "retrieval.top_k=2", *extra,
    ])


def calls_by_question(run_dir: Path) -> Counter:
    """(session, question id) -> LLM calls, from the run's ledger."""
    return Counter((e["session"], e["id"]) for e in read_ledger(run_dir / "ledger.jsonl") if e["event"] == "call")


def check_record(record: dict) -> None:
    qid = record["id"]
    _, passages = QUESTIONS[qid]
    assert "error" not in record
    assert record["method"] == "self_rag"
    # The answer is the selected candidate: the best score, the earlier passage on a tie.
    candidates = record["candidates"]
    assert [c["text"] for c in candidates] == [answer for _, _, answer, _ in passages]
    assert [c["passage"]["text"] for c in candidates] == [text for text, *_ in passages]
    assert [c["score"] for c in candidates] == SCORES[qid]
    best = max(range(len(candidates)), key=lambda i: (candidates[i]["score"], -i))
    assert record["prediction"] == candidates[best]["text"] == SELECTED[qid]
    # Metrics of that answer.
    em, f1 = METRICS[qid]
    assert record["metrics"]["em"] == em
    assert record["metrics"]["f1"] == pytest.approx(f1)
    assert record["metrics"]["retrieval_recall@2"] == 1.0
    # The combined budget, as the method counted it.
    acc = record["accounting"]
    assert acc["llm_calls"] == 1 + 2 * len(candidates) == BUDGET
    assert acc["retrieval_calls"] == 1 and acc["retrieved"] is True and acc["retrieval_needed"] is True
    # The trace: every step, in order, and the choice it made.
    chain = record["reasoning_chain"]
    assert [s["action"] for s in chain] == STEPS
    assert [s["llm_calls"] for s in chain] == [1, 0, 1, 1, 1, 1, 0]
    assert chain[0]["details"]["retrieval_needed"] is True
    generated = [s for s in chain if s["action"] == "generate_and_critique"]
    assert [s["details"]["passage_id"] for s in generated] == [f"{qid}-{i}" for i in range(2)]
    assert chain[-1]["details"] == {"selected": best + 1, "scores": SCORES[qid]}
    details = record["details"]
    assert details["critic"] == "prompted" and details["retrieval_needed"] is True
    assert details["total_docs_retrieved"] == 2
    assert details["context_used"] == [passages[best][0]]


async def test_self_rag_run_directory(tmp_path):
    result = await run_experiment_async(config(tmp_path, "run.concurrency=2"), progress=False)
    run_dir = result.run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml", "ledger.jsonl", "predictions.jsonl", "summary.json"]
    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert written["architecture"]["name"] == "self_rag"

    records = read_predictions(run_dir / "predictions.jsonl")
    ids = [r["id"] for r in records]
    assert sorted(ids) == ["q1", "q2", "q3", "q4"] and len(ids) == len(set(ids))
    for record in records:
        check_record(record)
    # The calls the backend actually made, per question, are the budget too.
    assert calls_by_question(run_dir) == {(1, qid): BUDGET for qid in QUESTIONS}

    s = json.loads((run_dir / "summary.json").read_text())
    assert s == result.summary
    assert (s["n_questions"], s["n_answered"], s["n_errors"], s["complete"]) == (4, 4, 0, True)
    assert (s["method"], s["retriever"], s["top_k"]) == ("self_rag", "bm25", 2)
    assert s["metrics"]["em"] == pytest.approx(0.5)
    assert s["metrics"]["f1"] == pytest.approx((1 + 0 + 0.4 + 1) / 4)
    assert s["llm_calls"] == {"total": 4 * BUDGET, "per_question": float(BUDGET)}
    assert s["retrieval_rate"] == 1.0
    assert s["cache"] == {"enabled": True, "hits": 0, "misses": 4 * BUDGET}


async def test_a_resumed_self_rag_run_answers_each_question_once(tmp_path):
    first = await run_experiment_async(config(tmp_path, "data.subset_size=2"), progress=False)
    run_dir = first.run_dir
    assert sorted(r["id"] for r in read_predictions(run_dir / "predictions.jsonl")) == ["q1", "q2"]

    result = await run_experiment_async(config(tmp_path, "run.concurrency=2"), resume_dir=run_dir, progress=False)
    records = read_predictions(run_dir / "predictions.jsonl")
    ids = [r["id"] for r in records]
    assert sorted(ids) == ["q1", "q2", "q3", "q4"] and len(ids) == 4
    for record in records:
        check_record(record)
    assert {r["id"]: r["session"] for r in records} == {"q1": 1, "q2": 1, "q3": 2, "q4": 2}
    # The second session asked only about the questions it had left, each at the full budget.
    assert calls_by_question(run_dir) == {
        (1, "q1"): BUDGET, (1, "q2"): BUDGET, (2, "q3"): BUDGET, (2, "q4"): BUDGET,
    }
    s = result.summary
    assert (s["n_answered"], s["n_errors"], s["complete"]) == (4, 0, True)
    assert len(s["sessions"]) == 2 and s["sessions"][1]["resumed"] is True
    assert s["llm_calls"] == {"total": 4 * BUDGET, "per_question": float(BUDGET)}
    assert s["metrics"]["em"] == pytest.approx(0.5)
