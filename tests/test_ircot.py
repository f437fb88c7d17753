"""IRCoT: the step sequence, each stop rule, de-duplication and malformed steps, on the scripted backend."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import available_methods, create_method
from selfrag.reflection.chain import MAX_SENTENCE_CHARS, read_step, stated_answer
from selfrag.retrieval.registry import create_retriever
from selfrag.serialize import to_jsonable
from selfrag.serve.view import trace_view
from selfrag.types import ArchitectureType, Document
from tests.conftest import KeyedRetriever

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?"
S1 = "Corliss Archer in Kiss and Tell was played by Shirley Temple."
S2 = "Shirley Temple later served as Chief of Protocol."
DOCS = {
    "film": Document(id="film", title="Kiss and Tell (1945 film)", text="Kiss and Tell stars Shirley Temple as Corliss Archer."),
    "radio": Document(id="radio", title="Meet Corliss Archer", text="Meet Corliss Archer was a radio programme."),
    "temple": Document(id="temple", title="Shirley Temple", text="Shirley Temple served as Chief of Protocol."),
    "waldo": Document(id="waldo", title="Janet Waldo", text="Janet Waldo voiced Corliss Archer on radio."),
}
TABLE = {QUESTION: ["film", "radio"], S1: ["film", "temple"], S2: ["temple", "waldo"]}


def make(script, **config):
    llm = ScriptedBackend(script)
    retriever = KeyedRetriever(DOCS, TABLE)
    return create_method("ircot", llm, retriever, {"ircot": {"top_k": 2, **config}}), llm, retriever


def actions(response) -> list[str]:
    return [s.action for s in response.reasoning_chain]


def prompt_of(llm: ScriptedBackend, n: int) -> str:
    return llm.calls[n].messages[-1].content


async def test_retrieve_reason_retrieve_until_the_answer_is_stated_then_read_the_passages():
    method, llm, retriever = make([S1, "So the answer is: Chief of Protocol.", "Chief of Protocol"])
    r = await method.answer(QUESTION)
    assert r.answer == "Chief of Protocol"
    assert actions(r) == ["retrieve", "gather", "reason", "retrieve", "gather", "reason", "generate"]
    assert (r.num_llm_calls, r.num_retrieval_calls) == (3, 2)
    # The question is the first query; each reasoning sentence is the next one.
    assert retriever.calls == [(QUESTION, 2), (S1, 2)]
    # The first step reasons over the question's passages; the second also over the passages its sentence found.
    first, second = prompt_of(llm, 0), prompt_of(llm, 1)
    assert "Meet Corliss Archer" in first and "Shirley Temple served" not in first
    assert "Reasoning so far:\n(none yet)" in first
    assert "Shirley Temple served as Chief of Protocol." in second and f"Reasoning so far:\n{S1}" in second
    # Each step's gather note carries its query, its sentence and the passages it added.
    gather = r.reasoning_chain[4]
    assert gather.details["query"] == S1 and gather.details["sentence"] == S1
    assert gather.details["new_passages"] == [{"id": "temple", "title": "Shirley Temple"}]
    assert gather.details["already_gathered"] == [{"id": "film", "title": "Kiss and Tell (1945 film)"}]
    assert S1 in gather.observation and "New passages: Shirley Temple (3 gathered)" in gather.observation
    assert r.reasoning_chain[1].observation.startswith("The question's passages: Kiss and Tell (1945 film), Meet")
    reason = r.reasoning_chain[2]
    assert reason.observation == S1 and reason.details["ircot_step"] == 1 and reason.details["answer_stated"] is None
    assert r.reasoning_chain[5].details["answer_stated"] == "Chief of Protocol"
    assert r.details["stopped"] == "answer_stated" and r.details["steps"] == 2
    assert r.details["chain"] == [S1, "So the answer is: Chief of Protocol."]
    assert [g["step"] for g in r.details["gathered"]] == [0, 0, 1]
    assert [d.id for d in r.read] == ["film", "radio", "temple"]
    # The reasoning calls are short; the system prompt asks for one sentence in the question's answer format.
    assert llm.calls[0].max_tokens == 64 and "So the answer is: ANSWER." in llm.calls[0].messages[0].content
    assert llm.remaining == 0


async def test_passages_are_gathered_once_each():
    method, llm, _ = make([S1, S2, "Chief of Protocol"], max_steps=2)
    r = await method.answer(QUESTION)
    ids = [g["id"] for g in r.details["gathered"]]
    assert ids == ["film", "radio", "temple", "waldo"] and len(set(ids)) == len(ids)
    final = prompt_of(llm, 2)
    for doc in DOCS.values():
        assert final.count(f'title="{doc.title}"') == 1
    third = r.reasoning_chain[7]
    assert third.action == "gather" and third.details["new_passages"] == [{"id": "waldo", "title": "Janet Waldo"}]
    assert third.details["already_gathered"] == [{"id": "temple", "title": "Shirley Temple"}]


async def test_the_step_limit_stops_the_loop_after_retrieving_for_the_last_sentence():
    method, llm, retriever = make([S1, S2, "Chief of Protocol"], max_steps=2)
    r = await method.answer(QUESTION)
    assert r.details["stopped"] == "max_steps" and r.details["steps"] == 2
    assert (r.num_llm_calls, r.num_retrieval_calls) == (3, 3)  # max_steps + 1 of each
    assert [q for q, _ in retriever.calls] == [QUESTION, S1, S2]
    assert actions(r)[-1] == "generate" and r.answer == "Chief of Protocol"


async def test_a_repeated_sentence_stops_without_retrieving_again():
    method, llm, retriever = make([S1, S1.upper(), "Chief of Protocol"])
    r = await method.answer(QUESTION)
    assert r.details["stopped"] == "repeated" and r.details["chain"] == [S1]
    assert [q for q, _ in retriever.calls] == [QUESTION, S1]
    stop = r.reasoning_chain[5]
    assert stop.action == "reason" and stop.details["stop"] == "repeated" and "repeats" in stop.observation
    # A sentence that only restates the question is no step forward either.
    method, _, retriever = make([QUESTION, "x"])
    r = await method.answer(QUESTION)
    assert r.details["stopped"] == "repeated" and len(retriever.calls) == 1


async def test_full_passages_end_the_loop_for_the_passages_reader():
    # The question's own retrieval fills max_passages: reasoning could not change what the reader reads.
    method, llm, _ = make(["Chief of Protocol"], max_passages=2)
    r = await method.answer(QUESTION)
    assert r.details["stopped"] == "passages_full" and r.details["steps"] == 0
    assert actions(r) == ["retrieve", "gather", "generate"] and r.num_llm_calls == 1
    # Over the cap, a retrieval's extra passages are left out and said so.
    method, llm, _ = make([S1, "Chief of Protocol"], max_passages=3)
    r = await method.answer(QUESTION)
    gather = r.reasoning_chain[4]
    assert gather.details["new_passages"] == [{"id": "temple", "title": "Shirley Temple"}]
    assert r.details["stopped"] == "passages_full" and len(r.details["gathered"]) == 3
    method, llm, _ = make([S2, "Chief of Protocol"], max_passages=3)
    r = await method.answer(QUESTION)
    assert r.reasoning_chain[4].details["left_out"] == [{"id": "waldo", "title": "Janet Waldo"}]
    assert "1 left out (max_passages)" in r.reasoning_chain[4].observation


async def test_the_reasoning_reader_reads_the_stated_answer_without_another_call():
    method, llm, _ = make([S1, "So the answer is: \"Chief of Protocol\"."], reader="reasoning")
    r = await method.answer(QUESTION)
    assert r.answer == "Chief of Protocol" and r.num_llm_calls == 2
    assert actions(r)[-1] == "read_answer" and r.details["reader"] == "reasoning"
    # With no answer stated, it reads the passages, and says why.
    method, llm, _ = make([S1, S2, "Chief of Protocol"], reader="reasoning", max_steps=2)
    r = await method.answer(QUESTION)
    assert r.details["reader"] == "passages" and r.num_llm_calls == 3
    assert "the reasoning stated no answer" in r.reasoning_chain[-1].thought
    # The reasoning reader keeps reasoning once the passages are full, without retrieving.
    method, llm, retriever = make([S1, "So the answer is: Chief of Protocol."], reader="reasoning", max_passages=2)
    r = await method.answer(QUESTION)
    assert r.answer == "Chief of Protocol" and len(retriever.calls) == 1
    assert r.reasoning_chain[3].details["query"] is None and "passages full" in r.reasoning_chain[3].observation


@pytest.mark.parametrize("reply", ["", "   \n\n", "***", "Next sentence:", '""'])
async def test_a_malformed_reasoning_step_stops_the_loop_and_the_passages_answer(reply):
    method, llm, retriever = make([reply, "Chief of Protocol"])
    r = await method.answer(QUESTION)
    assert r.answer == "Chief of Protocol" and r.num_llm_calls == 2 and len(retriever.calls) == 1
    assert r.details["stopped"] == "malformed" and r.details["chain"] == []
    step = r.reasoning_chain[2]
    assert step.details["malformed"] == "empty" and step.details["stop"] == "malformed"
    assert "no usable sentence" in step.observation and step.details["raw_output"] == reply


async def test_a_long_reply_is_one_query_sized_sentence_and_planted_tags_are_neutralised():
    long = "Shirley Temple " + "and her many films " * 60
    method, llm, retriever = make([long, "[IsRel] Relevant. More.", "So the answer is: x", "y"], max_steps=3)
    r = await method.answer(QUESTION)
    query = retriever.calls[1][0]
    assert len(query) <= MAX_SENTENCE_CHARS and query.startswith("Shirley Temple and her")
    assert r.details["stopped"] == "answer_stated" and r.num_llm_calls == 4
    # The second sentence holds a planted critique tag: shown to the model again, it is neutralised.
    assert "[IsRel]" not in prompt_of(llm, 2) and "IsRel" in prompt_of(llm, 2)


def test_reading_a_step():
    assert read_step("Next sentence: Temple was born in 1928. She acted.\nMore.") == read_step(
        "Next sentence: Temple was born in 1928. She acted.\nMore.")
    step = read_step("Next sentence: Temple was born in 1928. She acted.\nMore.")
    assert (step.sentence, step.answer, step.dropped, step.malformed) == (
        "Temple was born in 1928.", None, "She acted. More.", "")
    assert read_step("1. Step 2: - So the answer is: Chief of Protocol.").answer == "Chief of Protocol"
    assert read_step("\n\nA: The answer is yes.").answer == "yes"
    assert stated_answer("So the answer is:") == "" and stated_answer("Temple was an actress.") is None
    assert stated_answer("So the answer is 'U.S. Army'.") == "U.S. Army"
    assert read_step("---").malformed == "empty" and not read_step("---").states_answer


def test_registered_configurable_and_strict():
    cls = available_methods()["ircot"]
    assert cls.type == ArchitectureType.AGENTIC and cls.section() == "ircot"
    schema = cls.get_config_schema()
    assert schema["max_steps"] == (int, False, 4) and schema["max_passages"][2] == 15
    assert schema["top_k"][1:] == (False, None)
    with pytest.raises(ConfigError, match="ircot.steps"):
        create_method("ircot", ScriptedBackend([]), None, {"ircot": {"steps": 2}})
    with pytest.raises(ConfigError, match="ircot.reader"):
        create_method("ircot", ScriptedBackend([]), None, {"ircot": {"reader": "cot"}})
    capped = create_method("ircot", ScriptedBackend([]), None, max_tokens=20)
    assert capped.config.step_max_tokens == 64 and capped.llm_params["max_tokens"] == 20


async def test_the_step_calls_never_exceed_the_llm_cap():
    llm = ScriptedBackend([S1, "So the answer is: x", "x"])
    method = create_method("ircot", llm, KeyedRetriever(DOCS, TABLE), max_tokens=20)
    await method.answer(QUESTION)
    assert llm.calls[0].max_tokens == 20


async def test_the_page_draws_every_step_with_its_sentence():
    method, _, _ = make([S1, "So the answer is: Chief of Protocol.", "Chief of Protocol"])
    record = to_jsonable(await method.answer(QUESTION))
    view = trace_view(json.loads(json.dumps(record)))
    kinds = [(s["action"], s["kind"]) for s in view["timeline"]]
    assert kinds[:3] == [("retrieve", "retrieval"), ("gather", "note"), ("reason", "llm")]
    assert S1 in view["timeline"][4]["observation"] and "Shirley Temple" in view["timeline"][4]["observation"]
    assert [p["id"] for p in view["passages"]] == ["film", "radio", "temple"]


def test_runs_with_the_evidence_ranking_over_a_shared_corpus(tmp_path: Path, monkeypatch, capsys):
    """`selfrag run configs/ircot.yaml` over an open corpus (data.corpus), behind retrieval.rerank=evidence."""
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.title, "title": d.title, "text": d.text}) + "\n"
                              for d in DOCS.values()))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": QUESTION, "answers": ["Chief of Protocol"],
                                     "supporting_titles": ["Kiss and Tell (1945 film)", "Shirley Temple"]}) + "\n")
    script = tmp_path / "replies.json"
    script.write_text(json.dumps({"Use the documents below": "Chief of Protocol", "(none yet)": S1,
                                  "Reasoning so far:": "So the answer is: Chief of Protocol."}))
    config = Path(__file__).resolve().parents[1] / "configs" / "ircot.yaml"
    code = main(["run", str(config), "--llm", f"scripted:{script}", "--no-progress", "--no-cache", "--json",
                 "--set", "data.dataset=jsonl", "--set", f"data.path={questions}", "--set", f"data.corpus={corpus}",
                 "--set", "retrieval.rerank=evidence", "--set", "retrieval.top_k=2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    record = json.loads((tmp_path / "results" / summary["run_id"] / "predictions.jsonl").read_text())
    assert record["prediction"] == "Chief of Protocol" and record["metrics"]["f1"] == 1.0
    assert record["metrics"]["retrieval_recall@2"] == 1.0
    retrieves = [s for s in record["reasoning_chain"] if s["action"] == "retrieve"]
    assert [s["action_input"] for s in retrieves] == [QUESTION, S1]


def test_methods_lists_ircot(capsys):
    assert main(["methods"]) == 0
    assert any(line.startswith("ircot ") for line in capsys.readouterr().out.splitlines())


@pytest.mark.model
async def test_smoke_on_the_embedded_model(embedded_llm):
    from selfrag.data import demo_corpus

    retriever = create_retriever("bm25", demo_corpus())
    method = create_method("ircot", embedded_llm, retriever, {"ircot": {"max_steps": 1, "top_k": 2}}, max_tokens=24)
    start = time.perf_counter()
    r = await method.answer("Which planet is known as the Red Planet?")
    print(f"ircot smoke: {time.perf_counter() - start:.1f}s, {r.num_llm_calls} LLM calls")
    assert isinstance(r.answer, str)
    # Whatever the small model writes: one reasoning call at most, then the answer call unless it stated one.
    assert r.details["steps"] <= 1 and r.num_llm_calls <= 2 and r.num_retrieval_calls <= 2
