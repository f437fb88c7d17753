"""benchmarks/relevance_replay.py: a finished label-question critic run replayed with the default relevance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import quality_runs  # noqa: E402
import relevance_replay  # noqa: E402

from selfrag.llm import ScriptedBackend  # noqa: E402


def test_the_runs_own_ranking_is_read_from_its_rank_evidence_step():
    record = {"reasoning_chain": [{"action": "rank_evidence", "details": {"passages": [
        {"index": 1, "title": "A", "model": 0.9, "judged": True, "fused": 0.7, "kept": True},
        {"index": 2, "title": "B", "model": 0.5, "judged": False, "fused": 0.8, "kept": True},
        {"index": 3, "title": "C", "model": 0.1, "judged": True, "fused": 0.1, "kept": False}]}}]}
    assert relevance_replay.label_values(record) == {"A": 0.9, "C": 0.1}  # B was not judged: imputed
    assert relevance_replay.run_kept(record) == ["B", "A"]
    assert relevance_replay.label_values({}) is None and relevance_replay.run_kept({}) is None


class Responder(ScriptedBackend):
    """Label question: 0.5 for every passage; the question is likely only after the passage that
    holds the gold answer; the joint answer is the gold answer."""

    def __init__(self, gold: dict[str, str]):
        super().__init__(model="replay")
        self.gold = gold

    def _next_response(self, request):
        prompt = request.prompt_text()
        if request.forced is not None:
            answer = self.gold[request.forced]
            return {"forced_logprobs": [-0.1 if answer in prompt else -3.0]}
        if "Does the document above" in prompt:
            return {"text": "relevant", "top_logprobs": [{"relevant": -0.693, "irrelevant": -0.693}]}
        question = next(q for q in self.gold if q in prompt)
        return self.gold[question]


@pytest.mark.skipif(not quality_runs.DATASETS["hotpotqa"].path.is_file(), reason="benchmark data not found")
def test_a_replay_rewrites_only_the_answers_whose_passages_changed_and_resumes(tmp_path, monkeypatch, capsys):
    lines = quality_runs.DATASETS["hotpotqa"].path.read_text().splitlines()[:3]
    questions = [json.loads(line) for line in lines]
    gold = {q["question"]: q["answer"] for q in questions}
    for variant, answer in (("self_rag_critic_label", "wrong"), ("vanilla_rag", "wrong")):
        rows = [{"id": q["id"], "prediction": answer, "gold": [q["answer"]], "metrics": {"f1": 0.0}} for q in questions]
        (tmp_path / variant).mkdir()
        (tmp_path / variant / "predictions.slim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(relevance_replay, "run_dir", lambda out, tag, dataset, variant: tmp_path / variant.name)
    monkeypatch.setattr(relevance_replay, "out_path", lambda tag, dataset: tmp_path / "replay.jsonl")
    monkeypatch.setattr("selfrag.llm.factory.create_backend", lambda spec: Responder(gold))

    assert relevance_replay.main(["--llm", "scripted:unused.json"]) == 0
    out = [json.loads(line) for line in (tmp_path / "replay.jsonl").read_text().splitlines()]
    assert [r["id"] for r in out] == [q["id"] for q in questions]
    for r, q in zip(out, questions, strict=True):
        assert len(r["p_label"]) == len(r["p_likelihood"]) == 10 and not r["fallback"]
        # the run's answer stands unless the passages the joint draft reads changed
        assert r["answer_mean"] == (q["answer"] if r["changed"] else "wrong")
        assert r["kept_run"] is None and len(r["kept_mean"]) == 5
    summary = json.loads(capsys.readouterr().out)
    changed = sum(r["changed"] for r in out)
    assert changed >= 1  # the likelihood moved the answer-bearing passage up for at least one question
    assert (summary["n"], summary["better"], summary["worse"], summary["passages changed"]) == (3, changed, 0, changed)
    assert summary["label (the run)"] == 0.0
    label, mean = summary["every gold paragraph among the joint's passages (label / mean)"]
    assert 0 <= label <= 3 and 0 <= mean <= 3

    assert relevance_replay.main(["--llm", "scripted:unused.json"]) == 0  # resumes: nothing new
    assert len((tmp_path / "replay.jsonl").read_text().splitlines()) == 3
