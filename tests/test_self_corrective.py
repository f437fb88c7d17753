"""Self-corrective RAG: every branch through the scripted backend, with exact call counts."""

from __future__ import annotations

import time

import pytest

from selfrag.defaults import TOP_K
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import available_methods, create_method
from selfrag.methods.catalog.self_corrective import RRF_K, fuse_results
from selfrag.retrieval.registry import create_retriever
from selfrag.serialize import to_jsonable
from selfrag.types import ArchitectureType, Document, RetrievalResult
from tests.conftest import KeyedRetriever

QUESTION = "When was Pluto reclassified as a dwarf planet?"

DOCS = {
    "pluto": Document(id="pluto", title="Pluto", text="Pluto was discovered in 1930 by Clyde Tombaugh."),
    "iau": Document(id="iau", title="IAU 2006", text="In 2006 the IAU reclassified Pluto as a dwarf planet."),
    "ceres": Document(id="ceres", title="Ceres", text="Ceres is a dwarf planet in the asteroid belt."),
    "eris": Document(id="eris", title="Eris", text="Eris is a dwarf planet found in 2005."),
}


def make(script, table=None, **config):
    llm = ScriptedBackend(script)
    retriever = KeyedRetriever(DOCS, table if table is not None else {QUESTION: ["pluto", "ceres"]})
    method = create_method("self_corrective", llm, retriever, {"self_corrective": config})
    return method, llm, retriever


def user_prompt(llm: ScriptedBackend, n: int) -> str:
    return llm.calls[n].messages[-1].content


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


async def test_early_yes_is_one_retrieval_one_reflection_one_generation():
    method, llm, retriever = make(["DECISION: YES\nREASON: Pluto is covered.", "2006"])
    r = await method.answer(QUESTION)
    assert r.answer == "2006"
    assert (r.num_retrieval_calls, r.num_llm_calls) == (1, 2)
    assert actions(r) == ["retrieve", "reflect", "generate"]
    assert retriever.calls == [(QUESTION, TOP_K)]  # the project default
    reflect = r.reasoning_chain[1]
    assert reflect.details["decision"] == "YES" and reflect.details["reason"] == "Pluto is covered."
    assert reflect.details["documents"] == [{"id": "pluto", "title": "Pluto"}, {"id": "ceres", "title": "Ceres"}]
    assert reflect.observation == "YES: Pluto is covered."
    assert "<document index=\"1\" title=\"Pluto\">" in user_prompt(llm, 0)  # passages are delimited
    assert r.details["stopped"] == "accepted"
    assert r.details["answer_documents"]["from"] == "accepted"
    assert llm.calls[0].max_tokens == 64  # reflections are short calls
    assert llm.remaining == 0


async def test_the_answer_call_is_vanilla_rags_over_the_accepted_documents():
    method, llm, retriever = make(["DECISION: YES\nREASON: Pluto is covered.", "2006"])
    await method.answer(QUESTION)
    vanilla_llm = ScriptedBackend(["2006"])
    await create_method("vanilla_rag", vanilla_llm, KeyedRetriever(DOCS, retriever.table)).answer(QUESTION)
    assert llm.calls[1].messages == vanilla_llm.calls[0].messages


