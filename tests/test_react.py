"""ReAct RAG: every branch through the scripted backend, with exact call counts."""

from __future__ import annotations

import time

import pytest

from selfrag.defaults import TOP_K
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import available_methods, create_method
from selfrag.methods.catalog.react import OMITTED, Turn, render_history
from selfrag.retrieval.registry import create_retriever
from selfrag.serialize import to_jsonable
from selfrag.types import ArchitectureType

QUESTION = "What is the capital of France?"


def make(script, retriever, **config):
    llm = ScriptedBackend(script)
    method = create_method("react_rag", llm, retriever, {"react": config})
    return method, llm


def user_prompt(llm: ScriptedBackend, n: int) -> str:
    return llm.calls[n].messages[-1].content


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


async def test_search_then_finish(france_retriever):
    script = [
        {"text": "Thought: I need the capital.\nAction: search[capital of France]", "completion_tokens": 12, "cost_usd": 0.001},
        {"text": "Thought: Doc A says Paris.\nAction: finish[Paris]", "completion_tokens": 9, "cost_usd": 0.002},
    ]
    method, llm = make(script, france_retriever)
    r = await method.answer(QUESTION)
    assert r.answer == "Paris"
    assert (r.num_llm_calls, r.num_retrieval_calls) == (2, 1)
    assert actions(r) == ["search", "retrieve", "finish"]
    assert france_retriever.calls == [("capital of France", TOP_K)]  # the project default
    search, retrieve, finish = r.reasoning_chain
    # A ReAct step: thought, action, action_input, observation, tokens and cost (seed 000's fields).
    assert (search.thought, search.action, search.action_input) == ("I need the capital.", "search", "capital of France")
    assert '<document index="1" title="Doc A">\nParis is the capital of France.\n</document>' in search.observation
    assert search.tokens_used > 12 and search.cost_usd == pytest.approx(0.001) and search.llm_calls == 1
    assert retrieve.retrieval_calls == 1 and retrieve.llm_calls == 0
    assert (finish.thought, finish.action_input, finish.observation) == ("Doc A says Paris.", "Paris", "Paris")
    assert search.details["react_step"] == 1 and finish.details["react_step"] == 2
    assert search.details["documents"][0] == {"id": "1", "title": "Doc A"}
    # The second step sees the first as Thought / Action / Observation.
    second = user_prompt(llm, 1)
    assert "Thought: I need the capital.\nAction: search[capital of France]\nObservation: <document" in second
    assert r.total_cost_usd == pytest.approx(0.003)
    assert r.details == {"stopped": "finish", "steps": 2, "searches": ["capital of France"]}
    assert r.retrieval_needed is True
    assert "\nObservation" in llm.calls[0].stop  # the model may not invent observations
    assert llm.calls[0].max_tokens == 128
    assert llm.remaining == 0


async def test_finish_without_searching(france_retriever):
    method, llm = make(["Thought: I know this.\nAction: finish[Paris]"], france_retriever)
    r = await method.answer(QUESTION)
    assert (r.num_llm_calls, r.num_retrieval_calls) == (1, 0)
    assert r.answer == "Paris" and r.retrieval_needed is False


async def test_malformed_action_becomes_an_observation_and_the_loop_recovers(france_retriever):
    script = [
        "I think the answer might be in the documents somewhere.",
        "Thought: try a tool\nAction: lookup[France]",
        "Action: search[capital of France]",
        "Action: finish[Paris]",
    ]
    method, llm = make(script, france_retriever)
    r = await method.answer(QUESTION)
    assert r.answer == "Paris"
    assert (r.num_llm_calls, r.num_retrieval_calls) == (4, 1)
    assert actions(r) == ["invalid_action", "invalid_action", "search", "retrieve", "finish"]
    first, second = r.reasoning_chain[:2]
    assert first.details["error"] == "no action found"
    assert second.details["error"] == "unknown action 'lookup'"
    assert "search[your query]" in first.observation and "finish[your answer]" in first.observation
    # The next prompt tells the model what went wrong and the valid formats.
    assert "Invalid action (no action found)" in user_prompt(llm, 1)
    assert "Invalid action (unknown action 'lookup')" in user_prompt(llm, 2)


async def test_step_exhaustion_ends_with_one_final_answer_call(france_retriever):
    script = ["Action: search[France]", "Action: search[capital city]", "Answer: Paris"]
    method, llm = make(script, france_retriever, max_steps=2)
    r = await method.answer(QUESTION)
    # max_steps step calls + 1 final call; one retrieval per distinct search.
    assert (r.num_llm_calls, r.num_retrieval_calls) == (3, 2)
    assert actions(r) == ["search", "retrieve", "search", "retrieve", "final_answer"]
    assert r.answer == "Paris"
    final_prompt = user_prompt(llm, 2)
    assert "Action: search[France]" in final_prompt and "Paris is the capital of France." in final_prompt
    assert llm.calls[2].messages[0].content.startswith("You answer questions.")
    assert r.details["stopped"] == "max_steps" and r.details["searches"] == ["France", "capital city"]


