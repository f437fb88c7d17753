"""A yes/no joint built from one fact per item (``facts_first: items``). Issue 16: with the one-call
facts prompt the 1.5B model copied the prompt's placeholders ("<name>: Yes <that fact>: Both ...")
or left out the answer line on 12 of the 17 HotpotQA yes/no questions, and said "yes" to 15."""

from __future__ import annotations

import pytest

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.item_facts import first_sentence, parse_items
from selfrag.types import Document, Question, RetrievalResult

QUESTION = Question(id="y", text="Were Scott Derrickson and Ed Wood of the same nationality?")
DOCS = (
    Document(id="1", title="Scott Derrickson", text="Scott Derrickson is an American director."),
    Document(id="2", title="Ed Wood", text="Ed Wood was a Canadian filmmaker."),
)
ITEMS = {"self_rag": {"retrieval_mode": "always", "facts_first": "items"}}
NAMES = "Which people, places or things"
FACT = "Write one short sentence saying what the documents state about"


@pytest.fixture
def retriever(static_retriever_factory):
    return static_retriever_factory(
        RetrievalResult(documents=DOCS, scores=(2.0, 1.0), query="q", retrieval_time_ms=0.0, method="bm25"))


def script(names: str, verdict: str = "No.") -> dict:
    """The item calls first (their prompts also hold the passages), then the notes, then the rest."""
    return {
        NAMES: names,
        f"{FACT} Scott Derrickson": "Scott Derrickson is American. He directed Sinister.",
        f"{FACT} Ed Wood": "Ed Wood was Canadian.",
        "Notes written from the documents": verdict,
        "Do not answer at once": "- Scott Derrickson: American\n- Ed Wood: American\nAnswer: yes",
        "Use the documents below to answer.": "Yes",
        "Judge whether the documents support": "fully supported",
        "Answer: ": "5",
        "[IsRel]": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
    }


@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ("- Scott Derrickson\n- Ed Wood", ["Scott Derrickson", "Ed Wood"]),
        ("1. scott derrickson\n2) Ed Wood.", ["scott derrickson", "Ed Wood"]),  # numbered, other case
        ("Ed Wood\nWood\nScott Derrickson", ["Ed Wood", "Scott Derrickson"]),  # a name inside a kept one
        ("Wood\nEd Wood", ["Ed Wood"]),  # the longer name replaces the shorter
        ("Tim Burton\nEd Wood", ["Ed Wood"]),  # a name not in the question is invented
        ("Were Scott Derrickson and Ed Wood of the same nationality?", []),  # the question copied back
        ("Scott\nDerrickson\nEd\nWood\nnationality", []),  # more than a comparison's few items
        ("", []),
    ],
)
def test_only_names_written_in_the_question_are_items(reply, items):
    assert parse_items(reply, QUESTION.text) == items


def test_a_fact_is_the_first_sentence_of_the_reply():
    assert first_sentence("\nScott Derrickson is American. He directed Sinister.") == "Scott Derrickson is American."
    assert first_sentence("It is in Elko, Nevada, U.S.") == "It is in Elko, Nevada, U.S."
    assert first_sentence("") == ""


async def test_each_item_gets_its_own_fact_call_and_the_notes_decide(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson\n- Ed Wood"))
    response = await create_method("self_rag", llm, retriever, ITEMS).answer(QUESTION)
    assert response.answer == "no"
    actions = [s.action for s in response.reasoning_chain]
    joint = actions[actions.index("list_items"):]
    assert joint[:4] == ["list_items", "item_fact", "item_fact", "answer_from_notes"]
    names = next(c for c in llm.calls if NAMES in c.prompt_text())
    assert "Ed Wood was a Canadian" not in names.prompt_text()  # the question alone
    facts = [c.prompt_text() for c in llm.calls if FACT in c.prompt_text()]
    assert len(facts) == 2 and all("Ed Wood was a Canadian filmmaker." in f for f in facts)
    shared = facts[0][: facts[0].index(FACT)]
    assert facts[1].startswith(shared) and "Ed Wood" not in facts[0][:facts[0].index("<document")]
    notes = next(c.prompt_text() for c in llm.calls if "Notes written from the documents" in c.prompt_text())
    assert "- Scott Derrickson: Scott Derrickson is American.\n- Ed Wood: Ed Wood was Canadian." in notes
    assert "Sinister" not in notes and "<document" not in notes
    assert not any("Do not answer at once" in c.prompt_text() for c in llm.calls)
    read = next(s for s in response.reasoning_chain if s.action == "answer_from_notes")
    assert read.details["facts"] == ["Scott Derrickson: Scott Derrickson is American.", "Ed Wood: Ed Wood was Canadian."]
    # 2 one-passage candidates (answer with critique, utility) + items, 2 facts, notes + support, utility
    print([(s.action, s.llm_calls) for s in response.reasoning_chain])
    assert response.num_llm_calls == 2 * 2 + 4 + 2


async def test_with_no_item_named_the_one_call_facts_prompt_answers(retriever):
    llm = ScriptedBackend(script("Tim Burton"))
    response = await create_method("self_rag", llm, retriever, ITEMS).answer(QUESTION)
    assert response.answer == "yes"  # the one-call prompt's verdict
    assert any("Do not answer at once" in c.prompt_text() for c in llm.calls)
    assert not any(FACT in c.prompt_text() for c in llm.calls)
    step = next(s for s in response.reasoning_chain if s.action == "list_items")
    assert step.details["items"] == [] and "no item named" in step.observation


async def test_facts_that_lead_to_no_answer_fall_back_to_the_plain_prompt(retriever):
    llm = ScriptedBackend(script("Scott Derrickson\nEd Wood", verdict="maybe"))
    response = await create_method("self_rag", llm, retriever, ITEMS).answer(QUESTION)
    assert response.answer == "yes"
    assert sum("Use the documents below to answer." in c.prompt_text() for c in llm.calls) == 1
    assert not any("Do not answer at once" in c.prompt_text() for c in llm.calls)  # the facts were asked once


async def test_other_questions_and_the_default_do_not_split(retriever):
    llm = ScriptedBackend({**script("Ed Wood"), "Use the documents below to answer.": "American"})
    other = Question(id="w", text="What nationality was Ed Wood?")
    response = await create_method("self_rag", llm, retriever, ITEMS).answer(other)
    assert response.answer == "American" and not any(NAMES in c.prompt_text() for c in llm.calls)
    llm = ScriptedBackend(script("Ed Wood"))
    await create_method("self_rag", llm, retriever, {"self_rag": {"retrieval_mode": "always"}}).answer(QUESTION)
    assert not any(NAMES in c.prompt_text() for c in llm.calls)
