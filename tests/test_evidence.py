"""Evidence and abstention metrics: each checked on a tiny case computed by hand (docs/evaluation.md)."""

from __future__ import annotations

import pytest

from selfrag.eval.evidence import (
    abstention_scores,
    answer_in_passages,
    evidence_scores,
    is_correct,
    joint_f1,
)
from selfrag.eval.metrics import f1_parts
from selfrag.eval.results import record_abstained, record_citations
from selfrag.eval.scoring import question_metrics
from selfrag.eval.summary import record_metrics, summarize
from selfrag.types import Document, Question, RAGResponse, ReasoningStep, RetrievalResult

GOLD = ["Shirley Temple", "Kiss and Tell (1945 film)"]


def doc(title: str, text: str = ".") -> Document:
    return Document(id=title, title=title, text=text)


def response(answer: str, retrieved=(), cited=None, abstained: bool = False) -> RAGResponse:
    retrieved = tuple(retrieved)
    results = (RetrievalResult(documents=retrieved, scores=(1.0,) * len(retrieved), query="q"),) if retrieved else ()
    step = ReasoningStep(step_id=1, thought="", action="generate", action_input="", observation=answer, llm_calls=1)
    return RAGResponse(
        answer=answer, reasoning_chain=(step,), retrieved_docs=results, total_tokens=0, total_cost_usd=0.0,
        latency_ms=1.0, num_retrieval_calls=len(results), num_llm_calls=1, model="m", architecture="x",
        citations=tuple(retrieved if cited is None else cited), abstained=abstained,
    )


# -- evidence precision / recall / F1 --------------------------------------------------


def test_evidence_scores_by_hand():
    """Cited {A, B, C} (A twice counts once), gold {A, D}: one title in common.

    P = 1/3, R = 1/2, F1 = 2 * (1/3) * (1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 2/5.
    """
    ev = evidence_scores(["A", "B", "C", "A"], ["A", "D"])
    assert (ev.precision, ev.recall, ev.f1) == pytest.approx((1 / 3, 1 / 2, 2 / 5))


def test_evidence_scores_edge_cases():
    """Exactly the gold: 1/1/1. Nothing cited: 0/0/0 (the official script's empty prediction). No gold: None."""
    ev = evidence_scores(["A", "D"], ["D", "A"])
    assert (ev.precision, ev.recall, ev.f1) == (1.0, 1.0, 1.0)
    ev = evidence_scores([], ["A"])
    assert (ev.precision, ev.recall, ev.f1) == (0.0, 0.0, 0.0)
    assert evidence_scores(["A"], []) is None
    assert evidence_scores(["A"], [""]) is None


# -- joint F1 -----------------------------------------------------------------------


def test_answer_precision_and_recall_by_hand():
    """"Chief of Protocol of the United States" vs "Chief of Protocol".

    Normalised: chief of protocol of united states (6 tokens) vs chief of
    protocol (3); in common chief, of, protocol = 3. P = 3/6, R = 3/3, F1 = 2/3.
    """
    assert f1_parts("Chief of Protocol of the United States", "Chief of Protocol") == pytest.approx((2 / 3, 0.5, 1.0))
    assert f1_parts("no", "yes") == (0.0, 0.0, 0.0)


def test_joint_f1_by_hand():
    """Answer P 1/2, R 1 (above); evidence P 1/2, R 1/2.

    Joint P = 1/2 * 1/2 = 1/4, joint R = 1 * 1/2 = 1/2,
    joint F1 = 2 * (1/4) * (1/2) / (1/4 + 1/2) = (1/4) / (3/4) = 1/3.
    """
    assert joint_f1(0.5, 1.0, 0.5, 0.5) == pytest.approx(1 / 3)
    assert joint_f1(1.0, 1.0, 0.0, 0.0) == 0.0  # right answer, no evidence: 0
    assert joint_f1(1.0, 1.0, 1.0, 1.0) == 1.0


