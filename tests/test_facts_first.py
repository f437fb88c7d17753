"""The facts-then-answer joint (``self_rag.facts_first``). Issue 16: the 1.5B model said "yes" to
16 of 17 HotpotQA comparison questions when asked for the bare word, and answered two-hop
questions with the bridge entity ("Peter Schmeichel" for what his son's father was voted)."""

from __future__ import annotations

import pytest

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.core.trace import Run
from selfrag.methods.steps.facts_first import read_facts, read_final, read_verdict
from selfrag.methods.steps.joint_answer import joint_answer
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


def script(facts_reply: str, from_notes: str = "") -> dict:
    return {
        "Notes written from the documents": from_notes,  # the short call that reads the notes
        "Do not answer at once": facts_reply,  # the yes/no facts prompt
        "Think it through before answering": facts_reply,  # the facts prompt of any other question
        "Use the documents below": "Yes",  # the plain prompt (checked after the facts prompt's key)
        "Judge whether the documents support": "fully supported",
        "Answer: ": "5",
        "[IsRel]": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Scott Derrickson is": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Ed Wood was": "Yes\n[IsRel] relevant\n[IsSup] fully supported",
        "Doctor Strange is": "Yes\n[IsRel] irrelevant",
    }


# The joint answers alone (its one-passage candidates wait for a joint without an answer); no
# confidence calls, so the counts below are the facts path's own.
# yes/no: facts first, always; the prompted critic (the script answers its calls).
CFG = {"self_rag": {"retrieval_mode": "always", "confidence": "off", "critic": "prompted"}}


