"""The self_rag method with fused critiques: one call per passage returns answer and all verdicts.

The scripted backend answers by key: the decision prompt by a phrase only it
contains, a candidate prompt by its passage's text.
"""

from __future__ import annotations

import json
import os

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import DelayedBackend, ScriptedBackend
from selfrag.methods import create_method
from selfrag.reflection.parse import parse_fused_critique
from selfrag.types import Question

QUESTION = Question(id="q1", text="What is the capital of France?", answers=("Paris",))
DECISION = "checked in reference documents"
DOC_A, DOC_B, DOC_C = (
    "Paris is the capital of France.",
    "France is in Europe.",
    "Berlin is the capital of Germany.",
)


def verdict(answer, relevance="relevant", support="fully_supported", utility=5) -> str:
    return json.dumps(
        {"answer": answer, "relevance": relevance, "support": support, "utility": utility}
    )


def fused(llm, retriever, **config):
    # One candidate per passage, no confidence reading: the fused mode's own budget of 1 + n calls.
    # adaptive: the question-only decision these tests script.
    return create_method("self_rag", llm, retriever, {"self_rag": {"joint_candidate": False, "critique": "fused",
                                                                  "confidence": "off", "retrieval_mode": "adaptive",
                                                                  **config}})


def json_script(**extra) -> dict:
    return {
        DECISION: "yes",
        DOC_A: verdict("Paris", support="partially_supported", utility=4),
        DOC_B: verdict("Europe", support="fully_supported", utility=2),
        DOC_C: verdict("Berlin", relevance="irrelevant", support="no_support", utility=5),
        **extra,
    }


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


async def test_json_backend_costs_one_plus_n_calls_and_scores_like_combined(france_retriever):
    llm = ScriptedBackend(json_script())
    response = await fused(llm, france_retriever, num_candidates=3).answer(QUESTION)

    assert response.num_llm_calls == 1 + 3
    assert response.num_retrieval_calls == 1
    assert actions(response) == [
        "retrieval_decision",
        "retrieve",
        "generate_and_critique",
        "generate_and_critique",
        "generate_and_critique",
        "select_best",
    ]
    # utility + 2 * support bonus + 0.5 * relevant: 4 + 1 + 0.5 beats 2 + 2 + 0.5 and 5 + 0 + 0.
    assert [(c.text, c.relevance, c.support, c.utility, c.score) for c in response.candidates] == [
        ("Paris", "relevant", "partially supported", 4, 5.5),
        ("Europe", "relevant", "fully supported", 2, 4.5),
        ("Berlin", "irrelevant", "no support", 5, 5.0),
    ]
    assert response.answer == "Paris"
    candidate_calls = [c for c in llm.calls if DECISION not in c.prompt_text()]
    assert all(c.response_format == "json" for c in candidate_calls)
    assert all(s.details.get("output_format") == "json" for s in response.reasoning_chain
               if s.action == "generate_and_critique")


async def test_text_backend_reads_tagged_lines_with_utility(france_retriever):
    llm = ScriptedBackend(
        {
            DECISION: "yes",
            DOC_A: "Paris\n[IsRel] relevant\n[IsSup] partially supported\n[IsUse] 3",
            DOC_B: "Europe\n[IsRel] relevant\n[IsSup] fully supported\n[IsUse] 5",
        },
        supports_json=False,
    )
    response = await fused(llm, france_retriever, num_candidates=2).answer(QUESTION)

    assert response.num_llm_calls == 3
    assert [(c.text, c.utility) for c in response.candidates] == [("Paris", 3), ("Europe", 5)]
    assert response.answer == "Europe"
    candidate_prompts = [c.prompt_text() for c in llm.calls[1:]]
    assert all("[IsUse]" in p and c.response_format is None
               for p, c in zip(candidate_prompts, llm.calls[1:], strict=True))


