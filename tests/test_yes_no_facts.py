"""The facts-then-verdict answer for yes/no questions (issue 16: the 1.5B model said "yes" to
16 of 17 HotpotQA comparison questions when asked for the bare word)."""

from __future__ import annotations

import pytest

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.yes_no_facts import read_facts, read_verdict
from selfrag.types import Document, Question, RetrievalResult

QUESTION = Question(id="y", text="Were Scott Derrickson and Ed Wood of the same nationality?")
DOCS = (
    Document(id="1", title="Scott Derrickson", text="Scott Derrickson is an American director."),
    Document(id="2", title="Ed Wood", text="Ed Wood was an American filmmaker."),
    Document(id="3", title="Doctor Strange", text="Doctor Strange is a 2016 film."),
)
FACTS = "- Scott Derrickson: American director\n- Ed Wood: American filmmaker\nBoth are American.\nAnswer: yes"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        (FACTS, "yes"),
        ("- A: a genus\n- B: a family\nAnswer: No", "no"),
        ("Answer: yes\n- on reflection\nAnswer: no", "no"),  # the last verdict counts
        ("answer - **Yes**", "yes"),
        ("- A: a genus\n- B: a genus\nSo yes.", None),  # no Answer line
        ("", None),
    ],
)
def test_the_verdict_is_the_last_answer_line(text, verdict):
    assert read_verdict(text) == verdict


def test_the_fact_lines_are_those_before_the_verdict():
    assert read_facts(FACTS) == ["Scott Derrickson: American director", "Ed Wood: American filmmaker"]
    assert read_facts("no list here\nAnswer: no") == []


@pytest.fixture
def retriever(static_retriever_factory):
    return static_retriever_factory(
        RetrievalResult(documents=DOCS, scores=(3.0, 2.0, 1.0), query="q", retrieval_time_ms=0.0, method="bm25"))


def script(facts_reply: str) -> dict:
    return {
        "Do not answer at once": facts_reply,
        "Use the documents below": "Yes",  # the plain prompt (checked after the facts prompt's key)
        "Judge whether the documents support": "fully supported",
        "Answer: ": "5",
        "[IsRel]": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Scott Derrickson is": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Ed Wood was": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Doctor Strange is": "Yes\n[IsRel] irrelevant",
    }


CFG = {"self_rag": {"retrieval_mode": "always", "yes_no_facts": True}}


async def test_a_yes_no_joint_writes_the_facts_then_reads_the_verdict(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson: American\n- Ed Wood: Canadian\nAnswer: no"))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "no"
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert step.details["verdict"] == "no" and step.details["facts"] == ["Scott Derrickson: American", "Ed Wood: Canadian"]
    assert not any("Use the documents below to answer." in c.prompt_text() for c in llm.calls)
    assert response.num_llm_calls == 2 * 3 + 3  # the facts call takes the plain answer call's place


async def test_without_an_answer_line_the_plain_prompt_answers(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson: American\n- Ed Wood: American"))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "yes" and response.num_llm_calls == 2 * 3 + 4
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert step.details["verdict"] is None and "plain prompt" in step.observation


async def test_off_or_for_other_questions_the_plain_prompt_is_used(retriever):
    llm = ScriptedBackend(script(FACTS))
    cfg = {"self_rag": {"retrieval_mode": "always"}}
    response = await create_method("self_rag", llm, retriever, cfg).answer(QUESTION)
    assert not any(s.action == "generate_after_facts" for s in response.reasoning_chain)
    llm = ScriptedBackend({**script(FACTS), "Use the documents below": "American"})
    other = Question(id="w", text="What nationality was Ed Wood?")
    response = await create_method("self_rag", llm, retriever, CFG).answer(other)
    assert response.answer == "American"
    assert not any(s.action == "generate_after_facts" for s in response.reasoning_chain)