async def test_a_yes_no_joint_writes_the_facts_then_reads_the_verdict(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson: American\n- Ed Wood: Canadian\nAnswer: no"))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "no"
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert step.details["final"] == "no" and step.details["facts"] == ["Scott Derrickson: American", "Ed Wood: Canadian"]
    assert not any("Use the documents below to answer." in c.prompt_text() for c in llm.calls)
    assert response.num_llm_calls == 1  # the facts call takes the plain answer call's place


async def test_without_an_answer_line_a_short_call_reads_the_notes(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson: American\n- Ed Wood: American", from_notes="Yes."))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "yes" and response.num_llm_calls == 2  # the facts, then the notes
    notes = next(c for c in llm.calls if "Notes written from the documents" in c.prompt_text())
    assert "- Ed Wood: American" in notes.prompt_text() and "Ed Wood was an American" not in notes.prompt_text()
    assert "Reply with only yes or no" in notes.prompt_text()  # the question's answer format
    assert not any("Use the documents below to answer." in c.prompt_text() for c in llm.calls)
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert step.details["final"] is None and "read from the notes" in step.observation


@pytest.mark.parametrize(("facts", "from_notes", "calls"), [("", "", 2), ("- notes", "maybe", 3)])
async def test_with_no_notes_or_no_answer_from_them_the_plain_prompt_answers(retriever, facts, from_notes, calls):
    llm = ScriptedBackend(script(facts, from_notes=from_notes))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "yes" and response.num_llm_calls == calls
    assert sum("Use the documents below to answer." in c.prompt_text() for c in llm.calls) == 1


async def test_other_questions_use_the_plain_prompt(retriever):
    llm = ScriptedBackend(script(FACTS))
    response = await create_method("self_rag", llm, retriever, {"self_rag": {"retrieval_mode": "always",
                                                                              "critic": "prompted"}}).answer(QUESTION)
    assert any(s.action == "generate_after_facts" for s in response.reasoning_chain)  # yes/no: facts first
    llm = ScriptedBackend({**script(FACTS), "Use the documents below": "American"})
    other = Question(id="w", text="What nationality was Ed Wood?")
    response = await create_method("self_rag", llm, retriever, CFG).answer(other)
    assert response.answer == "American"
    assert not any(s.action == "generate_after_facts" for s in response.reasoning_chain)


@pytest.mark.parametrize(
    ("text", "final"),
    [
        ("- Kasper's father is Peter Schmeichel\n- Peter was voted World's Best Goalkeeper\n"
         "Answer: World's Best Goalkeeper", "World's Best Goalkeeper"),
        ("- a fact\n**Answer:** **Chief of Protocol**.", "Chief of Protocol"),
        ("- a fact\nFinal answer - 1986 to 2013", "1986 to 2013"),
        ("Answer: Kansas\n- on reflection, the county\nAnswer: 9,984", "9,984"),  # the last one counts
        ("- a fact\nAnswer: 9,984\nAnswer:", "9,984"),  # an empty last line is skipped
        ("It was Kwame Kilpatrick. Answer: Kwame Kilpatrick", "Kwame Kilpatrick"),  # inline
        ("- a fact\nThe answer is Mumbai.", None),  # no "Answer:" label
        ("", None),
    ],
)
def test_the_final_answer_is_the_last_answer_line(text, final):
    assert read_final(text) == final


BRIDGE = Question(id="b", text="What was the father of Kasper Schmeichel voted to be by the IFFHS in 1992?")


async def facts_for_all(llm, retriever, question) -> tuple[str, Run]:
    """A joint answer written facts first for every question (``facts_first: all``, the setting of
    self_corrective and self_rag_segment)."""
    run = Run(llm, retriever, {"max_tokens": 256})
    docs = list((await retriever.retrieve(question.text, 3)).documents)
    _, _, answer = await joint_answer(run, question, docs, 4000, name="3 passages", facts_first="all")
    return answer, run


async def test_a_two_hop_joint_writes_the_hops_then_the_answer(retriever):
    facts = ("- Kasper Schmeichel's father is Peter Schmeichel\n"
             "- Peter Schmeichel was voted the World's Best Goalkeeper in 1992\nAnswer: World's Best Goalkeeper")
    llm = ScriptedBackend({**script(facts), "Use the documents below to answer.": "Peter Schmeichel"})
    answer, run = await facts_for_all(llm, retriever, BRIDGE)
    assert answer == "World's Best Goalkeeper"
    step = next(s for s in run.records if s.action == "generate_after_facts")
    assert step.details["final"] == "World's Best Goalkeeper" and len(step.details["facts"]) == 2
    assert any("may take two steps" in c.prompt_text() for c in llm.calls)
    assert not any("Use the documents below to answer." in c.prompt_text() for c in llm.calls)
    assert len(llm.calls) == 1


async def test_a_two_hop_reply_without_an_answer_line_is_read_by_the_short_call(retriever):
    notes = "Kasper's father is Peter Schmeichel, who was voted World's Best Goalkeeper in 1992."
    llm = ScriptedBackend(script(notes, from_notes="World's Best Goalkeeper"))
    answer, run = await facts_for_all(llm, retriever, BRIDGE)
    assert answer == "World's Best Goalkeeper" and len(llm.calls) == 2
    read = next(s for s in run.records if s.action == "answer_from_notes")
    assert read.details["final"] == "World's Best Goalkeeper"
    assert any("Notes written" in c.prompt_text() and "a name, number, date or phrase" in c.prompt_text()
               for c in llm.calls)


async def test_all_also_covers_yes_no_questions(retriever):
    llm = ScriptedBackend(script("- Scott Derrickson: American\n- Ed Wood: Canadian\nAnswer: no"))
    answer, _ = await facts_for_all(llm, retriever, QUESTION)
    assert answer == "no"
    assert any("Then compare those facts" in c.prompt_text() for c in llm.calls)


async def test_the_separate_mode_writes_its_yes_no_joint_after_the_facts_too(retriever):
    """Its joint used to be one more plain-prompt candidate, so the facts never reached it: the 0.5B
    model's JSON critic gave vanilla_rag's answer to all 17 yes/no questions."""
    llm = ScriptedBackend({
        "You judge whether a document is relevant": '{"relevance": "relevant"}',
        "You judge how well a response is supported": '{"support": "fully_supported"}',
        "You rate how useful a response is": '{"utility": 4}',
        "Do not answer at once": "- Scott Derrickson: American\n- Ed Wood: Canadian\nAnswer: no",
        "Use the documents below": "Yes",
    })
    # selection: critique judges the joint like a candidate (ties go to the joint, listed first)
    cfg = {"self_rag": {"retrieval_mode": "always", "critic": "json", "selection": "critique"}}
    response = await create_method("self_rag", llm, retriever, cfg).answer(QUESTION)
    assert response.answer == "no"
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert step.details["passage_ids"] == ["1", "2", "3"]
    joint = next(c for c in response.details["all_candidates"] if c["joint"])
    assert (joint["text"], joint["support"], joint["utility"]) == ("no", "fully_supported", 4)


async def test_a_bare_yes_no_verdict_with_no_facts_before_it_falls_back_to_the_plain_prompt(retriever):
    """The 0.5B model answered the facts prompt with only "Answer: no" on most questions (no facts compared)."""
    llm = ScriptedBackend(script("Answer: no"))
    response = await create_method("self_rag", llm, retriever, CFG).answer(QUESTION)
    assert response.answer == "yes"  # the plain prompt's answer, not the bare verdict
    assert sum("Use the documents below to answer." in c.prompt_text() for c in llm.calls) == 1
    assert not any("Notes written from the documents" in c.prompt_text() for c in llm.calls)
    step = next(s for s in response.reasoning_chain if s.action == "generate_after_facts")
    assert "bare verdict (no)" in step.observation


def test_the_yes_no_prompt_names_the_line_format_without_placeholders():
    """Given "- <name>: <that fact>", the 1.5B model copied the placeholders into its replies."""
    from selfrag.prompts import load_prompt

    text = load_prompt("self_rag_yes_no_facts")
    assert "<" not in text.replace("{context}", "").replace("{question}", "")
    assert '"Answer: yes" or "Answer: no"' in text and "{context}" in text and "{question}" in text
