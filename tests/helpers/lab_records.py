"""Prediction records as the quality benchmark reads them, for the lab's tests."""

from __future__ import annotations

import json
from pathlib import Path

from lab.quality_stats import best_over, f1_score


def pred(qid, answer, *, gold=("Paris",), f1=None, error=False, retrieved=True, calls=2, tokens=100,
         latency_ms=1000.0, candidates=()):
    """One answered (or failed) question's record."""
    if error:
        return {"id": qid, "prediction": None, "error": {"type": "BackendError", "message": "x"},
                "metrics": {}, "accounting": {"latency_ms": 5.0}}
    f1 = best_over(f1_score, answer, gold) if f1 is None else f1
    return {
        "id": qid, "question": f"q {qid}", "gold": list(gold), "prediction": answer,
        "metrics": {"em": float(answer == gold[0]), "f1": f1},
        "accounting": {"llm_calls": calls, "total_tokens": tokens, "latency_ms": latency_ms, "retrieved": retrieved},
        "model": "m.gguf", "candidates": list(candidates),
    }


def traced(qid: str, gold_title: str = "A") -> dict:
    """A self_rag-like record whose trace has both what the report reads and the bulk it does not."""
    rank = {"step_id": 2, "action": "rank_evidence", "thought": "t" * 500, "observation": "o" * 500,
            "action_input": "i", "llm_calls": 0, "latency_ms": 1.5, "details": {"ranked_by": "fused", "passages": [
                {"index": 1, "title": gold_title, "model": 1.0, "judged": True, "prior": 0.7, "score": 3.2,
                 "named": True, "linked": False, "fused": 0.85, "kept": True},
                {"index": 2, "title": "B", "model": 0.0, "judged": True, "prior": 0.2, "score": 1.1,
                 "named": False, "linked": False, "fused": 0.1, "kept": False}]}}
    decision = {"step_id": 1, "action": "retrieval_decision", "thought": "t" * 300, "details": {"p_yes": 0.9}}
    generate = {"step_id": 3, "action": "generate_and_critique", "thought": "x" * 2000, "observation": "y" * 2000,
                "details": {}}
    candidates = [
        {"text": "Paris", "passage": "p" * 3000, "support": "fully supported",
         "details": {"sup": 0.9, "passage_indices": [1, 2], "selected": True}},
        {"text": "Lyon", "passage": "q" * 3000, "support": "no support", "details": {"sup": 0.2, "passage_indices": [2]}},
    ]
    row = pred(qid, "Paris", candidates=candidates)
    row.update(reasoning_chain=[decision, rank, generate], sources=[{"id": gold_title, "title": gold_title}],
               details={"context_used": "c" * 5000, "retrieval_needed": True,
                        "iterations": [{"iteration": 1, "query": "q" * 200, "reason": "r" * 300,
                                        "reformulated_query": "f" * 200, "decision": "NO",
                                        "documents": [{"id": "B", "title": "B"}]}],
                        "all_candidates": [{"passage_title": gold_title, "passage_indices": [1], "joint": False,
                                            "relevance": "relevant"}]})
    return row


def write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
