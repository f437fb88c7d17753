"""A verdict the model did not give is shown as "not judged" on every surface, never as a verdict."""

from __future__ import annotations

import io
import json

from selfrag.cli.output import print_response
from selfrag.eval.results import prediction_record
from selfrag.methods.steps.candidates import candidate_row
from selfrag.reflection.judged import not_judged
from selfrag.reflection.readings import written
from selfrag.serialize import response_json
from selfrag.serve.payload import answer_payload
from selfrag.serve.view import trace_view
from selfrag.types import Candidate, Document, Question, RAGResponse, ReasoningStep

PASSAGE = Document(id="espresso", title="notes/espresso.md § Temperature", text="Brew at 93 degrees.")
# The reply held an answer but no usable [IsSup] line: support is the parser's default.
DEFAULTED = Candidate(text="93 degrees", passages=(PASSAGE,), indices=(1,), score=4.5, verdicts={
    "relevance": written("relevance", "relevant", "prompted"),
    "support": written("support", "no support", "prompted", default=True),
    "utility": written("utility", 4, "prompted")})
# The joint candidate whose verdicts were never asked.
UNASKED = Candidate(text="93 degrees", passages=(PASSAGE,), indices=(1,), joint=True, score=0.0)
STEPS = (
    ReasoningStep(step_id=1, thought="", action="retrieve", action_input="q", observation="1 passage",
                  retrieval_calls=1, details={"documents": [{"id": "espresso", "title": PASSAGE.title, "score": 1.0}]}),
    ReasoningStep(step_id=2, thought="", action="generate_and_critique", action_input="", observation="...",
                  llm_calls=1, details={"relevance": "relevant", "support": "no support", "defaults_used": ["support"]}),
    ReasoningStep(step_id=3, thought="", action="assess_support", action_input="", observation="support=...",
                  llm_calls=1, details={"support": "no support", "default_used": True}),
)


def response() -> RAGResponse:
    return RAGResponse(
        answer="93 degrees", reasoning_chain=STEPS, retrieved_docs=(), total_tokens=10, total_cost_usd=0.0,
        latency_ms=5.0, num_retrieval_calls=1, num_llm_calls=2, model="m", architecture="self_rag",
        candidates=(UNASKED, DEFAULTED), retrieval_needed=True, citations=(PASSAGE,),
    )


def test_which_verdicts_were_not_given():
    assert not_judged(DEFAULTED) == ["support"]
    assert not_judged(UNASKED) == ["relevance", "support", "utility"]
    row = candidate_row(DEFAULTED)
    assert row["support"] is None and row["not_judged"] == ["support"] and row["relevance"] == "relevant"


def test_the_cli_trace_says_not_judged():
    out = io.StringIO()
    print_response(response(), out, trace=True)
    text = out.getvalue()
    # A verdict names the reader that gave it; one the model did not give says so.
    assert "relevance=relevant (prompted), support=not judged, utility=4 (prompted)" in text
    assert "relevance=not judged, support=not judged, utility=not judged" in text
    assert "support=no support" not in text
    assert "support: not judged (no usable verdict in the reply; scored as no support)" in text


def test_json_sets_them_to_null_and_names_them():
    data = json.loads(json.dumps(response_json(response())))
    unasked, defaulted = data["candidates"]
    assert defaulted["support"] is None and defaulted["not_judged"] == ["support"] and defaulted["utility"] == 4
    assert unasked["not_judged"] == ["relevance", "support", "utility"]
    critique, support = data["reasoning_chain"][1]["details"], data["reasoning_chain"][2]["details"]
    assert critique["support"] is None and critique["not_judged"] == ["support"] and critique["relevance"] == "relevant"
    assert support["support"] is None and support["default_value"] == {"support": "no support"}


def test_run_records_keep_the_same_honesty():
    record = prediction_record(Question(id="q", text="q", answers=("93 degrees",)), response(), {}, {})
    assert record["candidates"][1]["support"] is None and record["candidates"][1]["not_judged"] == ["support"]
    assert record["reasoning_chain"][2]["details"]["not_judged"] == ["support"]


def test_the_page_view_marks_them_not_judged():
    view = answer_payload(response())["view"]
    unasked, defaulted = view["candidates"]
    assert defaulted["not_judged"] == ["support"] and defaulted["support"] is None
    assert defaulted["relevance"] == "relevant"
    assert unasked["not_judged"] == ["relevance", "support", "utility"]
    # An older record (no not_judged key) is read from its defaults_used.
    old = {"answer": "x", "candidates": [{"text": "x", "relevance": "relevant", "support": "no support",
                                          "utility": 3, "details": {"defaults_used": ["support", "utility"]}}]}
    [c] = trace_view(old)["candidates"]
    assert c["not_judged"] == ["support", "utility"] and c["support"] is None and c["utility"] is None
