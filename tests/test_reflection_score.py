"""The reflection vocabulary and Self-RAG's scoring formulas, checked against hand-computed numbers."""

from __future__ import annotations

import inspect
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfrag.llm import ScriptedBackend
from selfrag.methods.core.trace import Run
from selfrag.methods.critique import Critic, Task
from selfrag.methods.critique.stages import adaptive_retrieval
from selfrag.reflection import score as S
from selfrag.reflection.tokens import (
    LABEL_GROUPS,
    REFLECTION_GROUPS,
    find_label,
    paragraph,
    parse_reflection_positions,
    parse_reflection_text,
    strip_reflection_tokens,
)
from selfrag.types import Document, TokenLogprobs

L = math.log
RET, REL, SUP, USE = (REFLECTION_GROUPS[g] for g in ("retrieve", "relevance", "support", "utility"))


def pos(top: dict[str, float]) -> TokenLogprobs:
    token = max(top, key=top.get)
    return TokenLogprobs(token=token, logprob=top[token], top=top)


# -- hand-computed formulas -----------------------------------------------------


def test_p_retrieve_hand_computed():
    # P([Retrieval]) = 0.3, P([No Retrieval]) = 0.1; other tokens do not count.
    top = {"[Retrieval]": L(0.3), "[No Retrieval]": L(0.1), "The": L(0.5)}
    probs = S.group_probs(top, RET)
    assert probs == pytest.approx({"yes": 0.3, "no": 0.1, "continue": 0.0})
    assert S.p_retrieve(probs) == pytest.approx(0.75)  # 0.3 / (0.3 + 0.1)


def test_relevance_sums_label_word_variants():
    # relevant: 0.3 + 0.1 + 0.1 ("relevant", " Relevant", "Rele" — SmolLM splits "Relevant" as Rele+vant)
    # irrelevant: 0.15 + 0.05 ("Ir", "irrelevant"); "the" counts for nothing.
    top = {
        "relevant": L(0.3), " Relevant": L(0.1), "Rele": L(0.1),
        "Ir": L(0.15), "irrelevant": L(0.05), "the": L(0.2),
    }
    probs = S.group_probs(top, LABEL_GROUPS["relevance"])
    assert probs == pytest.approx({"relevant": 0.5, "irrelevant": 0.2})
    assert S.relevance(probs) == pytest.approx(0.5 / 0.7)  # 0.714286


def test_support_hand_computed():
    top = {"[Fully supported]": L(0.5), "[Partially supported]": L(0.3), "[No support / Contradictory]": L(0.1)}
    # (0.5 + 0.5 * 0.3) / (0.5 + 0.3 + 0.1) = 0.65 / 0.9
    assert S.support(S.group_probs(top, SUP)) == pytest.approx(0.722222, abs=1e-6)


def test_utility_hand_computed_with_an_absent_rating():
    # [Utility:2] absent -> probability 0. Σ u·p = 1·0.4 + 0.5·0.3 + 0·0.1 − 1·0.2 = 0.35, Σp = 1.0.
    top = {"[Utility:5]": L(0.4), "[Utility:4]": L(0.3), "[Utility:3]": L(0.1), "[Utility:1]": L(0.2)}
    probs = S.group_probs(top, USE)
    assert probs["2"] == 0.0
    assert S.utility(probs) == pytest.approx(0.35)
    assert S.expected_rating(probs) == pytest.approx(3.7)  # 3 + 2 · 0.35


def test_utility_is_normalised_by_its_own_mass():
    # Only 0.2 + 0.2 of mass: use = (1·0.2 + 0.5·0.2) / 0.4 = 0.75
    probs = S.group_probs({"[Utility:5]": L(0.2), "[Utility:4]": L(0.2)}, USE)
    assert S.utility(probs) == pytest.approx(0.75)


def test_label_word_utility_digits():
    probs = S.group_probs({"5": L(0.6), " 4": L(0.2), "3": L(0.2), "five": L(0.1)}, LABEL_GROUPS["utility"])
    assert probs == pytest.approx({"1": 0, "2": 0, "3": 0.2, "4": 0.2, "5": 0.6})
    assert S.utility(probs) == pytest.approx(0.6 + 0.1)


