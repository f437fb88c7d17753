"""adaptive_rag: the routing step, each strategy answering in the same trace, which router is used, the settings."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import available_methods, create_method
from selfrag.methods.catalog.adaptive_rag import router_dir
from selfrag.reflection.router import STRATEGIES, features, fit_router
from selfrag.serialize import to_jsonable
from selfrag.serve.view import trace_view
from selfrag.types import ArchitectureType, Document
from tests.conftest import KeyedRetriever

ONE_HOP = "Who discovered Uranus?"
MULTI_HOP = "Were Scott Derrickson and Ed Wood of the same nationality?"
SENTENCE = "Scott Derrickson is American."
DOCS = {
    "uranus": Document(id="uranus", title="Uranus", text="William Herschel discovered Uranus in 1781."),
    "scott": Document(id="scott", title="Scott Derrickson", text="Scott Derrickson is an American director."),
    "ed": Document(id="ed", title="Ed Wood", text="Ed Wood was an American filmmaker."),
}
TABLE = {ONE_HOP: ["uranus"], MULTI_HOP: ["scott"], SENTENCE: ["scott", "ed"]}


def make(script, llm=None, **config):
    llm = llm or ScriptedBackend(script)
    retriever = KeyedRetriever(DOCS, TABLE)
    return create_method("adaptive_rag", llm, retriever, {"adaptive_rag": config}), llm, retriever


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


def toy_router(path: Path) -> Path:
    """A router fitted on a toy pool: sums without retrieval, one-entity questions with one, comparisons with ircot."""
    pool = [("What is two plus two?", "no_retrieval"), ("What colour is the sky?", "no_retrieval"),
            ("What is ten minus one?", "no_retrieval"), ("What do bees make?", "no_retrieval"),
            ("Who founded Acme Corporation?", "vanilla_rag"), ("Who wrote Blue Harbour?", "vanilla_rag"),
            ("Who painted Night Garden?", "vanilla_rag"), ("Who built Stone Bridge?", "vanilla_rag"),
            ("Which is older, Acme Corporation or Zenith Labs?", "ircot"),
            ("Are Blue Harbour and Red Cliff both novels?", "ircot"),
            ("Which is longer, Stone Bridge or Iron Gate?", "ircot"),
            ("Were Paper Moon and Star Dust released the same year?", "ircot")]
    router, _ = fit_router([features(q) for q, _ in pool], [s for _, s in pool])
    router.write(path)
    return path


async def test_a_one_hop_question_goes_to_vanilla_rag_a_comparison_to_ircot_in_one_trace(caplog):
    caplog.set_level(logging.WARNING, logger="selfrag")
    method, llm, retriever = make(["William Herschel", SENTENCE, "So the answer is: yes.", "yes"])
    r = await method.answer(ONE_HOP)
    assert r.answer == "William Herschel" and (r.num_llm_calls, r.num_retrieval_calls) == (1, 1)
    assert actions(r) == ["retrieval_decision", "retrieve", "generate"]
    route = r.details["route"]
    assert route["strategy"] == "vanilla_rag" and route["router"] == "packaged rule" and route["fitted"] is False
    assert set(route["shares"]) == set(STRATEGIES) and route["allowed"] == list(STRATEGIES)
    decision = r.reasoning_chain[0]
    assert decision.observation.startswith("retrieval needed: yes (router: vanilla_rag, one retrieval")
    assert decision.details["retrieval_needed"] is True and decision.details["decision_source"] == "router rule"
    r = await method.answer(MULTI_HOP)
    assert r.details["route"]["strategy"] == "ircot" and r.answer == "yes"
    assert actions(r) == ["retrieval_decision", "retrieve", "gather", "reason", "retrieve", "gather", "reason",
                          "generate"]
    assert r.details["stopped"] == "answer_stated"  # ircot's own details follow the route
    assert [q for q, _ in retriever.calls] == [ONE_HOP, MULTI_HOP, SENTENCE]
    # The packaged rule is not a fit: said once per model, not once per question.
    warnings = [rec.getMessage() for rec in caplog.records if "no fitted router" in rec.getMessage()]
    assert len(warnings) == 1 and "selfrag router fit" in warnings[0]


async def test_a_fitted_toy_router_sends_each_question_where_it_was_fitted_to(tmp_path, caplog):
    fit = toy_router(tmp_path / "router.json")
    method, llm, retriever = make(["4", "Acme", SENTENCE, "So the answer is: yes.", "yes"], router=str(fit))
    r = await method.answer("What is three plus three?")
    assert r.details["route"]["strategy"] == "no_retrieval" and r.num_retrieval_calls == 0
    assert actions(r) == ["retrieval_decision", "direct_answer"] and r.retrieval_needed is False
    assert r.details["without_documents"].startswith("router: no_retrieval, the model answers alone")
    r = await method.answer("Who founded Gamma Industries?")
    assert r.details["route"]["strategy"] == "vanilla_rag"
    r = await method.answer(MULTI_HOP)
    assert r.details["route"]["strategy"] == "ircot" and r.details["route"]["router"] == str(fit)
    assert r.details["route"]["fitted"] is True and r.reasoning_chain[0].details["decision_source"] == "router"
    assert not [rec for rec in caplog.records if "no fitted router" in rec.getMessage()]


async def test_the_fit_for_the_model_file_is_found_by_its_sha256(tmp_path, caplog):
    from selfrag.llm.model_files import file_sha256

    model = tmp_path / "toy.gguf"
    model.write_bytes(b"weights")

    class LocalModel(ScriptedBackend):
        model_path = model

    toy_router(router_dir() / f"{file_sha256(model)}.json")
    method, _, _ = make(None, llm=LocalModel(["4"]))
    r = await method.answer("What is three plus three?")
    assert r.details["route"]["strategy"] == "no_retrieval"
    assert r.details["route"]["router"] == str(router_dir() / f"{file_sha256(model)}.json")
    assert not [rec for rec in caplog.records if "no fitted router" in rec.getMessage()]


async def test_only_the_allowed_strategies_are_chosen(tmp_path):
    method, _, _ = make(["William Herschel"], strategies=["vanilla_rag"])
    r = await method.answer(MULTI_HOP)
    assert r.details["route"]["strategy"] == "vanilla_rag" and r.details["route"]["allowed"] == ["vanilla_rag"]
    assert list(method.strategies) == ["vanilla_rag"]
    # A router that knows none of the allowed strategies: the cheapest allowed one, and the trace says so.
    rows = [features(q) for q in ("a b", "Who is X?", "c d", "Who is Y?")]
    router, _ = fit_router(rows, ["vanilla_rag", "ircot", "vanilla_rag", "ircot"])
    router.write(tmp_path / "r.json")
    method, _, _ = make(["4"], strategies=["no_retrieval"], router=str(tmp_path / "r.json"))
    r = await method.answer(ONE_HOP)
    assert r.details["route"]["strategy"] == "no_retrieval"
    assert "the router knows none of no_retrieval" in r.reasoning_chain[0].observation


async def test_settings_pass_down_to_the_strategies():
    method, llm, retriever = make(["x"] * 3, top_k=1, ircot={"max_steps": 1, "reader": "reasoning"})
    assert method.strategies["vanilla_rag"].config.top_k == 1
    ircot = method.strategies["ircot"].config
    assert (ircot.top_k, ircot.max_steps, ircot.reader) == (1, 1, "reasoning")
    assert method.strategies["ircot"].config.step_max_tokens == 64
    # ircot's own top_k wins over adaptive_rag's.
    method, _, _ = make([], top_k=1, ircot={"top_k": 3})
    assert method.strategies["ircot"].config.top_k == 3
    method, _, _ = make([], llm=ScriptedBackend([]))
    assert method.strategies["ircot"].llm_params == method.llm_params


def test_registered_configurable_and_strict(tmp_path):
    cls = available_methods()["adaptive_rag"]
    assert cls.type == ArchitectureType.AGENTIC and cls.section() == "adaptive_rag"
    schema = cls.get_config_schema()
    assert schema["router"][2] is None and schema["top_k"][1:] == (False, None)
    with pytest.raises(ConfigError, match="adaptive_rag.strategies"):
        create_method("adaptive_rag", ScriptedBackend([]), None, {"adaptive_rag": {"strategies": []}})
    with pytest.raises(ConfigError, match="adaptive_rag.strategies"):
        create_method("adaptive_rag", ScriptedBackend([]), None, {"adaptive_rag": {"strategies": ["self_rag"]}})
    with pytest.raises(ConfigError, match="adaptive_rag.ircot.steps"):
        create_method("adaptive_rag", ScriptedBackend([]), None, {"adaptive_rag": {"ircot": {"steps": 2}}})
    # A router file that is missing or not a router fails when the method is built, before any question.
    with pytest.raises(ConfigError, match="no such file; write one with `selfrag router fit`"):
        create_method("adaptive_rag", ScriptedBackend([]), None, {"adaptive_rag": {"router": str(tmp_path / "x")}})
    (tmp_path / "bad.json").write_text(json.dumps({"format": 1, "classes": []}))
    with pytest.raises(ConfigError, match="not a router fit"):
        create_method("adaptive_rag", ScriptedBackend([]), None,
                      {"adaptive_rag": {"router": str(tmp_path / "bad.json")}})


async def test_the_page_draws_the_route_as_the_retrieval_decision():
    method, _, _ = make(["William Herschel"])
    view = trace_view(json.loads(json.dumps(to_jsonable(await method.answer(ONE_HOP)))))
    assert view["decision"]["needed"] is True and view["decision"]["source"] == "router rule"
    assert "router: vanilla_rag" in view["decision"]["text"]
    assert [s["action"] for s in view["timeline"]] == ["retrieval_decision", "retrieve", "generate"]


def test_ask_takes_adaptive_rag(tmp_path, capsys):
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "uranus.md").write_text("# Uranus\n\nWilliam Herschel discovered Uranus in 1781.\n")
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["William Herschel"]))
    code = main(["ask", ONE_HOP, "--docs", str(docs), "--method", "adaptive_rag", "--llm", f"scripted:{script}",
                 "--json"])
    out = capsys.readouterr().out
    assert code == 0
    reply = json.loads(out)
    assert reply["answer"].startswith("William Herschel") and reply["details"]["route"]["strategy"] == "vanilla_rag"
