"""Reading a trace into the page's picture: decision, passages, selected candidate, highlights, timeline."""

from __future__ import annotations

from selfrag.serve.openai_format import parse_chat
from selfrag.serve.sse import event, pieces
from selfrag.serve.view import decision, highlight_spans, selected_index, trace_view


def step(action: str, **details) -> dict:
    return {"step_id": 1, "action": action, "observation": f"{action} done", "details": details}


def test_a_probability_decision_against_its_threshold():
    d = decision({"reasoning_chain": [step("retrieval_decision", retrieval_needed=False, p_yes=0.21,
                                           threshold=0.4, decision_source="label_probs")]})
    assert d["kind"] == "probability" and d["p"] == 0.21 and d["threshold"] == 0.4 and d["needed"] is False


def test_the_critics_probability_and_a_text_verdict():
    critic = decision({"reasoning_chain": [step("retrieval_decision", p_retrieve=0.7, threshold=0.5, decision="yes")]})
    assert critic["kind"] == "probability" and critic["p_name"] == "p_retrieve" and critic["needed"] is True
    said = decision({"reasoning_chain": [step("retrieval_decision", retrieval_needed=True, p_yes=None,
                                              decision_source="text", raw_output=" Yes, retrieve. ")]})
    assert said["kind"] == "verdict" and said["verdict"] == "Yes, retrieve." and said["p_name"] is None


def test_a_method_without_a_decision_step():
    retrieving = {"reasoning_chain": [{"action": "retrieve", "retrieval_calls": 1, "details": {}}]}
    assert decision(retrieving) == {**decision(retrieving), "kind": "fixed", "needed": True}
    assert decision({"reasoning_chain": [{"action": "direct_answer", "llm_calls": 1}]})["needed"] is False


def test_the_selected_candidate_from_the_candidate_the_selection_step_or_the_answer():
    cands = [{"text": "A"}, {"text": "B", "details": {"selected": True}}, {"text": "C"}]
    assert selected_index({"candidates": cands, "answer": "C"}) == 1
    plain = [{"text": "A"}, {"text": "B"}, {"text": "C"}]
    assert selected_index({"candidates": plain, "reasoning_chain": [step("select_best", selected=3)]}) == 2
    assert selected_index({"candidates": plain, "prediction": "  B "}) == 1
    assert selected_index({"candidates": plain, "answer": "D"}) is None
    assert selected_index({"candidates": [], "answer": "A"}) is None


def test_highlights_mark_the_sentences_the_answer_draws_on():
    passage = "Jupiter is the fifth planet. Its Great Red Spot is a storm larger than Earth. It has moons."
    spans = highlight_spans("The Great Red Spot is a storm on Jupiter.", passage)
    assert [passage[s:e] for s, e in spans] == ["Its Great Red Spot is a storm larger than Earth."]
    assert highlight_spans("Paris", "Paris is the capital. Lyon is not.") == [[0, 21]]
    assert highlight_spans("the", "The end.") == []  # stop words alone mark nothing


def test_the_view_puts_critiques_on_passages_and_marks_the_cited_ones():
    paris = {"id": "p", "title": "Paris", "text": "Paris is the capital of France."}
    record = {
        "answer": "Paris",
        "citations": [{"id": "p", "title": "Paris"}],
        "candidates": [
            {"text": "Paris", "passage": paris, "relevance": "relevant", "support": "fully supported", "utility": 5,
             "score": 6.0, "details": {"passage_indices": [1]}},
            {"text": "Paris!", "passage": paris, "relevance": "irrelevant", "score": 1.0,
             "details": {"passage_indices": [1, 2], "joint": True}},
        ],
        "reasoning_chain": [
            {"step_id": 1, "action": "retrieve", "retrieval_calls": 1, "latency_ms": 1.26,
             "details": {"documents": [{"id": "p", "title": "Paris", "score": 2.0},
                                       {"id": "b", "title": "Berlin", "score": 1.0}]}},
            {"step_id": 2, "action": "generate", "llm_calls": 1, "tokens_used": 40, "cost_usd": 0.001,
             "latency_ms": 300.0, "cached": True, "details": {}},
        ],
    }
    view = trace_view(record, {"b": "Berlin is in Germany."})
    p, b = view["passages"]
    assert (p["relevance"], p["support"], p["utility"]) == ("relevant", "fully supported", 5)  # not the joint one's
    assert p["cited"] and p["highlights"] == [[0, 31]] and not b["cited"] and b["text"] == "Berlin is in Germany."
    assert [c["joint"] for c in view["candidates"]] == [False, True] and view["selected"] == 0
    assert view["timeline"][0]["kind"] == "retrieval" and view["timeline"][1] == {
        "step": 2, "action": "generate", "kind": "llm", "tokens": 40, "prompt_tokens": 0, "completion_tokens": 0,
        "cost_usd": 0.001, "latency_ms": 300.0, "cached": True, "observation": ""}
    assert trace_view({**record, "citations": ["b"]})["passages"][1]["cited"]  # bare ids read too
    # A stored line without citations: nothing is marked cited, and the page says so.
    older = trace_view({k: v for k, v in record.items() if k != "citations"})
    assert older["citations_known"] is False and not any(x["cited"] for x in older["passages"])


def test_event_framing_and_answer_pieces():
    assert event({"a": "é"}, "progress") == 'event: progress\ndata: {"a":"é"}\n\n'.encode()
    text = "Paris,  on the\nSeine "
    assert "".join(pieces(text)) == text and len(pieces(text)) > 3
    assert pieces("") == []


def test_the_question_is_the_last_user_message():
    chat = parse_chat({"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "x"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {}}]},
        {"role": "tool", "content": "y"}]}, 100)
    assert chat.question == "second" and chat.stream and chat.model == "m" and not chat.include_usage
