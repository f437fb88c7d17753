"""The confidence is shown the same way everywhere: ask's line, the page's view, the run records."""

from __future__ import annotations

import pytest

from selfrag.cli.output import confidence_line
from selfrag.eval.results import prediction_record
from selfrag.methods.critique.confidence import LOW, confidence_words
from selfrag.serve.view import trace_view
from selfrag.types import Question, RAGResponse


@pytest.mark.parametrize(("value", "words"), [
    (0.83, "confidence 0.83"),
    (0.31, "low confidence: the passages may not support this answer; confidence 0.31"),
    (LOW, "confidence 0.50"),
])
def test_the_words_say_a_low_confidence_plainly(value, words):
    assert confidence_words(value) == words
    assert confidence_line(value) == f"({words})"


def test_the_page_view_reads_the_response_or_the_run_record():
    assert trace_view({"answer": "Paris", "confidence": 0.31})["confidence_words"].startswith("low confidence")
    record = {"answer": "Paris", "details": {"confidence": {"confidence": 0.9, "reading": "reflection"}}}
    view = trace_view(record)
    assert view["confidence"] == 0.9 and view["confidence_words"] == "confidence 0.90"
    assert view["confidence_low"] is False
    # Not read, or abstained: nothing shown.
    assert trace_view({"answer": "Paris"})["confidence_words"] is None
    assert trace_view({"answer": "x", "abstained": True, "confidence": 0.2})["confidence_words"] is None


def test_a_run_record_carries_the_confidence():
    response = RAGResponse(answer="Paris", reasoning_chain=(), retrieved_docs=(), total_tokens=0, total_cost_usd=0.0,
                           latency_ms=0.0, num_retrieval_calls=0, num_llm_calls=1, model="m",
                           architecture="self_rag", confidence=0.42)
    record = prediction_record(Question(id="q1", text="Capital of France?"), response, {}, {})
    assert record["confidence"] == 0.42
