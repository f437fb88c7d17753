"""Seed 002's augmentations on any method: the `augmentations:` section, each stage, verbose, selfbio_rag.yaml."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from selfrag.assemble import build_method
from selfrag.cli.main import main
from selfrag.config import load_config, validate
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import available_methods, create_method
from selfrag.methods.critique.augmentations import KINDS, AugmentationsConfig, load_augmentations
from selfrag.types import RetrievalResult
from tests.conftest import StaticRetriever
from tests.helpers.reflection import FRANCE_Q, france_critic_script, france_docs, segment, word

REPO = Path(__file__).resolve().parents[1]
Q = FRANCE_Q
DOCS = france_docs()
ALL_ON = {
    "retrieval": {"enabled": True, "mode": "adaptive", "threshold": 0.5},
    "rerank": {"enabled": True, "top_k": 2},
    "reflection": {"enabled": True, "max_iterations": 3, "min_utility": 4},
}


def retriever() -> StaticRetriever:
    return StaticRetriever(RetrievalResult(documents=DOCS, scores=(3.0, 2.0, 1.0), query=Q, method="bm25"))


def script(*, p_yes: float = 0.7, answer: str = "Lyon", **extra) -> dict:
    """Label-probability replies: the reranker's candidates a > c > b, the method answers ``answer``."""
    return {
        **extra,
        "usefulness: Lyon\nWrite a more useful answer.": "Paris",
        "need facts looked up": word(yes=p_yes, no=round(1 - p_yes, 6)),
        **france_critic_script({"2": 1.0}),
        "Answer the question.": "Paris",  # without a passage
        "Use the documents below": answer,
    }


def answer(method: str, llm, augmentations: dict):
    return asyncio.run(create_method(method, llm, retriever(), {"augmentations": augmentations}).answer(Q))


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


def step(response, action: str):
    return next(s for s in response.reasoning_chain if s.action == action)


# -- the config section -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"rerank": {"topk": 3}}, "augmentations.rerank.topk"),
        ({"query": {"enabled": True}}, "augmentations.query"),
        ({"retrieval": {"threshold": 1.5}}, "augmentations.retrieval.threshold"),
        ({"retrieval": {"mode": "sometimes"}}, "augmentations.retrieval.mode"),
        ({"rerank": {"top_k": 0}}, "augmentations.rerank.top_k"),
        ({"reflection": {"max_iterations": 0}}, "augmentations.reflection.max_iterations"),
        ({"reflection": {"min_utility": 6}}, "augmentations.reflection.min_utility"),
        ({"weights": {"w_seq": 1}}, "augmentations.weights.w_seq"),
        ({"verbose": "loud"}, "augmentations.verbose"),
        ({"rerank": True}, "augmentations.rerank"),
        (["rerank"], "augmentations"),
    ],
)
def test_invalid_sections_fail_with_one_line_naming_the_key(section, key):
    with pytest.raises(ConfigError) as exc:
        validate({"augmentations": section})
    message = str(exc.value)
    assert key in message and "\n" not in message
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_augmentations({"augmentations": section})


def test_no_section_means_no_stage_and_an_unchanged_config_dump():
    cfg = load_config(REPO / "configs" / "vanilla_rag.yaml")
    assert cfg.augmentations is None and "augmentations" not in cfg.to_dict()
    augs = load_augmentations(cfg)
    assert not augs.active and augs.names == []
    assert {k: augs[k] for k in KINDS} == {k: () for k in KINDS}  # seed 002's shape
    assert load_augmentations(None).active is False


def test_given_sub_sections_are_on_unless_disabled():
    augs = load_augmentations(
        {"augmentations": {"retrieval": {"threshold": 0.3}, "rerank": {"enabled": False}, "reflection": {}}}
    )
    assert augs.names == ["adaptive_retrieval_0.3", "self_reflection_iter2"]  # paper's 2 iterations
    assert augs["rerank"] == () and augs["query"] == () and augs["generation"] == ()
    assert load_augmentations(AugmentationsConfig(retrieval={"mode": "always"})).names == ["retrieval_always"]
    cfg = load_config(None, ["augmentations.rerank.top_k=4"])
    assert load_augmentations(cfg).names == ["critic_reranker_top4"]


