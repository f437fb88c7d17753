"""retrieval.links: the lexical evidence that a passage belongs to a question (hand-checked)."""

from __future__ import annotations

import pytest

from selfrag.retrieval.links import evidence, evidence_prior
from selfrag.types import Document

Q = "In which city was the director of Alien born?"
ALIEN = Document(id="a", title="Alien (film)", text="Alien is a 1979 film directed by Ridley Scott.")
SCOTT = Document(id="s", title="Ridley Scott", text="Ridley Scott was born in South Shields.")
NOSTROMO = Document(id="n", title="Nostromo", text="The Nostromo is a fictional spaceship.")


def test_the_three_signals_by_hand():
    got = evidence(Q, [ALIEN, NOSTROMO, SCOTT], [4.0, 2.0, 1.0])
    # Alien: score 4/4, its title (parenthetical dropped) is in the question, no other passage names it.
    assert (got[0].score, got[0].named, got[0].linked) == (1.0, True, False)
    # Nostromo: 2/4, named nowhere.
    assert (got[1].score, got[1].named, got[1].linked) == (0.5, False, False)
    # Ridley Scott: 1/4, not in the question, named in the Alien passage: the second hop.
    assert (got[2].score, got[2].named, got[2].linked) == (0.25, False, True)
    assert evidence_prior(Q, [ALIEN, NOSTROMO, SCOTT], [4.0, 2.0, 1.0]) == pytest.approx(
        [2 / 3, 0.5 / 3, 1.25 / 3])


def test_the_second_hop_outranks_a_better_scored_distractor():
    prior = evidence_prior(Q, [ALIEN, NOSTROMO, SCOTT], [4.0, 2.0, 1.0])
    assert prior[2] > prior[1]


def test_links_come_only_from_the_top_passages():
    # With link_depth 1 only the best-scored passage (Nostromo here) can name another.
    got = evidence(Q, [NOSTROMO, ALIEN, SCOTT], [5.0, 4.0, 1.0], link_depth=1)
    assert got[2].linked is False


def test_without_scores_or_titles():
    untitled = Document(id="u", text="Ridley Scott was born in South Shields.")
    got = evidence(Q, [ALIEN, untitled])
    assert [e.score for e in got] == [1.0, 1.0]
    assert got[1].named is False and got[1].linked is False
    assert evidence(Q, [ALIEN], [0.0])[0].score == 0.0


def test_scores_must_align():
    with pytest.raises(ValueError, match="2 scores for 1 documents"):
        evidence(Q, [ALIEN], [1.0, 2.0])


def test_a_folder_passage_is_named_by_its_heading():
    # Passages cut from a user's files are titled "file § heading": the question names the heading.
    museum = Document(id="m", title="museum.html § Millbrook Heritage Museum", text="It is closed on Mondays.")
    railway = Document(id="r", title="history.md § The railway",
                       text="The old station is now the Millbrook Heritage Museum.")
    got = evidence("On which day is the Millbrook Heritage Museum closed?", [museum, railway], [2.0, 1.8])
    assert (got[0].named, got[0].linked) == (True, True)
    assert (got[1].named, got[1].linked) == (False, False)
    # The file name alone is not a name: "museum" in the question does not name museum.html.
    whole = Document(id="w", title="museum.html", text="Opening hours.")
    assert evidence("When does the museum open?", [whole])[0].named is False