async def test_reformulate_then_yes_matches_the_two_iteration_budget():
    table = {QUESTION: ["pluto", "ceres"], "IAU 2006 Pluto reclassification": ["iau", "pluto"]}
    script = [
        "DECISION: NO\nREASON: the reclassification year is missing",
        "Query: IAU 2006 Pluto reclassification",
        "Yes. The IAU document gives the year.",
        "2006",
    ]
    method, llm, retriever = make(script, table)
    r = await method.answer(QUESTION)
    # 2 retrievals + 2 reflections + 1 generation, plus 1 reformulation.
    assert (r.num_retrieval_calls, r.num_llm_calls) == (2, 4)
    assert actions(r) == ["retrieve", "reflect", "reformulate", "retrieve", "reflect", "generate"]
    assert [q for q, _ in retriever.calls] == [QUESTION, "IAU 2006 Pluto reclassification"]
    # The reformulation sees the current query and the reason ...
    reform_prompt = user_prompt(llm, 1)
    assert "the reclassification year is missing" in reform_prompt and QUESTION in reform_prompt
    # ... and the second reflection still judges the ORIGINAL question.
    second_reflection = user_prompt(llm, 2)
    assert f"Question: {QUESTION}" in second_reflection
    assert "IAU 2006 Pluto reclassification" not in second_reflection.split("Question:")[-1]
    # The answer comes from the accepted iteration's documents.
    assert "In 2006 the IAU" in user_prompt(llm, 3)
    its = r.details["iterations"]
    assert [(i["query"], i["decision"], i["reformulated_query"]) for i in its] == [
        (QUESTION, "NO", "IAU 2006 Pluto reclassification"),
        ("IAU 2006 Pluto reclassification", "YES", None),
    ]
    assert its[0]["documents"][0] == {"id": "pluto", "title": "Pluto"}
    assert its[0]["reason"] == "the reclassification year is missing"
    assert r.reasoning_chain[2].details["reformulated_query"] == "IAU 2006 Pluto reclassification"
    assert r.details["answer_documents"] == {
        "from": "accepted", "iteration": 2,
        "documents": [{"id": "iau", "title": "IAU 2006"}, {"id": "pluto", "title": "Pluto"}],
    }


async def test_exhaustion_answers_from_the_fused_best_documents_not_the_last():
    table = {QUESTION: ["pluto", "ceres"], "dwarf planets": ["eris", "iau"], "IAU decision": ["iau", "eris"]}
    script = [
        "DECISION: NO\nREASON: no year", "dwarf planets",
        "DECISION: NO\nREASON: still no year", "IAU decision",
        "DECISION: NO\nREASON: unclear",
        "2006",
    ]
    method, llm, retriever = make(script, table, top_k=2)
    r = await method.answer(QUESTION)
    # 3 iterations: 3 retrievals + 3 reflections + 2 reformulations + 1 generation.
    assert (r.num_retrieval_calls, r.num_llm_calls) == (3, 6)
    assert actions(r) == ["retrieve", "reflect", "reformulate"] * 2 + ["retrieve", "reflect", "select_documents", "generate"]
    assert r.details["stopped"] == "exhausted"
    chosen = r.details["answer_documents"]
    assert chosen["from"] == "reciprocal_rank_fusion"
    # eris and iau were each found twice; eris first (ranks 1 and 2 vs 2 and 1 tie -> first seen).
    assert [d["id"] for d in chosen["documents"]] == ["eris", "iau"]
    assert chosen["documents"][0]["iterations"] == [2, 3]
    final_prompt = user_prompt(llm, 5)
    assert "Eris is a dwarf planet" in final_prompt and "Pluto was discovered" not in final_prompt
    select = next(s for s in r.reasoning_chain if s.action == "select_documents")
    assert select.details["strategy"] == "reciprocal_rank_fusion" and select.llm_calls == 0
    assert r.details["iterations"][-1]["reformulated_query"] is None  # no rewrite after the last try


async def test_two_iteration_exhaustion_budget():
    script = ["DECISION: NO\nREASON: a", "other words", "DECISION: NO\nREASON: b", "x"]
    method, llm, _ = make(script, {QUESTION: ["pluto"], "other words": ["eris"]}, max_iterations=2)
    r = await method.answer(QUESTION)
    # 2 retrievals + 2 reflections + 1 generation, plus 1 reformulation.
    assert (r.num_retrieval_calls, r.num_llm_calls) == (2, 4)
    assert r.details["stopped"] == "exhausted" and llm.remaining == 0


async def test_one_iteration_means_no_reformulation():
    method, llm, _ = make(["DECISION: NO\nREASON: a", "x"], max_iterations=1)
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (1, 2)
    assert actions(r) == ["retrieve", "reflect", "select_documents", "generate"]


