"""Augmentations: adaptive retrieval, the critic reranker, and self-reflection."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.core.trace import Run
from selfrag.methods.critique import Critic, Task, drafts
from selfrag.methods.critique.stages import adaptive_retrieval, critic_rerank, self_reflect
from selfrag.reflection.readings import rating
from selfrag.reflection.score import Weights
from selfrag.types import RetrievalResult
from tests.conftest import StaticRetriever
from tests.helpers.reflection import FRANCE_Q, decision, france_critic_script, france_docs, word

Q = FRANCE_Q
DOCS = france_docs()


def run_for(llm, retriever=None) -> Run:
    return Run(llm, retriever, {"max_tokens": 64, "temperature": 0.0})


# -- adaptive retrieval -------------------------------------------------------------


@pytest.mark.parametrize(
    ("yes", "no", "threshold", "retrieves"),
    [(0.3, 0.7, 0.2, True), (0.15, 0.85, 0.2, False), (0.6, 0.4, 0.5, True), (0.45, 0.55, 0.5, False)],
)
async def test_adaptive_retrieves_when_probability_exceeds_threshold(yes, no, threshold, retrieves):
    llm = ScriptedBackend([word(yes=yes, no=no)])
    run = run_for(llm)
    choice = await adaptive_retrieval(Critic(llm), run, Task(Q), mode="adaptive", threshold=threshold)
    assert choice.retrieve is retrieves
    assert choice.p == pytest.approx(yes / (yes + no))
    step = run.steps()[0]
    assert step.details["p_retrieve"] == pytest.approx(round(yes / (yes + no), 4))
    assert step.details["decision"] == ("yes" if retrieves else "no")
    assert step.details["threshold"] == threshold
    assert step.details["probs"] == {"yes": yes, "no": no, "continue": 0.0}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    yes=st.floats(min_value=1e-4, max_value=1.0),
    no=st.floats(min_value=1e-4, max_value=1.0),
    threshold=st.floats(min_value=0.0, max_value=1.0),
)
def test_the_method_retrieves_exactly_when_p_exceeds_the_threshold(yes, no, threshold):
    p = math.exp(math.log(yes)) / (math.exp(math.log(yes)) + math.exp(math.log(no)))
    if abs(p - threshold) < 1e-9:
        return
    llm = ScriptedBackend({"need facts looked up": {"text": "yes", "top_logprobs": {"yes": math.log(yes), "no": math.log(no)}},
                           "Question:": "Paris"})
    retriever = StaticRetriever(RetrievalResult(documents=(), scores=(), query=Q))
    method = create_method("self_rag_critic", llm, retriever, {"self_rag_critic": {"adaptive": {"threshold": threshold}}})
    response = asyncio.run(method.answer(Q))
    assert (len(retriever.calls) == 1) is (p > threshold)
    assert response.retrieval_needed is (p > threshold)


@pytest.mark.parametrize(("mode", "decision_"), [("always", "yes"), ("never", "no")])
async def test_always_and_never_call_no_model(mode, decision_):
    llm = ScriptedBackend([])
    run = run_for(llm)
    choice = await adaptive_retrieval(Critic(llm), run, Task(Q), mode=mode, threshold=0.2)
    assert choice.decision == decision_ and choice.p is None
    assert llm.calls == []
    [step] = run.steps()
    assert step.action == "retrieval_decision" and step.llm_calls == 0
    assert step.details == {"stage": "adaptive retrieval", "mode": mode, "decision": decision_}


async def test_segment_decision_continue_and_trace():
    llm = ScriptedBackend([decision(yes=0.2, no=0.1, cont=0.7)], model="selfrag")
    run = run_for(llm)
    choice = await adaptive_retrieval(
        Critic(llm), run, Task(Q, answer_so_far="Paris.", segment=True), mode="adaptive", threshold=0.2,
        have_passages=True,
    )
    assert choice.decision == "continue" and choice.uses_passages and not choice.retrieve
    details = run.steps()[0].details
    assert details["p_evidence"] == pytest.approx(0.9)
    assert details["p_retrieve"] == pytest.approx(0.6667, abs=1e-4)  # 0.2 / (0.2 + 0.1)
    assert details["answer_so_far"] == "Paris."


async def test_unknown_retrieval_probability_retrieves_visibly():
    llm = ScriptedBackend([word(maybe=0.9)])
    run = run_for(llm)
    choice = await adaptive_retrieval(Critic(llm), run, Task(Q), mode="adaptive", threshold=0.2)
    assert choice.retrieve and choice.p is None
    assert run.steps()[0].details["decision_note"] == "retrieval probability unknown: retrieving"


# -- critic reranking ---------------------------------------------------------------------


def rerank_script():
    return france_critic_script({"3": 0.5, "4": 0.5})


async def test_critic_reranker_scores_and_keeps_top_k():
    llm = ScriptedBackend(rerank_script())
    run = run_for(llm)
    # Retrieval order puts the weakest passage first.
    result = RetrievalResult(documents=(DOCS[1], DOCS[2], DOCS[0]), scores=(3.0, 2.0, 1.0), query=Q)
    out = await critic_rerank(Critic(llm), run, Q, result, weights=Weights(), top_k=2)
    # a: 0.9 + 1.0 + 0.5·1.0 = 2.4;  c: 0.6 + 0.5 + 0.5·0.25 = 1.225;  b: 0.2 + 0 + 0.5·(−1) = −0.3
    assert [s.doc.id for s in out.ranked] == ["a", "c", "b"]
    assert [round(s.rerank.total, 4) for s in out.ranked] == [2.4, 1.225, -0.3]
    assert [s.doc.id for s in out.kept] == ["a", "c"]
    assert [s.rank for s in out.kept] == [2, 1]
    step = run.steps()[-1]
    assert step.action == "rerank" and step.llm_calls == 0
    assert step.details["before"] == [
        {"doc": "b", "retrieval_score": 3.0}, {"doc": "c", "retrieval_score": 2.0}, {"doc": "a", "retrieval_score": 1.0},
    ]
    assert step.details["after"][0] == {
        "doc": "a", "retrieval_score": 1.0, "rerank": 2.4, "rel": 0.9, "sup": 1.0, "use": 1.0,
    }
    assert step.details["kept"] == ["a", "c"]
    # Custom weights change the order: relevance only.
    out2 = await critic_rerank(Critic(llm), run_for(llm), Q, result, weights=Weights(w_rel=1, w_sup=0, w_use=0), top_k=3)
    assert [round(s.rerank.total, 4) for s in out2.ranked] == [0.9, 0.6, 0.2]


# -- self-reflection -------------------------------------------------------------------------


def reflection_script(ratings: dict[str, str], next_answer: dict[str, str]):
    script: dict = {}
    for prev, nxt in next_answer.items():
        script[f"usefulness: {prev}\nWrite a more useful answer."] = nxt
    script["capital of France.\n</document>\n\nDoes the document"] = word(relevant=1.0)
    script["capital of France.\n</document>\n\nAnswer the question"] = "Lyon"
    for answer, label in ratings.items():
        script[f"Answer: {answer}\n\nIs the answer"] = word(fully=1.0) if answer == "Paris" else word(no=1.0)
        script[f"Answer: {answer}\n\nHow useful"] = word(**{label: 1.0})
    return script


async def test_self_reflection_regenerates_until_utility_reaches_four():
    llm = ScriptedBackend(
        reflection_script({"Lyon": "2", "Marseille": "3", "Paris": "5"}, {"Lyon": "Marseille", "Marseille": "Paris"})
    )
    critic = Critic(llm)
    run = run_for(llm)
    [start] = await drafts(critic, run, Task(Q), [DOCS[0]])
    assert rating(start) == 2.0
    calls_before = len(llm.calls)
    out = await self_reflect(critic, run, Q, start, weights=Weights(use_seq_score=False), max_iterations=3, min_utility=4)
    assert out.best.text == "Paris" and out.changed
    assert len(llm.calls) - calls_before == 6  # two regenerations × (generate, support, utility)
    assert [it["rating"] for it in out.iterations] == [2.0, 3.0, 5.0]
    # scores: rel 1 + sup + 0.5·use: Lyon 1 + 0 − 0.25, Marseille 1 + 0 + 0, Paris 1 + 1 + 0.5
    assert [it["score"] for it in out.iterations] == [0.75, 1.0, 2.5]
    assert [it["changed"] for it in out.iterations] == [False, True, True]
    assert out.stop == "utility 5.00 >= 4"
    feedback = [c.prompt_text() for c in llm.calls if "Write a more useful answer" in c.prompt_text()]
    assert "rated 2.0 out of 5 for usefulness: Lyon" in feedback[0]
    step = run.steps()[-1]
    assert step.action == "self_reflection"
    assert step.details["utility_ratings"] == [2.0, 3.0, 5.0]
    assert step.details["answer_changed"] is True and step.details["improved"] is True
    assert step.details["final_score"] == 2.5


async def test_self_reflection_keeps_the_best_answer_seen_and_stops_at_max_iterations():
    llm = ScriptedBackend(
        reflection_script({"Lyon": "3", "Nice": "1", "Lille": "2"}, {"Lyon": "Nice", "Nice": "Lille"})
    )
    critic = Critic(llm)
    run = run_for(llm)
    [start] = await drafts(critic, run, Task(Q), [DOCS[0]])
    out = await self_reflect(critic, run, Q, start, weights=Weights(use_seq_score=False), max_iterations=2, min_utility=4)
    assert [it["answer"] for it in out.iterations] == ["Lyon", "Nice", "Lille"]
    assert out.best is start and not out.changed
    assert out.stop == "max_iterations (2) reached"
    assert run.steps()[-1].observation == "answer unchanged"


async def test_self_reflection_does_not_regenerate_without_a_utility_reading():
    llm = ScriptedBackend(
        {
            "Does the document": word(relevant=1.0),
            "Answer the question": "Paris",
            "Is the answer": word(fully=1.0),
            "How useful": word(great=1.0),
        }
    )
    critic = Critic(llm)
    run = run_for(llm)
    [start] = await drafts(critic, run, Task(Q), [DOCS[0]])
    calls = len(llm.calls)
    out = await self_reflect(critic, run, Q, start, weights=Weights(), max_iterations=3, min_utility=4)
    assert len(llm.calls) == calls
    assert out.stop.startswith("utility unknown")
