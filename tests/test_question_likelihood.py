"""Relevance read as question likelihood (critic.relevance: question_likelihood) and forced decoding."""

from __future__ import annotations

import math

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.llm.base import BaseBackend, LLMRequest
from selfrag.methods import create_method
from selfrag.methods.core.trace import Run
from selfrag.methods.critique import Critic, CriticConfig, Task
from selfrag.methods.critique.relevance.likelihood import (
    SCALE,
    centred_values,
    likelihood_relevance,
)
from selfrag.types import Generation, RetrievalResult
from tests.test_self_rag_critic import Q, label_script

LIKELY = {"critic": {"relevance": "question_likelihood"}}
TAIL = "\n</document>\n\nWrite one question"


def likelihood_script(**extra):
    """label_script, with the question scored after each passage: A (Paris) -1.0 per token, B (Europe)
    -2.0, C (Berlin) -3.0, two tokens each."""
    return {
        **extra,
        **label_script(),
        f"capital of France.{TAIL}": {"forced_logprobs": [-0.5, -1.5]},
        f"in Europe.{TAIL}": {"forced_logprobs": [-2.0, -2.0]},
        f"of Germany.{TAIL}": {"forced_logprobs": [-3.0, -3.0]},
    }


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_values_are_centred_on_the_questions_passages_hand_checked():
    # Means -1, -2, -3: centre -2, so sigmoid(2 * 1), sigmoid(0), sigmoid(-2) = 0.8808, 0.5, 0.1192.
    assert SCALE == 2.0
    assert [round(v, 4) for v in centred_values([-1.0, -2.0, -3.0])] == [0.8808, 0.5, 0.1192]
    assert centred_values([-7.0]) == [0.5]  # one passage is average by definition
    assert centred_values([None, -1.0, -3.0]) == [None, sigmoid(2.0), sigmoid(-2.0)]
    assert centred_values([None]) == [None]


async def test_the_question_is_scored_after_each_passage(france_docs):
    llm = ScriptedBackend(likelihood_script())
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="question_likelihood"))
    result = RetrievalResult(documents=tuple(france_docs), scores=(3.0, 2.0, 1.0), query=Q,
                             retrieval_time_ms=1.0, method="bm25")
    run = Run(llm, None, {})
    readings = await likelihood_relevance(critic, run, Q, result)
    assert [round(r.value, 4) for r in readings] == [0.8808, 0.5, 0.1192]
    assert {r.source for r in readings} == {"question_likelihood"}
    # The reply scored is the user's question, never a reply the model writes.
    assert [c.forced for c in llm.calls] == [Q, Q, Q]
    steps = [s for s in run.records if s.action == "critique_relevance"]
    assert [s.details["mean_logprob"] for s in steps] == [-1.0, -2.0, -3.0]
    assert [s.details["passage"] for s in steps] == ["1", "2", "3"]


async def test_the_critic_ranks_and_answers_with_question_likelihood(france_retriever):
    llm = ScriptedBackend(likelihood_script())
    cfg = {"self_rag_critic": {"joint_candidate": False, **LIKELY}}
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    assert r.answer == "Paris"
    actions = [s.action for s in r.reasoning_chain]
    assert actions[3:6] == ["critique_relevance"] * 3
    assert actions[6:9] == ["generate_candidate", "critique_support", "critique_utility"]
    texts = [c.prompt_text() for c in llm.calls]
    # No label question about relevance is asked: the likelihood readings replace them.
    assert not any("Does the document above give information" in t for t in texts)
    # Same budget as the label questions: 1 decision + 3 × (relevance, candidate, support, utility).
    assert r.num_llm_calls == 13


async def test_the_likelihood_changes_which_passage_the_joint_draft_reads_first(france_retriever):
    """With the joint draft on, passages are ranked by fused relevance; a question made likely by
    Doc C (Berlin) puts it first although the label question would have rated it 0.1."""
    llm = ScriptedBackend({
        **label_script(),
        f"capital of France.{TAIL}": {"forced_logprobs": [-3.0]},
        f"in Europe.{TAIL}": {"forced_logprobs": [-3.0]},
        f"of Germany.{TAIL}": {"forced_logprobs": [-0.1]},
    })
    cfg = {"self_rag_critic": LIKELY}
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    rank = next(s for s in r.reasoning_chain if s.action == "rank_evidence")
    model = {p["title"]: p["model"] for p in rank.details["passages"]}
    assert model == {"Doc A": 0.1264, "Doc B": 0.1264, "Doc C": 0.9795}
    select = next(s for s in r.reasoning_chain if s.action == "select")
    assert select.details["scores"][0]["passage"] == "Doc C + Doc A + Doc B"


