"""The self_rag_critic method: scripted runs in every critique source, the CLI, configs, and the real model."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.data import demo_corpus
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.critique.stages import WeightsConfig
from selfrag.reflection.score import Weights
from selfrag.retrieval.registry import create_retriever
from selfrag.types import RetrievalResult
from tests.conftest import StaticRetriever
from tests.helpers.reflection import decision, segment, word

Q = "What is the capital of France?"
REPO = Path(__file__).resolve().parents[1]


def label_script(retrieve=(0.9, 0.1)):
    """france_docs: Doc A (Paris, the answer), Doc B (Europe), Doc C (Berlin)."""
    return {
        "need facts looked up": word(yes=retrieve[0], no=retrieve[1]),
        "capital of France.\n</document>\n\nDoes the document": word(relevant=0.9, irrelevant=0.1),
        "in Europe.\n</document>\n\nDoes the document": word(relevant=0.5, irrelevant=0.5),
        "of Germany.\n</document>\n\nDoes the document": word(relevant=0.1, irrelevant=0.9),
        "capital of France.\n</document>\n\nAnswer the question": {"text": "Paris", "top_logprobs": [{"Paris": -0.2}]},
        "in Europe.\n</document>\n\nAnswer the question": {"text": "Lyon", "top_logprobs": [{"Lyon": -0.1}]},
        "of Germany.\n</document>\n\nAnswer the question": {"text": "Berlin", "top_logprobs": [{"Berlin": -0.05}]},
        "Answer: Paris\n\nIs the answer": word(fully=0.8, partially=0.2),
        "Answer: Lyon\n\nIs the answer": word(partially=0.5, no=0.5),
        "Answer: Berlin\n\nIs the answer": word(no=1.0),
        "Answer: Paris\n\nHow useful": word(**{"5": 0.6, "4": 0.4}),
        "Answer: Lyon\n\nHow useful": word(**{"3": 1.0}),
        "Answer: Berlin\n\nHow useful": word(**{"1": 1.0}),
        "Question: What": "Paris",  # the answer without passages
        # The question likelihood after each passage (relevance: auto reads it beside the label
        # question): mean log-probabilities -0.9 / -2.0 / -3.1, centred -> 0.90 / 0.50 / 0.10.
        "capital of France.\n</document>\n\nWrite one question": {"forced_logprobs": [-0.9]},
        "in Europe.\n</document>\n\nWrite one question": {"forced_logprobs": [-2.0]},
        "of Germany.\n</document>\n\nWrite one question": {"forced_logprobs": [-3.1]},
    }


PASSAGE_ONLY = {"relevance": "passage"}  # the label question alone (seed 002's budget)


async def test_label_probs_pipeline_budget_trace_and_scores(france_retriever):
    llm = ScriptedBackend(label_script())
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {
        "joint_candidate": False, "rerank": {"top_k": 2}, "critic": PASSAGE_ONLY}})
    r = await method.answer(Q)
    assert r.answer == "Paris"
    # 1 retrieval decision + 3 passages × (relevance, candidate, support, utility)
    assert (r.num_llm_calls, r.num_retrieval_calls) == (13, 1)
    actions = [s.action for s in r.reasoning_chain]
    assert actions[:3] == ["critic", "critique_retrieval", "retrieve"]
    assert actions[3:15] == ["critique_relevance", "generate_candidate", "critique_support", "critique_utility"] * 3
    assert actions[15:] == ["rerank", "select"]
    rerank = r.reasoning_chain[15].details
    # A: 0.9 + (0.8 + 0.1) + 0.5·0.8 = 2.2;  B: 0.5 + 0.25 + 0 = 0.75;  C: 0.1 + 0 − 0.5 = −0.4
    assert [row["rerank"] for row in rerank["after"]] == [2.2, 0.75, -0.4]
    assert rerank["kept"] == ["1", "2"]
    select = r.reasoning_chain[16].details
    # segment score adds seq = exp(mean token log-prob): A exp(−0.2), B exp(−0.1)
    assert [row["score"] for row in select["scores"]] == [round(2.2 + 0.818731, 4), round(0.75 + 0.904837, 4)]
    assert [c.text for c in r.candidates] == ["Paris", "Lyon", "Berlin"]
    best = r.candidates[0]
    assert (best.relevance, best.support, best.utility) == ("relevant", "fully supported", 4.6)
    assert best.details["selected"] is True and r.candidates[2].details["reranked_out"] is True
    assert r.details["critique_source"] == "label_probs"
    assert r.details["retrieval_decision"] == "yes" and r.retrieval_needed


async def test_default_relevance_is_the_mean_of_the_label_question_and_the_question_likelihood(france_retriever):
    llm = ScriptedBackend(label_script())
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False, "rerank": {"top_k": 2}}})
    r = await method.answer(Q)
    assert r.answer == "Paris"
    assert r.reasoning_chain[0].details["relevance"] == "label_and_likelihood"
    # the seed's 13 calls + the question scored after each of the 3 passages
    assert r.num_llm_calls == 16
    forced = [c for c in llm.calls if c.forced is not None]
    assert len(forced) == 3 and all(c.forced == Q for c in forced)
    likely = [1 / (1 + math.exp(-2.0 * d)) for d in (1.1, 0.0, -1.1)]  # centred on the mean, -2.0
    mean = [(label + lk) / 2 for label, lk in zip((0.9, 0.5, 0.1), likely, strict=True)]
    rerank = next(s for s in r.reasoning_chain if s.action == "rerank").details
    # as in the seed's budget test, with the mean in place of the label question's P(relevant)
    expected = [0.8 + 0.1 + 0.5 * 0.8 + mean[0], 0.25 + mean[1], -0.5 + mean[2]]
    assert [row["rerank"] for row in rerank["after"]] == [round(v, 4) for v in expected]


def test_auto_relevance_is_the_methods_choice_where_it_can_be_read():
    from selfrag.methods.catalog.self_rag_critic import ProbabilityCriticConfig, SelfRagCriticConfig
    from selfrag.methods.critique import Critic, CriticConfig

    plain = ScriptedBackend({})
    assert Critic(plain).relevance == "passage"  # self_rag_segment and the reranker stage
    assert Critic(plain, ProbabilityCriticConfig()).relevance == "label_and_likelihood"
    # the method's own section parses into its critic config, whose auto reading is the mean
    assert isinstance(SelfRagCriticConfig(critic={"source": "auto"}).critic, ProbabilityCriticConfig)
    no_logprobs = ScriptedBackend({}, supports_logprobs=False)  # text critiques: nothing to score
    assert Critic(no_logprobs, ProbabilityCriticConfig()).relevance == "passage"
    assert Critic(plain, CriticConfig(relevance="linked")).relevance == "linked"
    assert Critic(plain, ProbabilityCriticConfig(relevance="linked")).relevance == "linked"


async def test_no_retrieval_when_the_probability_is_below_the_threshold(france_retriever):
    llm = ScriptedBackend(label_script(retrieve=(0.1, 0.9)))
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}})
    r = await method.answer(Q)
    assert france_retriever.calls == []
    assert r.retrieval_needed is False and r.num_retrieval_calls == 0
    # decision, the answer without passages, its utility
    assert [s.action for s in r.reasoning_chain] == [
        "critic", "critique_retrieval", "generate_candidate", "critique_utility", "select",
    ]
    assert r.candidates[0].passage is None
    assert r.reasoning_chain[1].details["p_retrieve"] == pytest.approx(0.1)


async def test_reflection_token_model_one_call_per_passage(france_retriever):
    llm = ScriptedBackend(
        {
            "<paragraph>Doc A": segment("Paris", rel=0.9, sup="full", util=5, end="</s>"),
            "<paragraph>Doc B": segment("Lyon", rel=0.5, sup="partial", util=3),
            "<paragraph>Doc C": segment("Berlin", rel=0.1, sup="no", util=1),
            "### Response:\n": decision(yes=0.4, no=0.6),
        },
        model="selfrag_llama2_7b",
    )
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}})
    r = await method.answer(Q)
    assert r.answer == "Paris"
    assert r.num_llm_calls == 4  # 1 decision + 1 per passage
    assert llm.calls[0].prompt == f"### Instruction:\n{Q}\n\n### Response:\n"
    assert all(c.prompt.startswith(f"### Instruction:\n{Q}\n\n### Response:\n[Retrieval]<paragraph>") for c in llm.calls[1:])
    assert r.details["critique_source"] == "reflection_tokens"
    assert r.reasoning_chain[0].details["relevance"] == "passage"  # auto: the paper's [IsRel]
    assert r.reasoning_chain[1].details["p_retrieve"] == pytest.approx(0.4)


async def test_backend_without_log_probs_uses_text_labels_visibly(france_retriever):
    script = {k: (v["text"] if isinstance(v, dict) else v) for k, v in label_script().items()
              if not (isinstance(v, dict) and "forced_logprobs" in v)}
    llm = ScriptedBackend(script, supports_logprobs=False)
    method = create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}})
    r = await method.answer(Q)
    assert r.answer == "Paris"
    assert r.details["critique_source"] == "text"
    # relevance: auto reads the question likelihood only beside label probabilities
    assert r.reasoning_chain[0].details["relevance"] == "passage"
    assert "no log-probabilities" in r.reasoning_chain[0].details["reason"]
    critiques = [s for s in r.reasoning_chain if s.action.startswith("critique_")]
    assert critiques and all(s.details["critique_source"] == "text" for s in critiques)
    assert all(c.top_logprobs == 0 for c in llm.calls)


async def test_self_reflection_in_the_method(france_retriever):
    # Keys are matched in order: the rewrite's keys come before the catch-all "Question: What".
    script = {
        "usefulness: Berlin\nWrite a more useful answer.": {"text": "Paris, France", "top_logprobs": [{"Paris, France": 0.0}]},
        "Answer: Paris, France\n\nIs the answer": word(fully=1.0),
        "Answer: Paris, France\n\nHow useful": word(**{"5": 1.0}),
        **label_script(),
    }
    # Only Doc C (Berlin) is retrieved, so the first answer is poor.
    only_c = StaticRetriever(
        RetrievalResult(documents=(france_retriever.result.documents[2],), scores=(0.7,), query=Q)
    )
    method = create_method(
        "self_rag_critic", ScriptedBackend(script), only_c,
        {"self_rag_critic": {"joint_candidate": False, "reflection": {"enabled": True, "max_iterations": 2}}},
    )
    r = await method.answer(Q)
    assert r.answer == "Paris, France"
    assert r.details["self_reflection"] == {"iterations": 1, "answer_changed": True, "stop": "utility 5.00 >= 4.0"}
    assert r.candidates[0].details["reflected"] is True
    step = r.reasoning_chain[-1]
    assert step.action == "self_reflection" and step.details["utility_ratings"] == [1.0, 5.0]


async def test_rerank_can_be_switched_off(france_retriever):
    method = create_method(
        "self_rag_critic", ScriptedBackend(label_script()), france_retriever,
        {"self_rag_critic": {"joint_candidate": False, "rerank": {"enabled": False}, "adaptive": {"mode": "always"}}},
    )
    r = await method.answer(Q)
    actions = [s.action for s in r.reasoning_chain]
    assert "rerank" not in actions and actions[1] == "retrieval_decision"
    # 3 × (question likelihood, relevance, candidate, support, utility); mode always: no decision
    assert r.num_llm_calls == 15 and len(r.candidates) == 3


async def test_regression_config_weights_reach_the_scoring(france_retriever):
    # The reference's caller and callee disagreed on argument names/positions; here the
    # config model and the scoring weights have the same fields, and a changed weight shows.
    assert set(WeightsConfig.model_fields) == {f.name for f in dataclasses.fields(Weights)}
    cfg = {"self_rag_critic": {"joint_candidate": False, "weights": {"w_rel": 0.0, "w_sup": 0.0, "w_use": 2.0, "use_seq_score": False}}}
    r = await create_method("self_rag_critic", ScriptedBackend(label_script()), france_retriever, cfg).answer(Q)
    select = r.reasoning_chain[-1].details
    assert select["weights"] == {"w_rel": 0.0, "w_sup": 0.0, "w_use": 2.0, "use_seq_score": False}
    # only utility counts: A 2·0.8 = 1.6, B 2·0 = 0, C 2·(−1) = −2
    assert [row["score"] for row in select["scores"]] == [1.6, 0.0, -2.0]


def test_unknown_config_keys_are_rejected(france_retriever):
    from selfrag.errors import ConfigError

    with pytest.raises(ConfigError, match="threshhold"):
        create_method("self_rag_critic", ScriptedBackend([]), france_retriever,
                      {"self_rag_critic": {"joint_candidate": False, "adaptive": {"threshhold": 0.3}}})


@pytest.mark.parametrize("name", ["self_rag_critic", "self_rag_critic_dense", "self_rag_critic_hybrid"])
def test_configs_load(name):
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    assert cfg.architecture.name == "self_rag_critic"
    assert cfg.retrieval.method == {"self_rag_critic": "bm25"}.get(name, name.rsplit("_", 1)[-1])
    section = cfg.method_section()
    assert section["adaptive"] == {"mode": "adaptive", "threshold": 0.2}
    assert section["weights"]["w_use"] == 0.5


def test_cli_ask_prints_the_stage_by_stage_trace(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"id": "1", "title": "Doc A", "text": "Paris is the capital of France."},
                {"id": "2", "title": "Doc B", "text": "France is in Europe."},
            ]
        )
    )
    script = tmp_path / "script.json"
    script.write_text(json.dumps(label_script()))
    code = main([
        "ask", Q, "--docs", str(docs), "--method", "self_rag_critic", "--llm", f"scripted:{script}",
        "--trace", "--set", "self_rag_critic.rerank.top_k=1", "--set", "self_rag_critic.joint_candidate=false",
    ])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Paris [1]\n")
    for text in (
        "critique_source: label_probs",
        "Stage: adaptive retrieval (mode=adaptive, threshold=0.2)",
        "RETRIEVE (p_retrieve=0.900 vs threshold 0.2; label_probs)",
        "Stage: critic reranking",
        "kept 1 of 2",
        "Stage: score each candidate",
        "probs: relevant=0.900, irrelevant=0.100",
        "Candidates:",
        "relevance=relevant (label_and_likelihood), support=fully supported (label_probs)",
    ):
        assert text in out, text


@pytest.mark.model
async def test_embedded_model_runs_both_methods_on_the_demo_corpus(embedded_llm):
    retriever = create_retriever("bm25", demo_corpus())
    question = "How many moons does Mars have?"
    timings = {}
    critic = create_method(
        "self_rag_critic", embedded_llm, retriever,
        {"self_rag_critic": {"joint_candidate": False, "top_k": 2, "max_answer_tokens": 12, "rerank": {"top_k": 2}}},
    )
    start = time.perf_counter()
    r = await critic.answer(question)
    timings["self_rag_critic"] = time.perf_counter() - start
    assert r.details["critique_source"] == "label_probs"
    # the real backend scores a given reply, so relevance is read both ways by default
    assert r.reasoning_chain[0].details["relevance"] == "label_and_likelihood"
    assert sum(s.details.get("critique_source") == "question_likelihood" for s in r.reasoning_chain) == 2
    assert r.num_llm_calls <= 1 + 5 * 2  # decision + per passage: likelihood, relevance, candidate, support, utility
    probs = [s.details["probs"] for s in r.reasoning_chain if s.action.startswith("critique_")]
    assert probs and any(isinstance(p, dict) for p in probs)
    assert r.candidates and isinstance(r.answer, str)

    seg = create_method(
        "self_rag_segment", embedded_llm, retriever,
        {"self_rag_segment": {"top_k": 2, "beam_width": 2, "max_segments": 2, "segment_tokens": 16}},
    )
    start = time.perf_counter()
    r2 = await seg.answer(question)
    timings["self_rag_segment"] = time.perf_counter() - start
    assert r2.details["critique_source"] == "label_probs"
    assert r2.num_llm_calls <= 2 * 2 * (1 + 5 * 2)
    assert any(s.action == "beam" for s in r2.reasoning_chain)
    assert r2.details["segments"] >= 1 and r2.answer
    print(f"smoke timings: {timings}")


# -- the three real backends, against local HTTP servers -------------------------------------


def _route(script: dict, text: str):
    return next(v for k, v in script.items() if k in text)


def _positions(reply) -> list[dict[str, float]]:
    if isinstance(reply, str):
        return [{reply: 0.0}]
    top = reply["top_logprobs"]
    return top if isinstance(top, list) else [top]


@pytest.mark.server
async def test_openai_compatible_server_with_a_self_rag_model_uses_reflection_tokens(france_retriever):
    from selfrag.llm.openai_compat import OpenAIBackend
    from tests.helpers.servers import ScriptedHTTPServer

    script = {
        "<paragraph>Doc A": segment("Paris", rel=0.9, sup="full", util=5, end="</s>"),
        "<paragraph>Doc B": segment("Lyon", rel=0.5, sup="partial", util=3),
        "<paragraph>Doc C": segment("Berlin", rel=0.1, sup="no", util=1),
        "### Response:\n": decision(yes=0.7, no=0.3),
    }

    def handler(path, body, headers):
        positions = _positions(_route(script, body["prompt"]))
        tokens = [max(p, key=p.get) for p in positions]
        return 200, {
            "choices": [{
                "text": "".join(tokens), "finish_reason": "stop",
                "logprobs": {"tokens": tokens, "token_logprobs": [p[t] for p, t in zip(positions, tokens, strict=True)],
                             "top_logprobs": positions},
            }],
            "usage": {"prompt_tokens": 50, "completion_tokens": len(tokens)},
        }, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("selfrag/selfrag_llama2_7b", base_url=server.url)
        r = await create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}}).answer(Q)
        await llm.aclose()
        paths = [p for p, _, _ in server.requests]
        bodies = [b for _, b, _ in server.requests]
    assert r.answer == "Paris" and r.details["critique_source"] == "reflection_tokens"
    assert paths == ["/completions"] * 4
    assert bodies[0]["max_tokens"] == 1 and bodies[0]["logprobs"] == 20
    assert r.reasoning_chain[1].details["p_retrieve"] == pytest.approx(0.7)


@pytest.mark.server
async def test_openai_chat_model_uses_label_probabilities(france_retriever):
    from selfrag.llm.openai_compat import OpenAIBackend
    from tests.helpers.servers import ScriptedHTTPServer

    script = label_script()

    def handler(path, body, headers):
        text = "\n".join(m["content"] for m in body["messages"])
        reply = _route(script, text)
        positions = _positions(reply)
        content = []
        for top in positions:
            token = max(top, key=top.get)
            alts = sorted(top.items(), key=lambda kv: -kv[1])[: body.get("top_logprobs", 0)]
            content.append({"token": token, "logprob": top[token],
                            "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]})
        text_out = reply if isinstance(reply, str) else reply["text"]
        return 200, {
            "choices": [{"message": {"content": text_out}, "finish_reason": "stop", "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1},
        }, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("gpt-4o-mini", base_url=server.url)
        r = await create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}}).answer(Q)
        await llm.aclose()
        bodies = [b for _, b, _ in server.requests]
    assert r.answer == "Paris" and r.details["critique_source"] == "label_probs"
    assert len(bodies) == 13
    critiques = [b for b in bodies if b["max_tokens"] == 1]
    assert len(critiques) == 10 and all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in critiques)
    assert r.reasoning_chain[1].details["p_retrieve"] == pytest.approx(0.9)


@pytest.mark.server
async def test_anthropic_falls_back_to_text_labels(france_retriever):
    from selfrag.llm.anthropic import AnthropicBackend
    from tests.helpers.servers import ScriptedHTTPServer

    script = label_script()

    def handler(path, body, headers):
        text = body.get("system", "") + "\n" + "\n".join(m["content"] for m in body["messages"])
        reply = _route(script, text)
        out = reply if isinstance(reply, str) else reply["text"]
        return 200, {
            "model": "claude-3-5-haiku-20241022", "content": [{"type": "text", "text": out}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 40, "output_tokens": 2},
        }, {}

    with ScriptedHTTPServer(handler) as server:
        llm = AnthropicBackend("claude-3-5-haiku-latest", base_url=server.url, api_key="sk-ant-test")
        r = await create_method("self_rag_critic", llm, france_retriever, {"self_rag_critic": {"joint_candidate": False}}).answer(Q)
        await llm.aclose()
    assert r.answer == "Paris" and r.details["critique_source"] == "text"
    assert all(s.details["critique_source"] == "text" for s in r.reasoning_chain if s.action.startswith("critique_"))


async def test_the_joint_draft_is_selected_when_it_has_an_answer(france_retriever):
    """Issue 16: the draft over the best-evidence passages is written with vanilla_rag's prompt,
    critiqued by the critic, and selected whatever the weighted scores say; it reads its passages."""
    llm = ScriptedBackend(label_script())
    r = await create_method("self_rag_critic", llm, france_retriever).answer(Q)
    ranked = next(s for s in r.reasoning_chain if s.action == "rank_evidence")
    kept = [p["title"] for p in ranked.details["passages"] if p["kept"]]
    assert len(kept) >= 2
    select = next(s for s in r.reasoning_chain if s.action == "select")
    assert "the joint draft when it has an answer" in select.thought
    selected = next(c for c in r.candidates if c.details.get("selected"))
    assert "+" in selected.passage.id
    # It reads its passages and cites the one that holds "Paris".
    assert sorted(d.title for d in r.read) == sorted(kept)
    assert [d.text for d in r.citations] == ["Paris is the capital of France."]
    joint_prompts = [c.prompt_text() for c in llm.calls if "Use the documents below" in c.prompt_text()]
    assert len(joint_prompts) == 1
    # Its support is read by the critic over the joint passages.
    support = [s for s in r.reasoning_chain if s.action == "critique_support"]
    assert any(all(t in s.thought for t in kept[:1]) for s in support)


async def test_selection_critique_ranks_the_joint_draft_by_its_score(france_retriever):
    cfg = {"self_rag_critic": {"selection": "critique"}}
    r = await create_method("self_rag_critic", ScriptedBackend(label_script()), france_retriever, cfg).answer(Q)
    select = next(s for s in r.reasoning_chain if s.action == "select")
    totals = [row["score"] for row in select.details["scores"]]
    assert totals == sorted(totals, reverse=True)
    assert select.thought.startswith("Stage: score each candidate")


async def test_abstains_when_no_passage_reaches_the_relevance_floor(france_retriever):
    """Issue 17: untitled passages ("Doc A"...) are neither named nor linked, so the best fused
    relevance is at most (P(relevant) + 1/3) / 2 < 0.7: the critic abstains before the joint draft."""
    cfg = {"self_rag_critic": {"abstain_min_relevance": 0.7}}
    llm = ScriptedBackend(label_script())
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    assert r.abstained is True and r.answer == "insufficient evidence" and r.citations == ()
    step = next(s for s in r.reasoning_chain if s.action == "abstain")
    assert step.details["abstain_reason"].startswith("no passage's fused relevance reaches 0.7 (best 0.")
    assert not any("Doc A + " in c.prompt_text() for c in llm.calls)  # no joint draft was written
    default = await create_method("self_rag_critic", ScriptedBackend(label_script()), france_retriever).answer(Q)
    r = await create_method("self_rag_critic", ScriptedBackend(label_script()), france_retriever,
                            {"self_rag_critic": {"abstain_min_relevance": 0.0}}).answer(Q)
    assert r.abstained is False and default.abstained is False and r.answer == default.answer


async def test_a_yes_no_joint_draft_writes_the_facts_first_as_in_self_rag(france_retriever):
    """Issue 16: the critic's joint wrote "yes" to 11 of the first 12 HotpotQA yes/no questions
    with vanilla_rag's prompt (0.5B model); it now shares self_rag's joint answer (joint_answer.py)."""
    question = "Is Paris the capital of France?"
    script = {
        "Do not answer at once": "- Doc A: Paris is the capital of France\nAnswer: yes",
        **label_script(),
        "Answer: yes\n\nIs the answer": word(fully=1.0),
        "Answer: yes\n\nHow useful": word(**{"5": 1.0}),
        "Answer: no\n\nIs the answer": word(partially=1.0),
        "Answer: no\n\nHow useful": word(**{"3": 1.0}),
        "Question: Is Paris": "no",  # vanilla_rag's prompt
    }
    r = await create_method("self_rag_critic", ScriptedBackend(script), france_retriever).answer(question)
    assert r.answer == "yes"
    assert next(s for s in r.reasoning_chain if s.action == "generate_after_facts").details["final"] == "yes"
    cfg = {"self_rag_critic": {"facts_first": "off"}}
    off = await create_method("self_rag_critic", ScriptedBackend(script), france_retriever, cfg).answer(question)
    assert off.answer == "no" and not any(s.action == "generate_after_facts" for s in off.reasoning_chain)


async def test_passage_candidates_wait_for_a_joint_draft_without_an_answer(france_retriever):
    """By default only the joint draft is written when it has an answer: every passage's relevance
    is read (it ranks the joint's passages), no per-passage candidate. The answer, the joint's
    passages and every reading are those of the seed's pipeline (passage_candidates: always)."""
    llm = ScriptedBackend(label_script())
    r = await create_method("self_rag_critic", llm, france_retriever).answer(Q)
    full = await create_method("self_rag_critic", ScriptedBackend(label_script()), france_retriever,
                               {"self_rag_critic": {"passage_candidates": "always"}}).answer(Q)
    actions = [s.action for s in r.reasoning_chain]
    assert "generate_candidate" not in actions and "rerank" not in actions
    assert "generate_candidate" in [s.action for s in full.reasoning_chain]
    # 1 decision + 3 likelihood + 3 label questions + the joint's answer, support and utility; the
    # seed's pipeline adds 3 candidates and their support and utility questions (one utility
    # prompt, "Paris", is the joint's own and is read once).
    assert (r.num_llm_calls, full.num_llm_calls) == (10, 18)
    assert r.answer == full.answer == "Paris" and len(r.candidates) == 1

    def joint_passages(resp):
        step = next(s for s in resp.reasoning_chain if s.action == "rank_evidence")
        return [(p["title"], p.get("model")) for p in step.details["passages"]]

    assert joint_passages(r) == joint_passages(full)


async def test_a_joint_draft_without_an_answer_brings_the_passage_candidates_back(france_retriever):
    script = {"Use the documents below": "[IsRel] relevant", **label_script()}
    llm = ScriptedBackend(script)
    r = await create_method("self_rag_critic", llm, france_retriever).answer(Q)
    full = await create_method("self_rag_critic", ScriptedBackend(script), france_retriever,
                               {"self_rag_critic": {"passage_candidates": "always"}}).answer(Q)
    assert r.answer == full.answer == "Paris"
    assert [s.action for s in r.reasoning_chain].count("generate_candidate") == 3
    assert next(s for s in r.reasoning_chain if s.action == "discard_candidates")
    # Each passage's label question was asked once: the candidates' drafts reuse the readings.
    texts = [c.prompt_text() for c in llm.calls]
    assert sum("Does the document above give information" in t for t in texts) == 3
    assert sum(c.forced is not None for c in llm.calls) == 3
    assert r.num_llm_calls == full.num_llm_calls
    assert sorted(c.text for c in r.candidates) == sorted(c.text for c in full.candidates)