def test_paper_defaults_when_keys_are_left_out():
    cfg = AugmentationsConfig(retrieval={}, rerank={}, reflection={})
    assert cfg.retrieval.threshold == 0.2 and cfg.retrieval.mode == "adaptive"
    assert cfg.reflection.max_iterations == 2 and cfg.reflection.min_utility == 4
    assert (cfg.weights.w_rel, cfg.weights.w_sup, cfg.weights.w_use) == (1.0, 1.0, 0.5)


@pytest.mark.parametrize(
    ("method", "kind", "key"),
    [
        ("self_rag_critic", "retrieval", "self_rag_critic.adaptive"),
        ("self_rag_critic", "rerank", "self_rag_critic.rerank"),
        ("self_rag_critic", "reflection", "self_rag_critic.reflection"),
        ("self_rag_segment", "retrieval", "self_rag_segment.adaptive"),
    ],
)
def test_methods_with_a_stage_built_in_refuse_the_generic_one(method, kind, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as exc:
        create_method(method, ScriptedBackend([]), retriever(), {"augmentations": {kind: {}}})
    assert "\n" not in str(exc.value)


# -- each stage on and off, on vanilla_rag -----------------------------------------------------


def test_adaptive_retrieval_yes_retrieves_once_and_records_its_numbers():
    llm = ScriptedBackend(script(p_yes=0.7))
    r = retriever()
    m = create_method("vanilla_rag", llm, r, {"augmentations": {"retrieval": ALL_ON["retrieval"]}})
    response = asyncio.run(m.answer(Q))
    assert actions(response) == ["critic", "critique_retrieval", "retrieve", "generate"]
    assert (response.num_llm_calls, response.num_retrieval_calls) == (2, 1) and len(r.calls) == 1
    decision = step(response, "critique_retrieval")
    assert decision.details["augmentation"] == "adaptive_retrieval_0.5"
    assert decision.details["p_retrieve"] == 0.7 and decision.details["threshold"] == 0.5
    assert response.details["augmentations"]["retrieval"]["decision"] == "yes"
    assert response.retrieval_needed is True and response.answer == "Lyon"


def test_adaptive_retrieval_no_skips_the_retriever():
    llm = ScriptedBackend(script(p_yes=0.3))
    r = retriever()
    m = create_method("vanilla_rag", llm, r, {"augmentations": {"retrieval": ALL_ON["retrieval"]}})
    response = asyncio.run(m.answer(Q))
    assert r.calls == [] and response.num_retrieval_calls == 0 and response.retrieved_docs == ()
    assert actions(response) == ["critic", "critique_retrieval", "retrieve_skipped", "generate"]
    assert response.retrieval_needed is False
    prompt = llm.calls[-1].prompt_text()
    assert "Paris is the capital" not in prompt  # the method answered without passages


@pytest.mark.parametrize(("mode", "retrieves"), [("always", True), ("never", False)])
def test_always_and_never_make_no_decision_call(mode, retrieves):
    llm = ScriptedBackend(script())
    r = retriever()
    m = create_method("vanilla_rag", llm, r, {"augmentations": {"retrieval": {"mode": mode}}})
    response = asyncio.run(m.answer(Q))
    assert response.num_llm_calls == 1 and (len(r.calls) == 1) is retrieves
    assert step(response, "retrieval_decision").details["augmentation"] == f"retrieval_{mode}"


def test_critic_reranker_hands_the_method_the_best_top_k_in_order():
    llm = ScriptedBackend(script())
    response = answer("vanilla_rag", llm, {"rerank": ALL_ON["rerank"]})
    # 4 calls per passage (relevance, candidate, support, utility) + the method's answer
    assert response.num_llm_calls == 4 * 3 + 1 and response.num_retrieval_calls == 1
    rerank = step(response, "rerank")
    assert rerank.details["augmentation"] == "critic_reranker_top2" and rerank.details["kept"] == ["a", "c"]
    # a: 0.9 + 1 + 0.5·1 = 2.4; c: 0.6 + 0.5 + 0.5·(−0.5) = 0.85; b: 0.2 + 0 − 0.5 = −0.3
    assert [row["rerank"] for row in rerank.details["after"]] == [2.4, 0.85, -0.3]
    assert step(response, "generate").details["passages_in_context"] == ["a", "c"]
    assert response.details["augmentations"]["rerank"][0]["kept"] == ["a", "c"]
    # The trace keeps what the retriever returned; the method saw the reranked list.
    assert [d.id for d in response.retrieved_docs[0].documents] == ["a", "b", "c"]


def test_self_reflection_regenerates_a_low_utility_answer():
    llm = ScriptedBackend(script(answer="Lyon"))
    response = answer("vanilla_rag", llm, {"reflection": ALL_ON["reflection"]})
    assert response.answer == "Paris"
    # answer + critique (relevance, support, utility) + one rewrite (generate, support, utility)
    assert response.num_llm_calls == 1 + 3 + 3
    reflection = step(response, "self_reflection")
    assert reflection.details["augmentation"] == "self_reflection_iter3"
    assert reflection.details["utility_ratings"] == [2.0, 5.0]
    assert reflection.details["evidence"] == ["a", "b", "c"]
    summary = response.details["augmentations"]["reflection"]
    assert summary["answer_changed"] is True and summary["regenerations"] == 1
    rewrite = next(c.prompt_text() for c in llm.calls if "Write a more useful answer" in c.prompt_text())
    assert "rated 2.0 out of 5 for usefulness: Lyon" in rewrite


def test_self_reflection_keeps_a_good_answer_without_rewriting():
    llm = ScriptedBackend(script(answer="Paris"))
    response = answer("vanilla_rag", llm, {"reflection": ALL_ON["reflection"]})
    assert response.answer == "Paris" and response.num_llm_calls == 1 + 3
    assert step(response, "self_reflection").observation == "answer unchanged"


def test_self_reflection_without_passages_rates_utility_only():
    llm = ScriptedBackend(script(**{"You answer questions.": "Lyon"}))
    response = answer("no_retrieval", llm, {"reflection": ALL_ON["reflection"]})
    assert response.answer == "Paris"
    # answer + utility, then one rewrite without a passage (generate, utility)
    assert actions(response)[1:] == [
        "critic", "critique_utility", "generate_candidate", "critique_utility", "self_reflection",
    ]


def test_reflection_tokens_critique_the_answer_by_forced_positions():
    llm = ScriptedBackend(
        [
            "Lyon",  # vanilla_rag's answer
            {"text": "[Relevant]", "top_logprobs": {"[Relevant]": -0.105, "[Irrelevant]": -2.303}},
            {"text": "[No support / Contradictory]", "top_logprobs": {"[No support / Contradictory]": 0.0}},
            {"text": "[Utility:2]", "top_logprobs": {"[Utility:2]": 0.0}},
            segment("Paris", rel=1.0, sup="full", util=5),
        ],
        model="selfrag_llama2_7b",
    )
    response = answer("vanilla_rag", llm, {"reflection": ALL_ON["reflection"], "rerank": {"enabled": False}})
    assert response.answer == "Paris" and response.num_llm_calls == 5
    prompts = [c.prompt for c in llm.calls[1:4]]
    assert prompts[0].endswith("Lyon is a city in France.</paragraph>")
    assert prompts[1].endswith("</paragraph>[Relevant]Lyon")
    assert prompts[2].endswith("[Relevant]Lyon[No support / Contradictory]")
    assert step(response, "critic").details["critique_source"] == "reflection_tokens"


def test_all_stages_together_on_vanilla_rag():
    llm = ScriptedBackend(script())
    response = answer("vanilla_rag", llm, ALL_ON)
    assert response.answer == "Paris"
    # The reflection's utility of "Lyon" and of "Paris" were read by the reranker already (the
    # utility prompt holds only the question and the answer): reused, not asked again.
    assert response.num_llm_calls == 1 + 12 + 1 + 3 + 3 - 2 and response.num_retrieval_calls == 1
    assert [s.details.get("reused") for s in response.reasoning_chain if s.action == "critique_utility"][-2:] == [True, True]
    assert response.details["augmentations"]["stages"] == [
        "adaptive_retrieval_0.5", "critic_reranker_top2", "self_reflection_iter3",
    ]
    assert step(response, "self_reflection").details["evidence"] == ["a", "c"]


# -- another method ------------------------------------------------------------------------------


def test_stages_wrap_self_corrective_retrievals():
    llm = ScriptedBackend(script(answer="Paris", **{"Can the documents above answer": "YES: the capital is named."}))
    response = answer("self_corrective", llm, {"retrieval": ALL_ON["retrieval"], "rerank": ALL_ON["rerank"]})
    assert response.answer == "Paris" and response.details["stopped"] == "accepted"
    reflect = next(c.prompt_text() for c in llm.calls if "Can the documents above answer" in c.prompt_text())
    assert "Paris is the capital" in reflect and "Lyon is a city" in reflect
    assert "France is in Europe" not in reflect  # reranked out
    # decision + reranker + reflect + generate
    assert response.num_llm_calls == 1 + 12 + 1 + 1
    assert response.details["iterations"][0]["documents"] == [
        {"id": "a", "title": "Doc A"}, {"id": "c", "title": "Doc C"},
    ]


def test_adaptive_no_on_react_asks_once_and_searches_return_nothing():
    steps = ["Thought: look.\nAction: search[capital of France]", "Thought: again.\nAction: search[France capital]",
             "Thought: done.\nAction: finish[Paris]"]
    llm = ScriptedBackend(script(p_yes=0.1, **{"Reply with your next two lines": steps}))
    r = retriever()
    m = create_method("react_rag", llm, r, {"augmentations": {"retrieval": {"threshold": 0.5}}})
    response = asyncio.run(m.answer(Q))
    assert response.answer == "Paris" and r.calls == []
    assert actions(response).count("critique_retrieval") == 1
    assert actions(response).count("retrieve_skipped") == 2 and response.retrieval_needed is False


# -- verbose -------------------------------------------------------------------------------------


def test_verbose_prints_one_line_per_stage(capsys):
    answer("vanilla_rag", ScriptedBackend(script()), {"verbose": True, **ALL_ON})
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[augment q] adaptive_retrieval_0.5: RETRIEVE (p_retrieve=0.700 vs threshold 0.5; label_probs)",
        "[augment q] critic_reranker_top2: kept 2 of 3: a (2.400), c (0.850)",
        "[augment q] self_reflection_iter3: 1 regeneration(s), utility 2.0 -> 5.0; answer changed: Paris "
        "(utility 5.00 >= 4.0)",
    ]


