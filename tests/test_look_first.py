"""The retrieval decision looks at the documents first; an answer that used none says so everywhere;
the calibration of the question-only decision is kept on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.llm.scripted import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.critique import calibration_store
from selfrag.methods.critique.decision import ANCHORS_RETRIEVE, ANCHORS_SKIP
from selfrag.methods.critique.look_first import coverage
from selfrag.retrieval import BM25Retriever
from selfrag.serve.openai_format import completion
from selfrag.serve.payload import answer_payload
from selfrag.types import Document

from .helpers.documents import write_folder

NOTES = {
    "cold_brew.md": "# Cold brew\n\nCold brew concentrate keeps for up to two weeks in the fridge.\n",
    "espresso.md": "# Espresso\n\nBrew espresso with water at 93 degrees.\n",
    "descaling.md": "# Descaling\n\nMaria descaled the office machine on 3 March.\n",
}
COLD_BREW = "how long does cold brew keep in the fridge?"


@pytest.fixture
def notes(tmp_path) -> Path:
    return write_folder(tmp_path / "notes", NOTES)


def retriever(notes: Path) -> BM25Retriever:
    from selfrag.retrieval import load_corpus

    return BM25Retriever(load_corpus(notes))


def test_coverage_counts_the_questions_stemmed_content_words():
    doc = Document(id="c", title="cold_brew.md § Cold brew", text="Cold brew keeps two weeks in the fridge.")
    assert coverage(COLD_BREW, doc) == 0.8  # long, cold, brew, keep, fridge: all but "long"
    assert coverage("what is 7 plus 6?", doc) == 0.0
    assert coverage("how long does coffee keep at room temperature?", doc) == 0.2  # keep, of 5 words


async def test_a_lower_case_question_over_ones_notes_reads_them_without_a_decision_call(notes):
    llm = ScriptedBackend({"two weeks": "up to two weeks"})
    method = create_method("self_rag", llm, retriever(notes), {"self_rag": {"confidence": "off"}})
    response = await method.answer(COLD_BREW)
    assert response.answer == "up to two weeks"
    assert response.num_retrieval_calls == 1  # looked once, not retrieved again
    decision = next(s for s in response.reasoning_chain if s.action == "retrieval_decision")
    assert decision.llm_calls == 0 and decision.details["decision_source"] == "coverage"
    assert [d.id for d in response.citations] == ["cold_brew"]
    assert "without_documents" not in response.details


async def test_nothing_found_answers_without_the_documents_and_says_why(notes):
    llm = ScriptedBackend({"7 plus 6": "13"})
    method = create_method("self_rag", llm, retriever(notes), {"self_rag": {"confidence": "off"}})
    response = await method.answer("What is 7 plus 6?")
    assert response.answer == "13" and response.read == () and response.citations == ()
    assert response.details["without_documents"] == "none of the documents shares a word with the question"
    data = answer_payload(response)
    assert data["used_documents"] is False and data["view"]["without_documents"].startswith("none of the")
    reply = completion(data, cid="c", created=0, model="self_rag")["choices"][0]["message"]["content"]
    # The reply says it as `selfrag ask` prints it: the note on a line of its own, then the answer.
    assert reply == "(answered without your documents: none of the documents shares a word with the question)\n13"


async def test_a_partial_match_asks_the_model_with_the_best_passage(notes):
    llm = ScriptedBackend({"matches the question best": {"text": "no", "top_logprobs": {"no": -0.1, "yes": -2.5}},
                           "room temperature": "a day"})
    method = create_method("self_rag", llm, retriever(notes), {"self_rag": {"confidence": "off"}})
    response = await method.answer("How long does coffee keep at room temperature?")
    ask = llm.calls[0]
    assert "Cold brew concentrate keeps" in ask.prompt_text() and ask.top_logprobs == 20
    assert response.details["without_documents"].startswith("passage 'cold_brew.md § Cold brew' holds")
    assert response.answer == "a day"


def test_ask_says_so_on_its_first_line(tmp_path, notes, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"7 plus 6": "13"}))
    code = main(["ask", "What is 7 plus 6?", "--docs", str(notes), "--method", "self_rag",
                 "--set", "self_rag.confidence=off", "--llm", f"scripted:{script}"])
    out = capsys.readouterr().out
    assert code == 0
    first, second = out.splitlines()[:2]
    assert first == "(answered without your documents: none of the documents shares a word with the question)"
    assert second == "13"
    assert "Retrieved, not read:" in out


def test_json_says_whether_the_answer_used_documents(tmp_path, notes, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"two weeks": "two weeks"}))
    code = main(["ask", COLD_BREW, "--docs", str(notes), "--method", "self_rag", "--set", "self_rag.confidence=off",
                 "--llm", f"scripted:{script}", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["used_documents"] is True and data["without_documents"] is None
    assert data["read"][0]["id"] == "cold_brew" and data["answer_with_citations"] == "two weeks [1]"


# -- the calibration of the question-only decision, kept on disk -------------------------------------


def calibrating_script(path: Path) -> str:
    """P(yes) 0.9 for questions that name something, 0.1 for the rest; the answer "Maria"."""
    replies: dict = {"Maria descaled": "Maria"}  # the answer prompt (it holds the question too)
    replies.update({a: {"text": "yes", "top_logprobs": {"yes": -0.1, "no": -2.3}} for a in ANCHORS_RETRIEVE})
    replies.update({a: {"text": "no", "top_logprobs": {"yes": -2.3, "no": -0.1}} for a in ANCHORS_SKIP})
    replies["Who descaled"] = {"text": "yes", "top_logprobs": {"yes": -0.1, "no": -2.3}}
    path.write_text(json.dumps(replies))
    return f"scripted:{path}"


def calibration_calls(out: str) -> int:
    return sum(1 for s in json.loads(out)["reasoning_chain"] if s["action"] == "calibrate_decision" and s["llm_calls"])


def test_a_second_ask_makes_no_calibration_call(tmp_path, notes, capsys, monkeypatch):
    store = tmp_path / "kept" / "calibration.json"
    monkeypatch.setenv("SELFRAG_CALIBRATION_CACHE", str(store))
    llm = calibrating_script(tmp_path / "s.json")
    argv = ["ask", "Who descaled the office machine?", "--docs", str(notes), "--method", "self_rag",
            "--set", "self_rag.retrieval_mode=adaptive", "--set", "self_rag.confidence=off", "--llm", llm, "--json"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert calibration_calls(first) == 12 and store.is_file()
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert calibration_calls(second) == 0
    kept = next(s for s in json.loads(second)["reasoning_chain"] if s["action"] == "calibrate_decision")
    assert kept["details"]["kept"] is True and str(store) in kept["action_input"]
    assert json.loads(second)["answer"] == "Maria"
    # Another prompt is another calibration.
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "self_rag.txt").write_text("Look it up for {question}? yes or no")
    monkeypatch.setenv("SELFRAG_PROMPT_DIR", str(tmp_path / "prompts"))
    assert main(argv) == 0
    assert calibration_calls(capsys.readouterr().out) == 12


def test_the_store_can_be_turned_off_and_survives_a_damaged_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_CALIBRATION_CACHE", "off")
    assert calibration_store.store_path() is None and calibration_store.save("k", {"threshold": 0.5}) is None
    damaged = tmp_path / "calibration.json"
    damaged.write_text("{not json")
    monkeypatch.setenv("SELFRAG_CALIBRATION_CACHE", str(damaged))
    assert calibration_store.load("k") is None
    assert calibration_store.save("k", {"threshold": 0.5}) == damaged
    assert calibration_store.load("k") == {"threshold": 0.5}


def test_a_method_that_never_retrieves_says_so(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["Paris"]))
    assert main(["ask", "What is the capital of France?", "--method", "no_retrieval", "--llm", f"scripted:{script}",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["used_documents"] is False
    assert data["without_documents"] == "no_retrieval answers from the model alone"