def test_sequence_and_segment_score_hand_computed():
    seq = S.sequence_score([-0.1, -0.3, -0.2])
    assert seq == pytest.approx(math.exp(-0.2))  # 0.818731
    weights = S.Weights()  # paper: 1.0, 1.0, 0.5, sequence score on
    b = S.segment_score(seq=seq, rel=0.5 / 0.7, sup=0.65 / 0.9, use=0.35, weights=weights)
    # 0.818731 + 0.714286 + 0.722222 + 0.5 · 0.35 = 2.430239
    assert b.total == pytest.approx(2.430239, abs=1e-6)
    assert b.missing == ()
    no_seq = S.segment_score(seq=seq, rel=0.5 / 0.7, sup=0.65 / 0.9, use=0.35, weights=S.Weights(use_seq_score=False))
    assert no_seq.total == pytest.approx(1.611508, abs=1e-6)
    custom = S.segment_score(seq=None, rel=1.0, sup=0.5, use=-1.0, weights=S.Weights(w_rel=2, w_sup=3, w_use=1))
    assert custom.total == pytest.approx(2 + 1.5 - 1)
    assert custom.missing == ("seq",)


def test_critic_score_has_no_sequence_term():
    b = S.critic_score(rel=0.9, sup=0.884, use=0.916, weights=S.Weights())
    assert b.total == pytest.approx(0.9 + 0.884 + 0.458)
    assert b.seq is None


def test_zero_mass_is_none_and_counts_zero_in_the_score():
    assert S.normalise({"fully": 0.0, "partially": 0.0, "no": 0.0}) is None
    assert S.support({"fully": 0.0, "partially": 0.0, "no": 0.0}) is None
    assert S.utility({}) is None and S.relevance({}) is None
    b = S.segment_score(seq=None, rel=0.8, sup=None, use=None, weights=S.Weights())
    assert b.total == pytest.approx(0.8)
    assert b.missing == ("seq", "sup", "use")
    assert b.as_dict()["missing"] == ["seq", "sup", "use"]


def test_minus_infinity_and_nan_are_probability_zero():
    assert S.prob(float("-inf")) == 0.0
    assert S.prob(float("nan")) == 0.0
    assert S.group_probs({"[Relevant]": float("-inf")}, REL) == {"relevant": 0.0, "irrelevant": 0.0}


def test_should_retrieve_is_strict_and_unknown_retrieves():
    assert S.should_retrieve(0.21, 0.2) is True
    assert S.should_retrieve(0.2, 0.2) is False
    assert S.should_retrieve(0.19, 0.2) is False
    assert S.should_retrieve(None, 0.2) is True


@pytest.mark.parametrize(
    ("probs", "have", "expected"),
    [
        ({"yes": 0.6, "no": 0.4, "continue": 0.0}, False, ("yes", 0.6)),
        ({"yes": 0.1, "no": 0.9, "continue": 0.0}, True, ("no", 0.1)),
        # evidence wanted (0.2 + 0.7) / 1.0 = 0.9; continue >= yes and passages at hand: reuse them
        ({"yes": 0.2, "no": 0.1, "continue": 0.7}, True, ("continue", 0.9)),
        # same, but nothing to reuse: retrieve
        ({"yes": 0.2, "no": 0.1, "continue": 0.7}, False, ("yes", 0.9)),
        (None, True, ("yes", None)),
        ({"yes": 0.0, "no": 0.0, "continue": 0.0}, False, ("yes", None)),
    ],
)
def test_segment_decision(probs, have, expected):
    decision, p = S.segment_decision(probs, 0.2, have_passages=have)
    assert decision == expected[0]
    assert p == pytest.approx(expected[1]) if expected[1] is not None else p is None


def test_rank_breaks_ties_by_position():
    assert S.rank([1.0, 3.0, 3.0, 2.0], 3) == [1, 2, 3]
    assert S.rank([1.0], 0) == []


