"""Evidence and abstention through the runner (scripted LLM, real files), resume with old records,
and `selfrag analyze` / `selfrag compare` showing answerable vs unanswerable side by side."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.eval import runner
from selfrag.eval.evidence import ABSTENTION_METRICS, EVIDENCE_METRICS
from selfrag.eval.results import read_predictions
from selfrag.eval.runner import run_experiment_async
from selfrag.eval.unanswerable import picked

GOLD = {1: "Paris", 2: "Berlin", 3: "Rome", 4: "Madrid", 5: "Vienna", 6: "Oslo"}
# data.remove_gold: 0.5 picks q3..q6 of q1..q6 (by a hash of the id): two answerable, four unanswerable.
UNANSWERABLE = {f"q{i}" for i in GOLD if picked(f"q{i}", 0.5)}


def write_dataset(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is the capital number {i}?", "answers": [gold],
             "contexts": [{"title": f"T{i}", "text": f"The capital number {i} is {gold}."},
                          {"title": "Rivers", "text": "Unrelated text about rivers."}],
             "supporting_titles": [f"T{i}"]} for i, gold in GOLD.items()]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_script(tmp_path: Path) -> str:
    """Right answers except for q2 and q4 ("Lisbon")."""
    script = {f"capital number {i}?": ("Lisbon" if i in (2, 4) else gold) for i, gold in GOLD.items()}
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return str(path)


def config(tmp_path: Path, *extra: str):
    return load_config(overrides=[
        "architecture.name=vanilla_rag", "data.dataset=jsonl", f"data.path={write_dataset(tmp_path)}",
        f"llm.spec=scripted:{write_script(tmp_path)}", f"experiment.output_dir={tmp_path / 'results'}",
        f"cache.path={tmp_path / 'cache.db'}", "experiment.name=evidence", "retrieval.top_k=2", *extra,
    ])


class Abstaining:
    """A method that abstains on the questions named, as the method side's abstention option will."""

    def __init__(self, method, ids: set[str]) -> None:
        self._method = method
        self._ids = ids

    def __getattr__(self, name):
        return getattr(self._method, name)

    async def answer(self, question):
        response = await self._method.answer(question)
        if question.id not in self._ids:
            return response
        details = {**response.details, "withheld_answer": response.answer}
        return dataclasses.replace(response, answer="insufficient evidence", abstained=True, citations=(),
                                   details=details)


@pytest.fixture
def abstain_on(monkeypatch):
    def install(ids: set[str]) -> None:
        build = runner.build_method
        monkeypatch.setattr(runner, "build_method", lambda *a, **k: Abstaining(build(*a, **k), ids))
    return install


def test_unanswerable_ids_are_what_the_tests_expect():
    assert {"q3", "q4", "q5", "q6"} == UNANSWERABLE


async def test_records_and_summary_carry_citations_abstention_and_evidence(tmp_path, abstain_on):
    """q1 right, q2 wrong ("Lisbon"), q3 abstains; q4 wrong, q5 and q6 right; all answerable.

    Every answer reads both passages it retrieved (top_k 2): its gold T<i> and Rivers. A right answer
    cites T<i>, the passage that holds it; a wrong one ("Lisbon", in no passage) cites the first passage
    read, T<i> again (selfrag.reflection.citing). So evidence P = R = F1 = 1 on the 5 answered
    questions. Abstention 1/6; accuracy on the answered 3/5; truthfulness (1 - 1 + 0 - 1 + 1 + 1) / 6 =
    1/6. Joint F1: right answers (answer P = R = 1) give 1; wrong ones 0; mean over 5 = 3/5.
    """
    abstain_on({"q3"})
    result = await run_experiment_async(config(tmp_path), progress=False)
    records = {r["id"]: r for r in read_predictions(result.run_dir / "predictions.jsonl")}
    r1, r3 = records["q1"], records["q3"]
    assert r1["citations"] == [{"id": "q1-0", "title": "T1"}]
    assert r1["read"] == [{"id": "q1-0", "title": "T1"}, {"id": "q1-1", "title": "Rivers"}]
    assert r1["abstained"] is False and "answerable" not in r1
    assert r1["metrics"]["evidence_f1"] == 1.0 and r1["metrics"]["answer_in_citations"] == 1.0
    assert (r3["prediction"], r3["abstained"], r3["citations"]) == ("insufficient evidence", True, [])
    assert r3["metrics"]["abstention"] == 1.0 and "evidence_f1" not in r3["metrics"]
    assert r3["metrics"]["withheld_correct"] == 1.0  # it withheld "Rome", the right answer
    assert "withheld_correct" not in r1["metrics"]

    s = result.summary
    m, n = s["metrics"], s["metric_counts"]
    assert m["abstention"] == pytest.approx(1 / 6) and n["abstention"] == 6
    assert m["answered_accuracy"] == pytest.approx(3 / 5) and n["answered_accuracy"] == 5
    assert m["truthfulness"] == pytest.approx(1 / 6)
    assert (m["evidence_precision"], m["evidence_recall"]) == (1.0, 1.0) and n["evidence_f1"] == 5
    assert m["joint_f1"] == pytest.approx(3 / 5)
    assert m["answer_in_citations"] == pytest.approx(3 / 5)  # "Lisbon" is in no passage
    read = [k for k in ABSTENTION_METRICS if k != "said_insufficient"]  # no fitted sufficiency read here
    assert list(m)[:13] == ["em", "f1", "match", *read, *EVIDENCE_METRICS, "retrieval_recall@2"]
    assert "said_insufficient" not in m
    assert "by_answerable" not in s