async def test_default_five_steps_of_nonsense_still_answer(france_retriever):
    method, llm = make(["???"] * 5 + ["I do not know"], france_retriever)
    r = await method.answer(QUESTION)
    assert (r.num_llm_calls, r.num_retrieval_calls) == (6, 0)
    assert actions(r) == ["invalid_action"] * 5 + ["final_answer"]
    assert r.answer == "I do not know" and r.retrieval_needed is False


async def test_repeated_search_is_not_retrieved_again(france_retriever):
    script = ["Action: search[capital of France]", "Action: search[Capital of France?]", "Action: finish[Paris]"]
    method, llm = make(script, france_retriever)
    r = await method.answer(QUESTION)
    assert (r.num_llm_calls, r.num_retrieval_calls) == (3, 1)
    assert r.reasoning_chain[2].details["repeated_search"] is True
    assert "You already searched for" in r.reasoning_chain[2].observation


async def test_observations_are_shortened_passages(france_retriever, france_docs):
    long_doc = france_docs[0].__class__(id="L", title="Long", text="word " * 500)
    france_retriever.result = france_retriever.result.__class__(
        documents=(long_doc,), scores=(1.0,), query="q"
    )
    method, llm = make(["Action: search[x]", "Action: finish[y]"], france_retriever, observation_tokens=20)
    r = await method.answer(QUESTION)
    obs = r.reasoning_chain[0].observation
    assert obs.count("word") <= 20 and obs.startswith('<document index="1" title="Long">')


def test_history_drops_oldest_observations_first_to_fit():
    turns = [Turn(f"t{i}", f"search[q{i}]", "obs " * 50) for i in range(4)]

    def words(text):
        return len(text.split())

    full = render_history(turns, 10_000, words)
    assert OMITTED not in full
    fitted = render_history(turns, 100, words)
    assert words(fitted) <= 100 and fitted.count(OMITTED) == 3
    assert fitted.rstrip().endswith("obs")  # the latest observation is kept
    tiny = render_history(turns, 60, words)
    assert "t0" not in tiny and "search[q3]" in tiny
    assert render_history([], 10, words) == ""


async def test_response_is_json_serialisable(france_retriever):
    method, _ = make(["Action: search[x]", "Action: finish[Paris]"], france_retriever)
    data = to_jsonable(await method.answer(QUESTION))
    assert data["reasoning_chain"][0]["action"] == "search"


def test_registered_configurable_and_strict():
    cls = available_methods()["react_rag"]
    assert cls.type == ArchitectureType.AGENTIC and cls.section() == "react"
    schema = cls.get_config_schema()
    assert schema["max_steps"] == (int, False, 5) and schema["top_k"][1:] == (False, None)  # None: inherit
    assert create_method("react_rag", ScriptedBackend([]), None).config.top_k == TOP_K
    with pytest.raises(ConfigError, match="unknown config key 'react.steps'"):
        create_method("react_rag", ScriptedBackend([]), None, {"react": {"steps": 2}})
    m = create_method("react_rag", ScriptedBackend([]), None, {"top_k": 7, "react": {"max_steps": 2}})
    assert m.config["top_k"] == 7 and m.config["max_steps"] == 2


@pytest.mark.model
async def test_smoke_on_the_embedded_model(embedded_llm):
    from selfrag.data import demo_corpus

    retriever = create_retriever("bm25", demo_corpus())
    method = create_method(
        "react_rag", embedded_llm, retriever,
        {"react": {"max_steps": 2, "top_k": 2, "observation_tokens": 40}}, max_tokens=48,
    )
    start = time.perf_counter()
    r = await method.answer("Which planet is known as the Red Planet?")
    print(f"react_rag smoke: {time.perf_counter() - start:.1f}s, {r.num_llm_calls} LLM calls")
    assert isinstance(r.answer, str) and r.answer.strip()
    # Whatever the small model writes, the budget follows from how the loop ended.
    steps = r.details["steps"]
    if r.details["stopped"] == "finish":
        assert 1 <= steps <= 2 and r.num_llm_calls == steps
    else:
        assert r.details["stopped"] == "max_steps" and steps == 2
        assert r.num_llm_calls == 3  # two steps and the final answer call
    assert r.num_retrieval_calls == len(r.details["searches"])