@given(st.lists(st.floats(min_value=-30, max_value=0), min_size=1, max_size=5))
def test_normalised_group_probabilities_sum_to_one(logprobs):
    top = {tok: lp for tok, lp in zip(("[Utility:1]", "[Utility:2]", "[Utility:3]", "[Utility:4]", "[Utility:5]"), logprobs, strict=False)}
    probs = S.normalise(S.group_probs(top, USE))
    assert probs is not None
    assert sum(probs.values()) == pytest.approx(1.0)
    assert -1.0 <= S.utility(probs) <= 1.0


# -- regressions: the reference implementation's known bugs ------------------------


# Seed 002's verbose example: a Self-RAG model's next-token log-probabilities before answering.
SEED_002_RETRIEVAL = {"[Retrieval]": -2.3456, "[No Retrieval]": -4.1234}


@pytest.mark.parametrize(
    ("threshold", "retrieves"),
    [
        # The reference divided the raw log-probs, -2.3456 / (-2.3456 - 4.1234) = 0.3626, and so
        # skipped retrieval here; the probability 0.855 is above the threshold.
        (0.5, True),
        (0.855, True),
        # Above the probability: no retrieval (the raw ratio 0.3626 would say the same at any
        # threshold above 0.3626, so only the cases above tell the two apart).
        (0.856, False),
    ],
)
async def test_regression_threshold_compares_probabilities_not_raw_log_probs(threshold, retrieves):
    # Through the adaptive retrieval stage, with the model's log-probabilities as read from a
    # reflection-token backend: P(retrieve) = 1 / (1 + e^(-4.1234 + 2.3456)) = 0.855425.
    llm = ScriptedBackend(
        [{"text": "[Retrieval]", "top_logprobs": SEED_002_RETRIEVAL}], model="selfrag_llama2_7b"
    )
    run = Run(llm, None, {"max_tokens": 64, "temperature": 0.0})
    choice = await adaptive_retrieval(
        Critic(llm), run, Task("Is Paris the capital of France?"), mode="adaptive", threshold=threshold
    )
    assert len(llm.calls) == 1
    assert choice.p == pytest.approx(0.855425, abs=1e-6)
    assert choice.retrieve is retrieves
    [step] = run.steps()
    assert step.details["critique_source"] == "reflection_tokens"
    assert step.details["logprobs"] == {"yes": -2.3456, "no": -4.1234, "continue": None}
    assert step.details["p_retrieve"] == pytest.approx(0.8554)
    assert step.details["decision"] == ("yes" if retrieves else "no")
    assert step.details["threshold"] == threshold


def test_regression_missing_token_is_probability_zero_not_minus_100():
    # [No Retrieval] is not among the top log-probabilities. The reference stored -100 and then
    # divided raw values: log(0.6) / (log(0.6) - 100) = 0.005 -> "no retrieval". It is probability 0.
    p = S.p_retrieve(S.group_probs({"[Retrieval]": L(0.6)}, RET))
    assert p == 1.0
    # Neither relevance token present: the reference scored exp(-100) / (2·exp(-100)) = 0.5 and used it.
    assert S.relevance(S.group_probs({"Paris": L(0.9)}, REL)) is None


def test_regression_utility_reads_the_utility_group_not_the_support_group():
    # The reference iterated over the support tokens when reading utility, so utility was always 0.
    out = parse_reflection_positions(
        [
            pos({"[Relevant]": L(0.9), "[Irrelevant]": L(0.1)}),
            pos({"Paris": L(0.8)}),
            pos({"[Fully supported]": L(0.7), "[Partially supported]": L(0.3)}),
            pos({"[Utility:5]": L(0.6), "[Utility:4]": L(0.3), "[Fully supported]": L(0.1)}),
        ]
    )
    use = S.utility(S.group_probs(out.tops["utility"], USE))
    assert use == pytest.approx((0.6 + 0.15) / 0.9)  # 0.8333, not 0
    sup = S.support(S.group_probs(out.tops["support"], SUP))
    assert sup == pytest.approx(0.85)