def test_quiet_by_default(capsys):
    answer("vanilla_rag", ScriptedBackend(script()), ALL_ON)
    assert capsys.readouterr().err == ""


# -- configs/selfbio_rag.yaml ----------------------------------------------------------------------


def test_selfbio_config_turns_every_stage_on_with_seed_002_values():
    cfg = load_config(REPO / "configs" / "selfbio_rag.yaml")
    assert cfg.architecture.name == "vanilla_rag"
    aug = cfg.augmentations
    assert (aug.retrieval.enabled, aug.rerank.enabled, aug.reflection.enabled) == (True, True, True)
    assert aug.retrieval.threshold == 0.5 and aug.reflection.max_iterations == 3
    assert load_augmentations(cfg).names == ["adaptive_retrieval_0.5", "critic_reranker_top3", "self_reflection_iter3"]
    text = (REPO / "configs" / "selfbio_rag.yaml").read_text()
    assert "0.2" in text and "2 iterations" in text  # says what the paper uses


def test_selfbio_config_runs_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    row = {"id": "q1", "question": Q, "answers": ["Paris"], "contexts": [{"title": d.title, "text": d.text} for d in DOCS]}
    Path("questions.jsonl").write_text(json.dumps(row) + "\n")
    Path("script.json").write_text(json.dumps(script()))
    Path("exp.yaml").write_text(
        f"inherits: {REPO / 'configs' / 'selfbio_rag.yaml'}\n"
        "experiment: {name: selfbio}\n"
        "llm: {spec: 'scripted:script.json'}\n"
        "data: {dataset: jsonl, path: questions.jsonl}\n"
        "cache: {path: cache.db}\n"
        "augmentations: {verbose: true}\n"
    )
    code = main(["run", "exp.yaml", "--run-id", "r", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    summary = json.loads((tmp_path / "results" / "r" / "summary.json").read_text())
    assert summary["n_answered"] == 1 and summary["metrics"]["em"] == 1.0
    [line] = (tmp_path / "results" / "r" / "predictions.jsonl").read_text().splitlines()
    assert json.loads(line)["prediction"] == "Paris"
    for stage in ("adaptive_retrieval_0.5", "critic_reranker_top3", "self_reflection_iter3"):
        assert stage in line
        assert f"[augment q1] {stage}:" in err


# -- no section: every method exactly as before ------------------------------------------------------


class AnyPrompt(ScriptedBackend):
    """Answers every call with one reply that has log-probabilities."""

    def _next_response(self, request):
        if request.forced is not None:  # a scored reply (self_rag_critic's question likelihood)
            return {"forced_logprobs": [-1.0]}
        return {"text": "Paris", "top_logprobs": [{"Paris": -0.1, "yes": -2.5}]}


@pytest.mark.parametrize("name", sorted(available_methods()))
def test_no_section_leaves_every_method_unchanged(name):
    def run(build):
        llm = AnyPrompt()
        method = build(llm)
        response = asyncio.run(method.answer(Q))
        return method, response, len(llm.calls)

    cfg = load_config(None, [f"architecture.name={name}"])
    runs = [
        run(lambda llm: create_method(name, llm, retriever())),
        run(lambda llm: build_method(cfg, llm, retriever())),
        # A section with every stage off changes nothing either.
        run(lambda llm: create_method(
            name, llm, retriever(), {"augmentations": {"verbose": True, "rerank": {"enabled": False}}}
        )),
    ]
    base = runs[0][1]
    for method, response, calls in runs:
        assert method.augmentations is None
        assert calls == base.num_llm_calls
        assert (response.num_llm_calls, response.num_retrieval_calls) == (base.num_llm_calls, base.num_retrieval_calls)
        assert actions(response) == actions(base) and response.answer == base.answer
        assert "augmentations" not in response.details


@pytest.mark.parametrize("name", sorted(available_methods()))
def test_every_method_runs_with_the_stages_it_does_not_have_built_in(name):
    cls = available_methods()[name]
    section = {"verbose": False, **{k: v for k, v in ALL_ON.items() if k not in cls.builtin_augmentations}}
    llm = AnyPrompt()
    response = asyncio.run(create_method(name, llm, retriever(), {"augmentations": section}).answer(Q))
    assert response.num_llm_calls == len(llm.calls)
    if set(cls.builtin_augmentations) >= set(ALL_ON):  # self_rag_critic: nothing left to add
        assert "augmentations" not in response.details
        return
    stages = response.details["augmentations"]["stages"]
    assert ("self_reflection_iter3" in stages) is ("reflection" not in cls.builtin_augmentations)
    if "reflection" not in cls.builtin_augmentations:
        assert actions(response)[-1] == "self_reflection"
