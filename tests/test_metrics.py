"""Answer metrics: official normalisation, EM/F1/match, choice extraction, recall, per-question scoring."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfrag.eval.metrics import (
    best_over,
    exact_match,
    extract_choice,
    extract_label,
    f1_score,
    label_accuracy,
    match,
    normalize_answer,
    retrieval_recall,
)
from selfrag.eval.scoring import accounting, question_metrics
from selfrag.normalize import names_nothing
from selfrag.types import Document, Question, RAGResponse, ReasoningStep, RetrievalResult

FACIAL = [
    "paralysis of the facial muscles.",
    "paralysis of the facial muscles and loss of taste.",
    "paralysis of the facial muscles, loss of taste and lacrimation.",
    "paralysis of the facial muscles, loss of taste, lacrimation and decreased salivation.",
]


def test_normalisation_is_the_official_one():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("  Chief of Protocol. ") == "chief of protocol"


@pytest.mark.parametrize(("answer", "expected"), [
    ("yes", True), ("No.", True), ("maybe", True), ("noanswer", True), ("B", True), ("The", True), ("", True),
    ("b", False), ("Paris", False), ("No Doubt", False), ("I, Robot", False)])
def test_an_answer_names_nothing_when_it_is_a_label_a_letter_or_empty(answer, expected):
    assert names_nothing(answer) is expected


def test_exact_match_and_f1_by_hand():
    assert exact_match("the Chief of Protocol", "Chief of Protocol") == 1.0
    # pred tokens: chief protocol officer (3); gold: chief of protocol (3); common 2
    assert f1_score("chief protocol officer", "Chief of Protocol") == pytest.approx(2 / 3)
    assert f1_score("Paris", "London") == 0.0
    # yes/no only match exactly (official HotpotQA rule)
    assert f1_score("yes it is", "yes") == 0.0 and f1_score("yes", "yes") == 1.0


def test_match_and_best_over_aliases():
    assert match("It was William Herschel in 1781.", "Herschel") == 1.0
    assert match("Herschelian", "Herschel") == 0.0  # whole tokens only
    assert best_over(exact_match, "Herschel", ["William Herschel", "Herschel"]) == 1.0
    assert best_over(f1_score, "x", []) == 0.0


@given(st.text())
def test_normalisation_is_idempotent(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once


@given(st.text(), st.text())
def test_exact_match_implies_full_f1_and_match(pred, gold):
    if exact_match(pred, gold) == 1.0 and normalize_answer(gold):
        assert f1_score(pred, gold) == 1.0 and match(pred, gold) == 1.0


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("B", 1), ("(C)", 2), ("D.", 3), ("B) loss of taste", 1), ("The answer is (D)", 3),
        ("Answer: C", 2), ("option b", 1), ("I think it is B.", 1), ("**A**", 0),
        ("paralysis of the facial muscles and loss of taste", 1),  # longest contained option
        ("Paralysis of the facial muscles.", 0),
        ("A lesion of the nerve", None),  # the article "A" is not a label
        ("The answer is a nerve", None),
        ("Option A or option B", None),  # two letters: ambiguous
        ("no idea", None), ("", None),
        ("E", None),  # out of range for four options
    ],
)
def test_extract_choice(prediction, expected):
    assert extract_choice(prediction, FACIAL) == expected


def test_extract_choice_ambiguous_option_texts():
    options = ["red", "blue", "green", "red and blue"]
    assert extract_choice("red and blue", options) == 3
    assert extract_choice("red or blue", options) is None  # two separate options named


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [("Yes.", "yes"), ("No, it does not.", "no"), ("Maybe", "maybe"),
     ("The evidence suggests yes", "yes"), ("It is unclear", None)],
)
def test_extract_label(prediction, expected):
    assert extract_label(prediction, ("yes", "no", "maybe")) == expected
    if expected:
        assert label_accuracy(prediction, expected) == 1.0


def test_retrieval_recall():
    assert retrieval_recall(["A", "B", "C"], ["A", "D"]) == 0.5
    assert retrieval_recall(["A"], []) is None


def _response(answer: str, docs: list[Document] | None = None) -> RAGResponse:
    retrieved = (RetrievalResult(documents=tuple(docs), scores=(1.0,) * len(docs), query="q"),) if docs else ()
    steps = (
        ReasoningStep(step_id=1, thought="", action="generate", action_input="", observation=answer,
                      tokens_used=12, prompt_tokens=10, completion_tokens=2, cost_usd=0.001, llm_calls=1, cached=True),
    )
    return RAGResponse(
        answer=answer, reasoning_chain=steps, retrieved_docs=retrieved, total_tokens=12, total_cost_usd=0.001,
        latency_ms=42.0, num_retrieval_calls=len(retrieved), num_llm_calls=1, model="m", architecture="x",
        prompt_tokens=10, completion_tokens=2,
    )


def test_question_metrics_hotpotqa_style_with_recall():
    q = Question(id="1", text="?", answers=("Chief of Protocol",), type="bridge",
                 metadata={"supporting_titles": ["Shirley Temple", "Kiss and Tell"]})
    docs = [Document(id="Shirley Temple", title="Shirley Temple", text="."), Document(id="x", title="Other", text=".")]
    m = question_metrics(q, _response("Chief of Protocol", docs), top_k=5)
    # Nothing cited (the response has no citations): evidence 0, as in the official script.
    assert m == {"em": 1.0, "f1": 1.0, "match": 1.0, "retrieval_recall@5": 0.5, "abstention": 0.0,
                 "answered_accuracy": 1.0, "truthfulness": 1.0, "evidence_precision": 0.0, "evidence_recall": 0.0,
                 "evidence_f1": 0.0, "joint_f1": 0.0, "answer_in_citations": 0.0}
    # no retrieval -> no recall entry (it is measured only where the method retrieved)
    assert "retrieval_recall@5" not in question_metrics(q, _response("x"), top_k=5)


def test_question_metrics_multiple_choice_and_yes_no():
    mc = Question(id="1", text="?", answers=("B", FACIAL[1]), type="multiple_choice", choices=tuple(FACIAL))
    assert question_metrics(mc, _response("The answer is B"), 5)["accuracy"] == 1.0
    assert question_metrics(mc, _response(FACIAL[1]), 5) == {
        "em": 1.0, "f1": 1.0, "match": 1.0, "accuracy": 1.0,
        "abstention": 0.0, "answered_accuracy": 1.0, "truthfulness": 1.0, "answer_in_citations": 0.0}
    assert question_metrics(mc, _response("A"), 5)["accuracy"] == 0.0
    yn = Question(id="2", text="?", answers=("maybe",), type="yes_no", choices=("yes", "no", "maybe"))
    assert question_metrics(yn, _response("Maybe, the data are mixed."), 5)["accuracy"] == 1.0
    assert "accuracy" not in question_metrics(Question(id="3", text="?", answers=("x",)), _response("x"), 5)


def test_accounting_fields():
    docs = [Document(id="a", text=".")]
    acc = accounting(_response("x", docs))
    assert acc == {
        "llm_calls": 1, "retrieval_calls": 1, "retrieved": True, "retrieval_needed": False,
        "prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cost_usd": 0.001,
        "latency_ms": 42.0, "cached_calls": 1,
    }