class NoForced(BaseBackend):
    provider = "noforced"

    async def _generate(self, request: LLMRequest) -> Generation:  # pragma: no cover - never reached
        return Generation(text="x")


async def test_a_backend_that_cannot_score_a_reply_is_a_clear_error(france_retriever):
    with pytest.raises(ConfigError, match="cannot score a given reply"):
        await NoForced("m").generate("Hello", forced="Hi")
    llm = ScriptedBackend(label_script())
    llm.supports_forced = False
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": LIKELY})
    with pytest.raises(ConfigError, match="critic.relevance=question_likelihood needs a backend"):
        await method.answer(Q)


async def test_a_scripted_forced_reply_needs_its_log_probabilities():
    llm = ScriptedBackend(["Paris"])
    with pytest.raises(ConfigError, match="forced_logprobs"):
        await llm.generate("Q", forced="What is it?")
    with pytest.raises(ConfigError, match="forced text is empty"):
        await ScriptedBackend([{"forced_logprobs": [-1.0]}]).generate("Q", forced="  ")
    gen = await ScriptedBackend([{"forced_logprobs": [-1.0, -0.5]}]).generate("Q", forced="What now")
    assert (gen.text, gen.completion_tokens, [t.token for t in gen.logprobs]) == ("What now", 2, ["What", "now"])
    with pytest.raises(ConfigError, match="only 'forced_logprobs'"):
        await ScriptedBackend([{"forced_logprobs": [-1.0]}]).generate("Q")


async def test_the_segment_method_and_the_reranker_read_question_likelihood(france_retriever):
    llm = ScriptedBackend(likelihood_script(**{"need facts looked up": {"text": "yes", "top_logprobs": {"yes": 0.0}}}))
    cfg = {"self_rag_segment": {"max_segments": 1, "beam_width": 1, "short_answer": False, **LIKELY,
                                "adaptive": {"mode": "always"}}}
    r = await create_method("self_rag_segment", llm, france_retriever, cfg).answer(Q)
    rel = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.details["critique_source"] for s in rel] == ["question_likelihood"] * 3
    llm = ScriptedBackend(likelihood_script())
    cfg = {"vanilla": {"top_k": 3}, "augmentations": {"rerank": {"top_k": 1}, **LIKELY}}
    r = await create_method("vanilla_rag", llm, france_retriever, cfg).answer(Q)
    rel = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.details["mean_logprob"] for s in rel] == [-1.0, -2.0, -3.0]


async def test_the_segment_method_reads_the_mean_when_asked(france_retriever):
    """critic.relevance: label_and_likelihood in self_rag_segment (its auto reads the label
    question alone): each candidate's relevance is the mean of the two readings."""
    llm = ScriptedBackend(likelihood_script(**{"need facts looked up": {"text": "yes", "top_logprobs": {"yes": 0.0}}}))
    cfg = {"self_rag_segment": {"max_segments": 1, "beam_width": 1, "short_answer": False,
                                "critic": {"relevance": "label_and_likelihood"}, "adaptive": {"mode": "always"}}}
    r = await create_method("self_rag_segment", llm, france_retriever, cfg).answer(Q)
    assert sum(c.forced == Q for c in llm.calls) == 3  # the question scored after each passage
    rows = next(s for s in r.reasoning_chain if s.action == "candidates").details["candidates"]
    likely = centred_values([-1.0, -2.0, -3.0])
    assert [row["rel"] for row in rows] == [round((label + lk) / 2, 4)
                                            for label, lk in zip((0.9, 0.5, 0.1), likely, strict=True)]


async def test_a_scored_reply_is_cached_apart_from_a_written_one(tmp_path):
    from selfrag.llm import CachedBackend

    inner = ScriptedBackend([{"forced_logprobs": [-0.5, -1.0]}, "Written"])
    llm = CachedBackend(inner, tmp_path / "c.db")
    first = await llm.generate("Q", forced="Scored reply")
    again = await llm.generate("Q", forced="Scored reply")
    assert [t.logprob for t in again.logprobs] == [t.logprob for t in first.logprobs] == [-0.5, -1.0]
    assert (await llm.generate("Q")).text == "Written"  # same prompt, not forced: a different entry
    assert len(inner.calls) == 2