async def test_repeated_reformulation_stops_early():
    # The rewrite only changes case and punctuation: it would retrieve the same way.
    script = ["DECISION: NO\nREASON: missing", "when was pluto reclassified as a dwarf planet", "1930"]
    method, llm, retriever = make(script)
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (1, 3)
    assert actions(r) == ["retrieve", "reflect", "reformulate", "stop", "select_documents", "generate"]
    assert r.details["stopped"] == "repeated_query"
    assert len(retriever.calls) == 1 and llm.remaining == 0


async def test_repeat_of_a_later_query_also_stops():
    table = {QUESTION: ["pluto"], "dwarf planets": ["eris"]}
    script = ["NO", "dwarf planets", "NO", "Dwarf planets!", "x"]
    method, llm, retriever = make(script, table, max_iterations=5)
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (2, 5)
    assert r.details["stopped"] == "repeated_query"


async def test_empty_reformulation_stops_early():
    method, llm, _ = make(["DECISION: NO", "Query:", "x"])
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (1, 3)
    assert r.details["stopped"] == "empty_query"


async def test_malformed_reflection_is_no_with_the_raw_text_kept():
    table = {QUESTION: ["pluto"], "IAU 2006": ["iau"]}
    script = ["DECISION: YES or NO\nREASON: <explanation>", "IAU 2006", '{"decision": "yes", "reason": "year given"}', "2006"]
    method, llm, _ = make(script, table)
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (2, 4)
    first = r.reasoning_chain[1]
    assert first.details["decision"] == "NO" and first.details["parsed"] is False
    assert first.details["raw_output"] == "DECISION: YES or NO\nREASON: <explanation>"
    assert "could not be read" in first.observation
    # An unreadable reason still gives the reformulation something to work with.
    assert "the documents did not answer the question" in user_prompt(llm, 1)
    second = r.reasoning_chain[4]
    assert second.details["decision"] == "YES" and second.details["parsed_from"] == "json"
    assert r.details["iterations"][0]["parsed"] is False


async def test_no_documents_skips_the_reflection_call():
    table = {QUESTION: [], "Pluto IAU": ["iau"]}
    method, llm, _ = make(["Pluto IAU", "DECISION: YES", "2006"], table)
    r = await method.answer(QUESTION)
    assert (r.num_retrieval_calls, r.num_llm_calls) == (2, 3)
    assert actions(r) == ["retrieve", "reflect", "reformulate", "retrieve", "reflect", "generate"]
    assert r.reasoning_chain[1].llm_calls == 0
    assert r.reasoning_chain[1].details["reason"] == "no documents were retrieved"


async def test_reflection_max_tokens_never_exceed_the_run_limit():
    llm = ScriptedBackend(["DECISION: YES", "x"])
    method = create_method("self_corrective", llm, KeyedRetriever(DOCS, {QUESTION: ["pluto"]}), max_tokens=16)
    await method.answer(QUESTION)
    assert [c.max_tokens for c in llm.calls] == [16, 16]


async def test_tokens_and_cost_are_summed_from_steps():
    script = [
        {"text": "DECISION: YES", "prompt_tokens": 100, "completion_tokens": 4, "cost_usd": 0.01},
        {"text": "2006", "prompt_tokens": 90, "completion_tokens": 2, "cost_usd": 0.02},
    ]
    method, _, _ = make(script)
    r = await method.answer(QUESTION)
    assert r.total_tokens == 196 and r.total_cost_usd == pytest.approx(0.03)
    to_jsonable(r)  # serialisable


async def test_works_on_a_real_bm25_index():
    retriever = create_retriever("bm25", list(DOCS.values()))
    llm = ScriptedBackend(["DECISION: NO\nREASON: no year", "IAU reclassified Pluto", "DECISION: YES", "2006"])
    method = create_method("self_corrective", llm, retriever, {"self_corrective": {"top_k": 1}})
    r = await method.answer("Pluto status?")
    assert r.answer == "2006" and r.details["iterations"][1]["documents"][0]["id"] == "iau"


YES_NO = "Was Pluto reclassified before Eris was found?"


