"""lab.support_readings: which passages a record's joint answer read, and the summary arithmetic, by hand."""

from __future__ import annotations

import pytest

from lab import support_readings as sr
from selfrag.types import Document, Question


def _candidate(text: str, indices: list[int], joint: bool = False) -> dict:
    return {"text": text, "details": {"passage_indices": indices, "joint": joint}}


def _record(qid: str, prediction: str, gold: str, candidates: list[dict], sources: list[str] | None = None) -> dict:
    return {"id": qid, "prediction": prediction, "gold": [gold], "candidates": candidates,
            "sources": [{"title": t} for t in (sources or [])]}


def test_the_joint_reads_its_passages_in_its_own_order_through_the_recorded_retrieval_order():
    docs = tuple(Document(id=t, title=t, text=f"about {t}") for t in ("A", "B", "C"))
    question = Question(id="q", text="?", contexts=docs)
    record = _record("q", "x", "x", [_candidate("x", [3, 1], joint=True)], sources=["C", "A", "B"])
    assert [d.title for d in sr.passages_read(record, question)] == ["B", "C"]
    # No joint answer, or a passage the question does not hold: nothing to read over.
    assert sr.passages_read(_record("q", "x", "x", [_candidate("x", [1])], ["C"]), question) is None
    assert sr.passages_read(_record("q", "x", "x", [_candidate("x", [1], joint=True)], ["Z"]), question) is None


def test_the_summary_pools_right_against_wrong_candidates_and_chooses_by_each_reading():
    records = [
        # q1: the joint answer is wrong; the one-passage candidate "Paris" is right and reads higher.
        _record("q1", "Lyon", "Paris", [_candidate("Lyon", [1, 2], joint=True), _candidate("Paris", [2]),
                                        _candidate("Paris", [1])]),
        # q2: the joint answer is right and reads higher.
        _record("q2", "Rome", "Rome", [_candidate("Rome", [1, 2], joint=True), _candidate("Milan", [1])]),
    ]
    rows = [
        {"id": "q1", "reproduced": True, "readings": [
            {"key": "lyon", "p_true": 0.2, "likelihood": -1.0, "contained": 1.0},
            {"key": "paris", "p_true": 0.9, "likelihood": -2.0, "contained": 1.0}]},
        {"id": "q2", "reproduced": False, "readings": [
            {"key": "rome", "p_true": 0.8, "likelihood": -0.5, "contained": 1.0},
            {"key": "milan", "p_true": 0.1, "likelihood": -3.0, "contained": 0.0}]},
    ]
    rep = sr.summarise(records, rows)
    assert rep["n_questions"] == 2 and rep["reproduced"] == 1
    assert rep["answer_f1"] == pytest.approx(0.5) and rep["oracle_f1"] == pytest.approx(1.0)
    p_true = rep["readings"]["p_true"]
    # Right: Paris, Paris, Rome (0.9, 0.9, 0.8); wrong: Lyon, Milan (0.2, 0.1): every pair ordered.
    assert (p_true["n_right"], p_true["n_wrong"], p_true["auc"]) == (3, 2, 1.0)
    assert p_true["chosen_f1"] == pytest.approx(1.0)
    assert p_true["chosen_vs_answer"]["diff"] == pytest.approx(0.5)  # q1 gains 1, q2 keeps its answer
    likelihood = rep["readings"]["likelihood"]
    # Paris (-2.0, twice) is below Lyon (-1.0): 4 of the 6 pairs ordered.
    assert likelihood["auc"] == pytest.approx(4 / 6)
    assert likelihood["chosen_f1"] == pytest.approx(0.5)
    # Votes: Paris is said twice in q1, everything else once; a tie keeps the joint answer.
    votes = rep["readings"]["votes"]
    assert votes["chosen_f1"] == pytest.approx(1.0)
    # Contained: the right ones (1.0) tie Lyon (1.0) and beat Milan (0.0).
    assert rep["readings"]["contained"]["auc"] == pytest.approx((3 + 0.5 * 3) / 6)
    # Without the joint answer's text (Paris, Paris against Milan), and within each question.
    assert (p_true["auc_others"], p_true["n_right_others"], p_true["n_wrong_others"]) == (1.0, 2, 1)
    assert (p_true["auc_within"], p_true["n_within"]) == (1.0, 2)
    assert likelihood["auc_others"] == 1.0 and likelihood["auc_within"] == pytest.approx(0.5)  # q1 0, q2 1


def test_records_from_a_commit_that_does_not_hold_them_are_a_one_line_exit():
    with pytest.raises(SystemExit, match="cannot read .* at 0000000") as info:
        sr.records_at("0000000", "no-such-model", "hotpotqa")
    assert "\n" not in str(info.value)
