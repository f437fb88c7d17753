"""Which read passages an answer cites, and where its markers go (hand-checked cases)."""

from __future__ import annotations

from selfrag.reflection.citing import sentence_of_each, supporting, with_markers
from selfrag.types import Document

ALIEN = Document(id="a", title="Alien (film)", text="Alien is a 1979 film directed by Ridley Scott.")
SCOTT = Document(id="s", title="Ridley Scott", text="Ridley Scott was born in South Shields, England.")
MILK = Document(id="m", title="Steamed milk", text="Steam milk to 60 degrees.")
COLD = Document(id="c", title="notes/cold_brew.md § Storage", text="Cold brew keeps two weeks in the fridge.")


def test_the_passage_holding_the_answer_and_the_one_bridging_to_it_are_cited():
    question = "In which town was the director of Alien born?"
    assert supporting(question, "South Shields", [ALIEN, MILK, SCOTT]) == [0, 2]
    # Without the bridge: the passage named in the question is still cited; the milk never is.
    assert supporting(question, "South Shields", [SCOTT, MILK]) == [0]
    assert supporting(question, "Leeds", [MILK, ALIEN]) == [1]  # the answer is nowhere: the named passage


def test_an_answer_found_nowhere_cites_the_first_passage_read():
    assert supporting("how long does cold brew keep?", "a month", [COLD, MILK]) == [0]
    assert supporting("q", "x", []) == []


def test_yes_no_answers_cite_the_passages_the_question_names():
    question = "Were Alien and Ridley Scott both from England?"
    assert supporting(question, "yes", [MILK, ALIEN, SCOTT]) == [1, 2]


def test_markers_go_after_the_sentence_each_passage_supports():
    answer = "Cold brew keeps two weeks in the fridge. Milk is steamed to 60 degrees."
    assert sentence_of_each(answer, [COLD, MILK]) == [0, 1]
    assert with_markers(answer, [COLD, MILK]) == (
        "Cold brew keeps two weeks in the fridge. [1] Milk is steamed to 60 degrees. [2]")
    assert with_markers("two weeks", [COLD]) == "two weeks [1]"
    assert with_markers("two weeks", []) == "two weeks"