async def test_a_yes_no_question_is_answered_after_the_facts_as_self_rags_joint():
    # Issue 16: every method answers a yes/no question the same way; self_corrective used
    # vanilla_rag's bare-word prompt, which the 1.5B benchmark model answers "yes" nearly always.
    table = {YES_NO: ["iau", "eris"]}
    facts = "- Pluto: reclassified in 2006\n- Eris: found in 2005\nAnswer: no"
    method, llm, _ = make(["DECISION: YES\nREASON: both years are given.", facts], table)
    r = await method.answer(YES_NO)
    assert r.answer == "no" and r.num_llm_calls == 2
    assert actions(r) == ["retrieve", "reflect", "generate_after_facts"]
    assert "In 2006 the IAU" in user_prompt(llm, 1) and "Answer: yes" in user_prompt(llm, 1)
    # With facts_first off, the answer call is vanilla_rag's again, and a sentence still reads as yes/no.
    method, llm, _ = make(["DECISION: YES", "No, Eris was found first."], table, facts_first="off")
    r = await method.answer(YES_NO)
    assert r.answer == "no" and actions(r) == ["retrieve", "reflect", "generate"]


async def test_after_exhaustion_the_yes_no_facts_are_written_over_the_fused_documents():
    table = {YES_NO: ["pluto"], "Eris discovery year": ["eris"]}
    script = [
        "DECISION: NO\nREASON: no year for Eris", "Eris discovery year", "DECISION: NO\nREASON: still unsure",
        "- Pluto: discovered in 1930\n- Eris: found in 2005\nAnswer: yes",
    ]
    method, llm, _ = make(script, table, max_iterations=2)
    r = await method.answer(YES_NO)
    assert r.answer == "yes" and r.details["stopped"] == "exhausted"
    last = user_prompt(llm, 3)
    assert "Clyde Tombaugh" in last and "Eris is a dwarf planet found in 2005" in last
    assert r.reasoning_chain[-1].action == "generate_after_facts"


def test_fuse_results_prefers_documents_found_by_several_queries():
    def res(*ids):
        return RetrievalResult(documents=tuple(DOCS[i] for i in ids), scores=(1.0,) * len(ids), query="q")

    fused = fuse_results([res("pluto", "ceres"), res("eris", "ceres")], top_k=3)
    assert [(d.id, its) for d, _, its in fused] == [("ceres", [1, 2]), ("pluto", [1]), ("eris", [2])]
    assert fused[0][1] == pytest.approx(2 / (RRF_K + 2))
    assert fuse_results([], 3) == []
    assert len(fuse_results([res("pluto", "ceres", "eris")], 2)) == 2


def test_registered_configurable_and_strict():
    cls = available_methods()["self_corrective"]
    assert cls.type == ArchitectureType.AGENTIC and cls.section() == "self_corrective"
    schema = cls.get_config_schema()
    assert schema["max_iterations"] == (int, False, 3) and schema["top_k"][1:] == (False, None)  # None: inherit
    assert create_method("self_corrective", ScriptedBackend([]), None).config.top_k == TOP_K
    with pytest.raises(ConfigError, match="unknown config key 'self_corrective.max_iter'"):
        create_method("self_corrective", ScriptedBackend([]), None, {"self_corrective": {"max_iter": 2}})
    with pytest.raises(ConfigError, match="self_corrective.max_iterations"):
        create_method("self_corrective", ScriptedBackend([]), None, {"self_corrective": {"max_iterations": 0}})


@pytest.mark.model
async def test_smoke_on_the_embedded_model(embedded_llm):
    from selfrag.data import demo_corpus

    retriever = create_retriever("bm25", demo_corpus())
    method = create_method(
        "self_corrective", embedded_llm, retriever,
        {"self_corrective": {"max_iterations": 2, "top_k": 2, "max_context_tokens": 400}}, max_tokens=48,
    )
    start = time.perf_counter()
    r = await method.answer("Which planet is known as the Red Planet?")
    print(f"self_corrective smoke: {time.perf_counter() - start:.1f}s, {r.num_llm_calls} LLM calls")
    assert isinstance(r.answer, str) and r.answer.strip()
    assert 2 <= r.num_llm_calls <= 4 and 1 <= r.num_retrieval_calls <= 2
    assert r.details["stopped"] in ("accepted", "exhausted", "repeated_query", "empty_query")
