"""The one line of what a method did (demo, run --trace, serve --trace), read from trace steps."""

from __future__ import annotations

from selfrag.cli.explain import describe, record_line


def step(action: str, observation: str = "", thought: str = "", **details) -> dict:
    return {"action": action, "observation": observation, "thought": thought, "details": details}


SELF_RAG = [
    step("retrieval_decision", "retrieval needed: yes (P(yes)=0.712 >= threshold 0.500)", retrieval_needed=True),
    step("retrieve", "Retrieved 3 passages", documents=[{"id": "a"}, {"id": "b"}, {"id": "c"}]),
    step("rank_evidence", "kept [2] Mars (0.81), [1] Earth (0.40)", ranked_by="fused"),
    step("generate"),
    step("passage_candidates", "joint: the answer is empty"),
    step("select_best", "Selected candidate 2 from 'Mars' (utility=5, support=fully_supported, relevance=relevant, "
         "score=3.5)", thought="The joint candidate when it has an answer; otherwise: Pick the highest utility"),
]
DETAILS = {"all_candidates": [
    {"joint": True, "relevance": None, "support": None, "utility": None},
    {"joint": False, "relevance": "relevant", "support": "fully_supported", "utility": 5},
    {"joint": False, "relevance": "irrelevant", "support": "no_support", "utility": 1},
]}


def test_self_rag_steps_in_one_line():
    line = describe(SELF_RAG, DETAILS, False, 0.31)
    assert "\n" not in line
    assert line.startswith("decided to retrieve (P(yes)=0.712 >= threshold 0.500) · retrieved 3 passages")
    assert "judged 2 passages: 1 relevant" in line
    assert "ranked the passages by relevance verdicts fused with lexical evidence, best Mars (0.81), Earth (0.40)" \
        in line
    assert "3 candidates (the joint answer over the best passages + 2 one-passage candidates)" in line
    assert "one-passage candidates written: joint: the answer is empty" in line
    assert "chose candidate 2 from 'Mars' (relevance relevant, support fully_supported, utility 5)" in line
    assert line.endswith("confidence 0.31 (low: check the answer against its sources)")


def test_no_retrieval_and_abstention():
    steps = [step("retrieval_decision", "retrieval needed: no (configured)"), step("direct_answer")]
    assert describe(steps, {}, False, None) == "decided not to retrieve (configured) · then: direct_answer"
    abstained = [*SELF_RAG[:2], step("abstain", "abstained: no passage reaches 0.7",
                                     abstain_reason="no passage reaches 0.7")]
    assert "abstained: no passage reaches 0.7" in describe(abstained, {}, True, None)


def test_a_method_without_self_rag_steps_lists_them():
    steps = [step("retrieve", documents=[{"id": "a"}]), step("react_step"), step("react_step"), step("final_answer")]
    assert describe(steps, {}, False, None) == "retrieved 1 passage · then: react_step ×2 → final_answer"
    assert describe([], {}, False, None) == "no steps recorded"


def test_a_run_record_line():
    record = {"id": "q1", "prediction": "Mars", "reasoning_chain": SELF_RAG, "details": {**DETAILS,
              "confidence": {"confidence": 0.8}}, "abstained": False}
    line = record_line(record)
    assert line.startswith("q1: 'Mars' · decided to retrieve") and line.endswith("confidence 0.80")
    failed = record_line({"id": "q2", "error": {"type": "BackendError", "message": "HTTP 500"}})
    assert failed == "q2: failed: BackendError: HTTP 500"