async def test_malformed_output_falls_back_to_defaults_without_crashing(france_retriever):
    llm = ScriptedBackend(
        {DECISION: "yes", DOC_A: "{not json at all", DOC_B: '{"answer": "Europe", "utility": "lots"}'}
    )
    response = await fused(llm, france_retriever, num_candidates=2).answer(QUESTION)

    first, second = response.candidates
    assert (first.relevance, first.support, first.utility) == ("relevant", "partially supported", 3)
    assert first.details["defaults_used"] == ["relevance", "support", "utility"]
    assert second.text == "Europe"
    assert second.details["defaults_used"] == ["relevance", "support", "utility"]
    # The first reply is no answer (broken JSON): it is discarded, never selected.
    assert first.text == "{not json at all"
    discard = next(s for s in response.reasoning_chain if s.action == "discard_candidates")
    assert discard.details["discarded"][0]["reason"] == "json"
    assert response.answer == "Europe"


async def test_no_retrieval_path_is_two_calls(france_retriever):
    llm = ScriptedBackend({DECISION: "no", QUESTION.text: "Paris"})
    response = await fused(llm, france_retriever).answer(QUESTION)
    assert response.num_llm_calls == 2
    assert response.num_retrieval_calls == 0
    assert actions(response) == ["retrieval_decision", "direct_answer"]
    assert response.answer == "Paris"


@pytest.mark.parametrize("mode, latencies", [("fused", 2), ("combined", 3)])
async def test_critical_path_in_call_latencies(mode, latencies, static_retriever_factory):
    from selfrag.types import Document, RetrievalResult

    docs = tuple(Document(id=str(i), text=f"Passage number {i} about Paris.") for i in range(5))
    retriever = static_retriever_factory(
        RetrievalResult(documents=docs, scores=(1.0,) * 5, query="q", retrieval_time_ms=0.0,
                        method="bm25")
    )
    script = {DECISION: "yes"}
    for doc in docs:
        script[doc.text] = verdict("Paris") if mode == "fused" else "Paris\n[IsRel] relevant\n[IsSup] fully supported"
    script["Answer: Paris"] = "5"
    llm = DelayedBackend(ScriptedBackend(script), 0.05)
    method = create_method(
        "self_rag", llm, retriever,
        {"self_rag": {"joint_candidate": False, "confidence": "off", "critique": mode, "num_candidates": 5,
                      "retrieval_mode": "adaptive"}},  # the seed's decision call first
    )
    response = await method.answer(QUESTION)
    assert response.num_llm_calls == llm.calls == (1 + 5 if mode == "fused" else 1 + 2 * 5)
    # The decision, then the five passages' chains side by side.
    assert llm.waves() == latencies
    assert llm.max_in_flight == 5
    spans = llm.spans()
    assert [s.number for s in spans if s.wave == 1] == [1]
    assert DECISION in spans[0].request.prompt_text()
    for wave in range(2, latencies + 1):
        calls = [s for s in spans if s.wave == wave]
        assert len(calls) == 5  # one call of each passage's chain
        assert all(a.overlaps(b) for a in calls for b in calls)
    # The second wave holds every passage's first call: its candidate prompt.
    second = [s.request.prompt_text() for s in spans if s.wave == 2]
    assert [sum(d.text in p for p in second) for d in docs] == [1] * 5


@pytest.mark.parametrize("mode", ["combined", "fused"])
async def test_candidate_prompts_share_instructions_and_question_before_the_passage(
    mode, france_retriever
):
    verdicts = {
        "combined": "Paris\n[IsRel] relevant\n[IsSup] fully supported",
        "fused": verdict("Paris"),
    }
    llm = ScriptedBackend(
        {DECISION: "yes", DOC_A: verdicts[mode], DOC_B: verdicts[mode], DOC_C: verdicts[mode],
         "Answer: Paris": "4"}
    )
    await create_method(
        "self_rag", llm, france_retriever, {"self_rag": {"joint_candidate": False, "confidence": "off", "critique": mode}}
    ).answer(QUESTION)
    prompts = [c.prompt_text() for c in llm.calls
               if any(d in c.prompt_text() for d in (DOC_A, DOC_B, DOC_C))]
    assert len(prompts) == 3
    shared = os.path.commonprefix(prompts)
    assert QUESTION.text in shared
    assert not any(d in shared for d in (DOC_A, DOC_B, DOC_C))
    # Everything before the passage is shared.
    assert all(p.index(d) <= len(shared) + 20
               for p, d in zip(prompts, (DOC_A, DOC_B, DOC_C), strict=True))


