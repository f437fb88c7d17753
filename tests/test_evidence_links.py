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