def test_joint_f1_through_question_metrics():
    """The same case end to end: cites Shirley Temple (gold) and Meet Corliss Archer (not gold).

    Evidence P = 1/2, R = 1/2, F1 = 1/2; answer P 1/2, R 1, F1 2/3; joint F1 = 1/3.
    The answer occurs in the cited Shirley Temple passage: answer_in_citations = 1.
    """
    q = Question(id="1", text="?", answers=("Chief of Protocol",), type="bridge",
                 metadata={"supporting_titles": GOLD})
    cited = [doc("Shirley Temple", "She served as Chief of Protocol of the United States."), doc("Meet Corliss Archer")]
    m = question_metrics(q, response("Chief of Protocol of the United States", cited), top_k=5)
    assert m["evidence_precision"] == m["evidence_recall"] == m["evidence_f1"] == 0.5
    assert m["f1"] == pytest.approx(2 / 3) and m["joint_f1"] == pytest.approx(1 / 3)
    assert m["answer_in_citations"] == 1.0
    assert m["retrieval_recall@5"] == 0.5


def test_citations_narrower_than_retrieval():
    """Retrieved 4 passages (2 gold), cited only the 2 gold ones: evidence 1/1/1, retrieval recall 1."""
    retrieved = [doc(GOLD[0]), doc("X"), doc(GOLD[1]), doc("Y")]
    q = Question(id="1", text="?", answers=("Paris",), metadata={"supporting_titles": GOLD})
    m = question_metrics(q, response("Paris", retrieved, cited=[retrieved[0], retrieved[2]]), top_k=4)
    assert (m["evidence_precision"], m["evidence_recall"], m["evidence_f1"]) == (1.0, 1.0, 1.0)
    # Citing all four instead: P = 2/4, R = 1, F1 = 2 * 0.5 / 1.5 = 2/3.
    m = question_metrics(q, response("Paris", retrieved), top_k=4)
    assert m["evidence_f1"] == pytest.approx(2 / 3)


# -- answer in citations --------------------------------------------------------------


def test_answer_in_passages_by_hand():
    """"The Eiffel Tower" normalises to "eiffel tower", which occurs in "paris has eiffel tower"."""
    assert answer_in_passages("The Eiffel Tower", ["Rome.", "Paris has the Eiffel Tower."]) == 1.0
    assert answer_in_passages("Eiffel Towers", ["Paris has the Eiffel Tower."]) == 0.0  # whole tokens only
    assert answer_in_passages("Eiffel", []) == 0.0  # nothing cited
    assert answer_in_passages("Yes.", ["yes"]) is None  # a bare yes/no says nothing a passage could hold
    assert answer_in_passages("The", ["the"]) is None  # empty once normalised


def test_answer_in_citations_per_question_type():
    """Multiple choice looks for the chosen option's text; yes/no/maybe questions have no such metric."""
    mc = Question(id="1", text="?", answers=("B",), type="multiple_choice", choices=("Liver", "Kidney", "Lung"))
    cited = [doc("p", "The kidney filters blood.")]
    assert question_metrics(mc, response("The answer is B", cited), 5)["answer_in_citations"] == 1.0
    assert question_metrics(mc, response("A", cited), 5)["answer_in_citations"] == 0.0  # "liver" is not there
    assert "answer_in_citations" not in question_metrics(mc, response("none of them", cited), 5)  # no option chosen
    yn = Question(id="2", text="?", answers=("yes",), type="yes_no", choices=("yes", "no", "maybe"))
    assert "answer_in_citations" not in question_metrics(yn, response("yes", cited), 5)


# -- abstention ----------------------------------------------------------------------


def test_correctness_test_by_hand():
    """"Rome Italy" vs "Rome": P 1/2, R 1, F1 2/3 >= 0.5: correct.
    "It is Rome, Italy" vs "Rome": P 1/4, R 1, F1 = 2 * 0.25 / 1.25 = 0.4 < 0.5: wrong.
    A question with an accuracy score is judged by it alone.
    """
    assert is_correct({"f1": f1_parts("Rome Italy", "Rome")[0]})
    assert not is_correct({"f1": f1_parts("It is Rome, Italy", "Rome")[0]})
    assert is_correct({"f1": 0.5})
    assert not is_correct({"f1": 1.0, "accuracy": 0.0})
    assert is_correct({"f1": 0.0, "accuracy": 1.0})