async def test_label_and_likelihood_reads_the_mean_of_both_once_per_passage(france_retriever):
    """Label P(relevant) A 0.9, B 0.5, C 0.1; likelihood 0.8808, 0.5, 0.1192: means 0.8904, 0.5, 0.1096."""
    llm = ScriptedBackend(likelihood_script())
    llm.decodes_serially = True  # as the in-process llama.cpp backend: calls run in order
    cfg = {"self_rag_critic": {"joint_candidate": False, "critic": {"relevance": "label_and_likelihood"}}}
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    assert r.answer == "Paris"
    actions = [s.action for s in r.reasoning_chain]
    # The question scored after each passage, then per passage the label question beside its
    # candidate and support question, so that the three prompts follow one another and share
    # the question-and-passage prefix (a serial backend evaluates the passage once for them).
    assert actions[3:6] == ["critique_relevance"] * 3
    per_passage = ["critique_relevance", "generate_candidate", "critique_support", "critique_utility"]
    assert actions[6:18] == per_passage * 3
    rel = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.details["critique_source"] for s in rel] == ["question_likelihood"] * 3 + ["label_probs"] * 3
    texts = [c.prompt_text() for c in llm.calls]
    for i in range(3):  # the label question, the candidate and support: one after another, one passage
        label, candidate, support = texts[4 + 4 * i : 7 + 4 * i]
        assert "Does the document above give information" in label and "Answer the question" in candidate
        shared = label.split("Does the document above")[0]
        assert candidate.startswith(shared) and support.startswith(shared)
    assert r.reasoning_chain[0].details["schedule"] == "sequential"
    texts = [c.prompt_text() for c in llm.calls]
    assert sum("Does the document above give information" in t for t in texts) == 3  # not asked again per candidate
    # 1 decision + 3 likelihood + 3 label questions + 3 × (candidate, support, utility)
    assert r.num_llm_calls == 16
    rerank = next(s for s in r.reasoning_chain if s.action == "rerank")
    assert [row["rel"] for row in rerank.details["after"]] == [0.8904, 0.5, 0.1096]  # the means rank the drafts


async def test_the_mean_reading_hand_checked(france_docs):
    from selfrag.methods.critique.drafts import drafts
    from selfrag.methods.critique.relevance import known_relevance

    llm = ScriptedBackend(likelihood_script())
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="label_and_likelihood"))
    result = RetrievalResult(documents=tuple(france_docs), scores=(3.0, 2.0, 1.0), query=Q,
                             retrieval_time_ms=1.0, method="bm25")
    run = Run(llm, None, {})
    likely = await known_relevance(critic, run, Q, result)  # the likelihood half, made first
    assert [round(r.value, 4) for r in likely] == [0.8808, 0.5, 0.1192]
    written = await drafts(critic, run, Task(Q), list(france_docs), known=likely)
    readings = [d.verdicts["relevance"] for d in written]
    assert [round(r.value, 4) for r in readings] == [0.8904, 0.5, 0.1096]
    assert {r.source for r in readings} == {"label_and_likelihood"}
    assert "mean of P(relevant) 0.900 and question likelihood 0.881" in readings[0].note
    llm = ScriptedBackend(likelihood_script())
    llm.supports_forced = False
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="label_and_likelihood"))
    with pytest.raises(ConfigError, match="critic.relevance=label_and_likelihood needs a backend"):
        await known_relevance(critic, Run(llm, None, {}), Q, result)


async def test_a_known_mean_reading_stands_in_a_later_draft(france_docs):
    """Self-reflection hands a draft's own relevance reading to its rewrite: a mean reading is
    final (only a likelihood half is averaged with the label question), so it is not averaged again."""
    from selfrag.methods.critique.drafts import drafts
    from selfrag.methods.critique.relevance import averaged
    from selfrag.reflection.readings import reading as Reading

    llm = ScriptedBackend(likelihood_script())
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="label_and_likelihood"))
    label = Reading("relevance", {"relevant": 0.9, "irrelevant": 0.1}, "label_probs")
    likely = Reading("relevance", {"relevant": 0.3, "irrelevant": 0.7}, "question_likelihood")
    mean = averaged(label, likely)
    written = await drafts(critic, Run(llm, None, {}), Task(Q), [france_docs[0]], known=[mean])
    assert written[0].verdicts["relevance"] is mean and round(mean.value, 4) == 0.6
    assert not any("Does the document above give information" in c.prompt_text() for c in llm.calls)