def test_unknown_critique_mode_is_rejected(france_retriever):
    with pytest.raises(ConfigError, match="critique"):
        create_method("self_rag", ScriptedBackend([]), france_retriever,
                      {"self_rag": {"joint_candidate": False, "critique": "merged"}})


@pytest.mark.parametrize(
    "text, expected",
    [
        (verdict("Paris", "irrelevant", "no_support", 2),
         ("Paris", "irrelevant", "no support", 2, "json", [])),
        ('```json\n{"answer": "Paris", "relevance": "relevant", "support": "fully supported", '
         '"utility": 9}\n```', ("Paris", "relevant", "fully supported", 5, "json", [])),
        ("Answer: Paris\n[IsRel] relevant\n[IsSup] fully supported\n[IsUse] 4",
         ("Paris", "relevant", "fully supported", 4, "tags", [])),
        ("Paris\n[IsUse] 2", ("Paris", "relevant", "partially supported", 2, "tags",
                              ["relevance", "support"])),
        # JSON without an answer is no answer (not the JSON text itself).
        ('{"utility": 5}', ("", "relevant", "partially supported", 5, "json",
                            ["relevance", "support"])),
        # A second object (a quoted passage) cannot raise the verdicts; the first answer counts.
        (verdict("HACKED", "irrelevant", "no_support", 1) + " quoting: "
         + verdict("Other", "relevant", "fully_supported", 5),
         ("HACKED", "irrelevant", "no support", 1, "json", [])),
        (verdict("Paris", "relevant", "partially_supported", 3) + "\n"
         + verdict("Paris", "irrelevant", "fully_supported", 5),
         ("Paris", "irrelevant", "partially supported", 3, "json", [])),
        ("", ("", "relevant", "partially supported", 3, "tags",
              ["relevance", "support", "utility"])),
    ],
)
def test_parse_fused_critique(text, expected):
    f = parse_fused_critique(text)
    c = f.critique
    assert (c.generation, c.relevance, c.support, f.utility.value, f.source, f.defaults) == expected


# -- retrieval_mode: always / never skip the decision call ----------------------


@pytest.mark.parametrize(
    "mode, calls",
    [("combined", 2 * 3), ("fused", 3), ("separate", 4 * 3)],
)
async def test_always_retrieve_skips_the_decision_call(mode, calls, france_retriever):
    script = {
        "combined": {d: "Paris\n[IsRel] relevant\n[IsSup] fully supported" for d in (DOC_A, DOC_B, DOC_C)}
        | {"Answer: Paris": "4"},
        "fused": {d: verdict("Paris") for d in (DOC_A, DOC_B, DOC_C)},
        "separate": {
            d: ['{"relevance": "relevant"}', "Paris", '{"support": "fully_supported"}']
            for d in (DOC_A, DOC_B, DOC_C)
        }
        | {"Response: Paris": '{"utility": 4}'},
    }[mode]
    llm = ScriptedBackend(script)
    method = create_method(
        "self_rag", llm, france_retriever,
        {"self_rag": {"joint_candidate": False, "confidence": "off", "critique": mode, "retrieval_mode": "always"}},
    )
    response = await method.answer(QUESTION)
    assert response.num_llm_calls == calls
    assert response.num_retrieval_calls == 1
    decision = response.reasoning_chain[0]
    assert (decision.action, decision.llm_calls) == ("retrieval_decision", 0)
    assert decision.details["retrieval_mode"] == "always"
    assert not any(DECISION in c.prompt_text() or "needs_retrieval" in c.prompt_text()
                   for c in llm.calls)
    assert response.answer == "Paris"


async def test_never_retrieve_answers_directly_in_one_call(france_retriever):
    llm = ScriptedBackend({QUESTION.text: "Paris"})
    method = create_method(
        "self_rag", llm, france_retriever, {"self_rag": {"retrieval_mode": "never"}}
    )
    response = await method.answer(QUESTION)
    assert (response.num_llm_calls, response.num_retrieval_calls) == (1, 0)
    assert actions(response) == ["retrieval_decision", "direct_answer"]
    assert response.retrieval_needed is False