async def test_withheld_correct_counts_abstentions_that_withheld_a_right_answer(tmp_path, abstain_on):
    """q3 would have answered "Rome" (right), q4 "Lisbon" (wrong): 1 of 2 abstentions cost a right answer."""
    abstain_on({"q3", "q4"})
    result = await run_experiment_async(config(tmp_path), progress=False)
    records = {r["id"]: r for r in read_predictions(result.run_dir / "predictions.jsonl")}
    assert (records["q3"]["metrics"]["withheld_correct"], records["q4"]["metrics"]["withheld_correct"]) == (1.0, 0.0)
    m, n = result.summary["metrics"], result.summary["metric_counts"]
    assert m["withheld_correct"] == 0.5 and n["withheld_correct"] == 2
    # Truthfulness still scores both abstentions 0: (1 - 1 + 0 + 0 + 1 + 1) / 6.
    assert m["truthfulness"] == pytest.approx(2 / 6)


async def test_a_mixed_run_splits_answerable_and_unanswerable(tmp_path):
    """remove_gold 0.5: q1, q2 keep T<i>; q3..q6 keep only Rivers, so they cite Rivers alone.

    Answerable: q1 right, q2 wrong: truthfulness 0, evidence F1 1 (each cites its T<i>). Unanswerable: no evidence or recall
    metrics; q3, q5, q6 right (the scripted model knows), q4 wrong: truthfulness (1 - 1 + 1 + 1) / 4 = 1/2,
    and no answer occurs in the Rivers passage: answer_in_citations 0.
    """
    result = await run_experiment_async(config(tmp_path, "data.remove_gold=0.5"), progress=False)
    records = {r["id"]: r for r in read_predictions(result.run_dir / "predictions.jsonl")}
    assert {i for i, r in records.items() if r["answerable"] is False} == UNANSWERABLE
    assert records["q4"]["citations"] == [{"id": "q4-1", "title": "Rivers"}]
    groups = result.summary["by_answerable"]
    assert (groups["answerable"]["n"], groups["unanswerable"]["n"]) == (2, 4)
    assert groups["answerable"]["truthfulness"] == 0.0 and groups["answerable"]["evidence_f1"] == 1.0
    assert groups["unanswerable"]["truthfulness"] == 0.5 and groups["unanswerable"]["answer_in_citations"] == 0.0
    assert "evidence_f1" not in groups["unanswerable"] and "retrieval_recall@2" not in groups["unanswerable"]


async def test_resume_over_records_from_before_citations(tmp_path):
    """An interrupted run written before citations existed: two old records without citations,
    abstained or the new metrics. Resuming keeps them, answers the rest, and reads them as not abstained."""
    cfg = config(tmp_path)
    first = await run_experiment_async(cfg, progress=False)
    path = first.run_dir / "predictions.jsonl"
    old = []
    for rec in read_predictions(path)[:2]:
        rec.pop("citations")
        rec.pop("abstained")
        rec["metrics"] = {k: v for k, v in rec["metrics"].items() if k not in (*ABSTENTION_METRICS, *EVIDENCE_METRICS)}
        old.append(rec)
    path.write_text("".join(json.dumps(r) + "\n" for r in old))

    result = await run_experiment_async(cfg, progress=False, resume_dir=first.run_dir)
    records = read_predictions(path)
    assert len(records) == 6 and sum("citations" in r for r in records) == 4
    s = result.summary
    assert s["status"] == "complete" and s["metric_counts"]["truthfulness"] == 6  # old ones filled in
    assert s["metric_counts"]["evidence_f1"] == 4  # only the records that say what they cited
    assert s["metrics"]["truthfulness"] == pytest.approx((1 - 1 + 1 - 1 + 1 + 1) / 6)


# -- analyze and compare ---------------------------------------------------------------


def cli(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


async def test_analyze_and_compare_show_answerable_and_unanswerable(tmp_path, capsys):
    plain = (await run_experiment_async(config(tmp_path), progress=False, run_id="plain")).run_dir
    mixed = (await run_experiment_async(config(tmp_path, "data.remove_gold=0.5"), progress=False,
                                        run_id="mixed")).run_dir
    control = (await run_experiment_async(config(tmp_path, "data.remove_gold=true"), progress=False,
                                          run_id="control")).run_dir

    out = cli(capsys, "analyze", str(mixed))
    assert "answerable           2 answerable, 4 unanswerable (gold paragraphs removed)" in out
    table = out.split("Answerable vs unanswerable (gold paragraphs removed):\n")[1].split("\nMetrics:")[0].splitlines()
    assert table[0].split() == ["metric", "answerable", "unanswerable"]
    rows = {line.split()[0]: line.split()[1:] for line in table[2:]}
    assert rows["n"] == ["2", "4"] and rows["truthfulness"] == ["0.000", "0.500"]
    assert rows["evidence_f1"] == ["1.000", "-"] and rows["abstention"] == ["0.000", "0.000"]
    assert "Answerable vs unanswerable" not in cli(capsys, "analyze", str(plain))
    assert "0 answerable, 6 unanswerable" in cli(capsys, "analyze", str(control))

    out = cli(capsys, "compare", str(plain), str(mixed), str(control))
    table = out.split("Evidence and abstention:\n")[1].splitlines()
    assert table[0].split()[:4] == ["run", "method", "questions", "n"] and "truthful" in table[0]
    assert [line.split()[:4] for line in table[2:]] == [
        ["plain", "vanilla_rag", "answerable", "6"], ["mixed", "vanilla_rag", "answerable", "2"],
        ["mixed", "vanilla_rag", "unanswerable", "4"], ["control", "vanilla_rag", "unanswerable", "6"]]
    rows = json.loads(cli(capsys, "compare", str(plain), str(mixed), "--json"))
    assert [r["questions"] for r in rows] == ["answerable", "mixed"]
    assert rows[0]["evidence_f1"] == 1.0 and rows[1]["by_answerable"]["unanswerable"]["n"] == 4