def test_abstention_scores():
    assert abstention_scores(True, {"f1": 0.0}) == {"abstention": 1.0, "truthfulness": 0.0}
    assert abstention_scores(False, {"f1": 1.0}) == {"abstention": 0.0, "answered_accuracy": 1.0, "truthfulness": 1.0}
    assert abstention_scores(False, {"f1": 0.2}) == {"abstention": 0.0, "answered_accuracy": 0.0,
                                                     "truthfulness": -1.0}


def test_abstained_answer_gets_no_evidence_metrics():
    q = Question(id="1", text="?", answers=("Paris",), metadata={"supporting_titles": GOLD})
    m = question_metrics(q, response("insufficient evidence", [doc(GOLD[0])], abstained=True), 5)
    assert m["abstention"] == 1.0 and m["truthfulness"] == 0.0
    assert not {"answered_accuracy", "evidence_f1", "joint_f1", "answer_in_citations"} & set(m)


def test_unanswerable_question_gets_no_evidence_or_recall():
    """Its gold paragraphs were removed: recall and evidence cannot be earned, so they are left out."""
    q = Question(id="1", text="?", answers=("Paris",), metadata={"supporting_titles": GOLD, "answerable": False})
    m = question_metrics(q, response("Paris", [doc("X", "Paris, France")]), 5)
    assert not {"evidence_f1", "joint_f1", "retrieval_recall@5"} & set(m)
    assert m["answer_in_citations"] == 1.0 and m["truthfulness"] == 1.0


def rec(qid: str, f1: float, abstained: bool | None = None, **fields) -> dict:
    record = {"id": qid, "metrics": {"em": f1, "f1": f1}, "accounting": {}, **fields}
    if abstained is not None:
        record["abstained"] = abstained
        record["metrics"].update(abstention_scores(abstained, record["metrics"]))
    return record


def test_summary_means_by_hand():
    """Four questions: right (F1 1), wrong (F1 0), abstained, right (F1 1, an old record with no abstention fields).

    Abstention rate 1/4; accuracy on the 3 answered 2/3; truthfulness (1 - 1 + 0 + 1) / 4 = 1/4.
    """
    records = [rec("a", 1.0, False), rec("b", 0.0, False), rec("c", 0.0, True), rec("d", 1.0)]
    s = summarize(records)
    assert s["metrics"]["abstention"] == 0.25
    assert s["metrics"]["answered_accuracy"] == pytest.approx(2 / 3) and s["metric_counts"]["answered_accuracy"] == 3
    assert s["metrics"]["truthfulness"] == 0.25 and s["metric_counts"]["truthfulness"] == 4
    assert "by_answerable" not in s


def test_old_records_read_as_not_abstained():
    old = {"id": "x", "metrics": {"em": 0.0, "f1": 0.0, "accuracy": 1.0}}
    assert record_citations(old) is None and record_abstained(old) is False  # no citation information
    new = {"id": "n", "citations": [], "abstained": True}
    assert record_citations(new) == [] and record_abstained(new) is True
    assert record_metrics(old)["truthfulness"] == 1.0 and record_metrics(old)["abstention"] == 0.0
    assert record_metrics({"id": "y", "metrics": {}}) == {}  # nothing scored, nothing filled in
    assert record_metrics({"id": "z", "error": {"type": "E"}, "metrics": {}}) == {}


def test_summary_splits_answerable_and_unanswerable():
    """Answerable: right and wrong (truthfulness 0); unanswerable: abstained and wrong (truthfulness -1/2)."""
    records = [rec("a", 1.0, False, answerable=True), rec("b", 0.0, False, answerable=True),
               rec("c", 0.0, True, answerable=False), rec("d", 0.0, False, answerable=False)]
    groups = summarize(records)["by_answerable"]
    assert groups["answerable"]["n"] == 2 and groups["answerable"]["truthfulness"] == 0.0
    assert groups["unanswerable"]["abstention"] == 0.5 and groups["unanswerable"]["truthfulness"] == -0.5