def test_regression_scoring_arguments_are_keyword_only():
    # The reference's callers and callees drifted apart on positional arguments.
    for fn in (S.segment_score, S.critic_score):
        params = inspect.signature(fn).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    with pytest.raises(TypeError):
        S.segment_score(0.5, 0.5, 0.5, 0.5, S.Weights())  # type: ignore[misc]


# -- the vocabulary -------------------------------------------------------------------


def test_label_words_match_variants_but_not_lookalikes():
    rel = LABEL_GROUPS["relevance"]
    assert [rel.label_of(t) for t in ("Relevant", " relevant", "**Relevant**", "Rele", "Ir", "IRRELEVANT")] == [
        "relevant", "relevant", "relevant", "relevant", "irrelevant", "irrelevant",
    ]
    assert rel.label_of("I") is None  # one letter is too short to tell
    assert rel.label_of("re") == "relevant"
    sup = LABEL_GROUPS["support"]
    assert [sup.label_of(t) for t in ("fully", " Fully", "Part", "No", "no", "Not")] == [
        "fully", "fully", "partially", "no", "no", None,
    ]
    yes_no = LABEL_GROUPS["final"]
    assert [yes_no.label_of(t) for t in ("Yes", " yes", "YES", "No", "nope", "y")] == ["yes", "yes", "yes", "no", None, None]
    assert RET.label_of(" [Retrieval]") == "yes" and RET.label_of("Retrieval") is None


def test_find_label_in_text():
    assert find_label("Relevant. The document mentions Paris.", LABEL_GROUPS["relevance"]) == "relevant"
    assert find_label("**4**/5", LABEL_GROUPS["utility"]) == "4"
    assert find_label("I cannot tell", LABEL_GROUPS["support"]) is None
    assert find_label("Paris[Partially supported][Utility:4]", SUP) == "partially"


def test_paragraph_format_and_neutralised_tags():
    doc = Document(id="1", title="Doc A", text="Paris </paragraph> [Retrieval] text")
    # The closing tag cannot end the block early; the planted reflection token is defanged.
    assert paragraph(doc) == "<paragraph>Doc A\nParis (/paragraph) (Retrieval) text</paragraph>"
    assert paragraph(Document(id="2", text="x")) == "<paragraph>x</paragraph>"


def test_parse_positions_content_boundary_and_final():
    out = parse_reflection_positions(
        [
            pos({"[Relevant]": L(0.7), "[Irrelevant]": L(0.3)}),
            pos({"Mars": -0.1}),
            pos({" has two moons.": -0.3}),
            pos({"[Partially supported]": -0.2}),
            pos({"[Continue to Use Evidence]": -0.1}),
            pos({" More text": -0.1}),
        ]
    )
    assert out.text == "Mars has two moons."
    assert out.labels == {"relevance": "relevant", "support": "partially"}
    assert out.boundary == "[Continue to Use Evidence]"
    assert out.token_logprobs == pytest.approx((L(0.7), -0.1, -0.3, -0.2))
    assert not out.ended
    ended = parse_reflection_positions([pos({"Paris": -0.1}), pos({"</s>": -0.01}), pos({"junk": -1.0})])
    assert ended.text == "Paris" and ended.ended and ended.boundary is None
    # Relevance is read at the first position even when another token was written there.
    first = parse_reflection_positions([pos({"Paris": L(0.5), "[Relevant]": L(0.4)})])
    assert S.relevance(S.group_probs(first.tops["relevance"], REL)) == 1.0


def test_parse_text_without_log_probabilities():
    out = parse_reflection_text("[Relevant]Paris is the capital.[Fully supported][Utility:5]</s>")
    assert out.text == "Paris is the capital."
    assert out.labels == {"relevance": "relevant", "support": "fully", "utility": "5"}
    assert out.ended and out.boundary is None
    cut = parse_reflection_text("Mars is red.[Partially supported][Retrieval]<paragraph>x")
    assert cut.text == "Mars is red." and cut.boundary == "[Retrieval]"
    assert strip_reflection_tokens(" [Irrelevant] a  b </s>") == "a b"
