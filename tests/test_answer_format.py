"""Answer prompts name the reply a question wants: short answer, yes/no/maybe, or an option letter."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.core.answer_format import (
    SHORT_ANSWER_FORMAT,
    answer_format,
    answer_kind,
    answer_system,
)
from selfrag.types import Question

FREE = Question(id="f", text="What is the capital of France?")
YES_NO = Question(id="y", text="Is Paris the capital of France?\nReply yes, no or maybe.",
                  choices=("yes", "no", "maybe"))
CHOICE = Question(id="c", text="Which city is the capital of France?\n\nA. Lyon\nB. Paris\nC. Nice\nD. Lille",
                  choices=("Lyon", "Paris", "Nice", "Lille"))
SCRIPT = Path(__file__).parent / "fixtures" / "full_path_script.json"


def test_free_text_questions_keep_the_short_answer_instruction_byte_for_byte():
    assert answer_format(FREE) == SHORT_ANSWER_FORMAT
    assert answer_system(FREE) == (
        "You answer questions. Reply with only the short answer: a name, number, date or phrase, "
        "never a full sentence.\n"
    )
    assert answer_kind(FREE) == "a short answer (a name, number, date or phrase)"


def test_choice_questions_name_their_answers():
    assert answer_format(YES_NO) == "Reply with only yes, no or maybe."
    assert answer_kind(YES_NO) == "the answer (yes, no or maybe)"
    assert answer_format(CHOICE) == "Reply with only the letter of the correct option (A, B, C or D)."
    assert answer_kind(CHOICE) == "the letter of the correct option (A, B, C or D)"
    yes_no = Question(id="b", text="Is it?", choices=("Yes", "No"))
    assert answer_format(yes_no) == "Reply with only yes or no."


def prompts(llm: ScriptedBackend) -> list[str]:
    return [r.prompt_text() for r in llm.calls]


@pytest.mark.parametrize(
    "method, config",
    [
        ("no_retrieval", {}),
        ("vanilla_rag", {}),
        ("self_rag", {"self_rag": {"critic": "prompted"}}),
        ("self_rag", {"self_rag": {"critic": "json"}}),
        ("self_rag_critic", {}),
        ("self_rag_segment", {}),
        ("self_corrective", {}),
        ("react_rag", {}),
    ],
)
async def test_no_answer_prompt_asks_a_yes_no_question_for_a_name_or_phrase(method, config, france_retriever):
    llm = ScriptedBackend.from_file(SCRIPT)
    await create_method(method, llm, france_retriever, config).answer(YES_NO)
    sent = prompts(llm)
    assert not any("name, number, date or phrase" in p for p in sent), method
    assert any("yes, no or maybe" in p.replace("Reply yes, no or maybe.", "") for p in sent), method


async def test_free_text_prompts_are_unchanged(france_retriever):
    llm = ScriptedBackend.from_file(SCRIPT)
    await create_method("self_rag", llm, france_retriever, {"self_rag": {"critic": "prompted", "selection": "critique"}}).answer(FREE)
    candidate = next(p for p in prompts(llm) if "[IsRel]" in p)
    assert "First write a short answer (a name, number, date or phrase). Then add two lines:" in candidate


def test_react_and_critic_prompts_keep_their_free_text_wording():
    from selfrag.methods.core.answer_format import finish_answer
    from selfrag.prompts import load_prompt, render

    react = render(load_prompt("react_system"), finish_answer=finish_answer(FREE))
    assert "The answer inside finish[...] is short: a name, number, date or phrase." in react
    assert "is only yes, no or maybe." in render(load_prompt("react_system"), finish_answer=finish_answer(YES_NO))
    critic = render(load_prompt("critic_answer"), question="q", passage="p", answer_format=answer_format(FREE))
    assert critic.endswith("Reply with only the short answer: a name, number, date or phrase, never a full sentence.\n")
