"""Issue 16's failures on small instruction models, each pinned with a scripted model.

* labels-only output ("[IsRel] relevant\\n[IsSup] partially supported") is no answer;
* an always-"no" decision is read from P(yes) against a calibrated threshold;
* a sentence answer to a yes/no question becomes "yes" or "no";
* one passage per candidate cannot answer a two-hop question: the joint candidate can.
"""

from __future__ import annotations

import math

import pytest

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method as make_method
from selfrag.methods.core.answer_format import answer_format
from selfrag.methods.core.answer_shape import finalize_answer, is_yes_no, malformed, yes_no
from selfrag.methods.core.trace import Run
from selfrag.methods.critique.decision import ANCHORS_RETRIEVE, ANCHORS_SKIP, names_something
from selfrag.methods.steps.abstention import agree
from selfrag.methods.steps.evidence import best_fused, impute, rank_evidence
from selfrag.types import Document, Question, RetrievalResult

DECISION = "checked in reference documents"


def create_method(name, llm, retriever=None, config=None):
    """These cases pin the prompted critic's flows (the labels the model writes); on a local model the
    default critic is the fitted one (tests/test_fitted_critic.py)."""
    config = dict(config or {})
    config["self_rag"] = {"critic": "prompted", **(config.get("self_rag") or {})}
    return make_method(name, llm, retriever, config)
TWO_HOP = Question(id="q", text="In which city was the director of Alien born?")
DOC_DIRECTOR = "Alien is a 1979 film directed by Ridley Scott."
DOC_BIRTH = "Ridley Scott was born in South Shields."
DOC_OTHER = "The Nostromo is a fictional spaceship."


@pytest.fixture
def two_hop_retriever(static_retriever_factory):
    docs = tuple(Document(id=str(i), title=f"Doc {i}", text=t)
                 for i, t in enumerate((DOC_DIRECTOR, DOC_BIRTH, DOC_OTHER), start=1))
    return static_retriever_factory(
        RetrievalResult(documents=docs, scores=(3.0, 2.0, 1.0), query="q", retrieval_time_ms=0.0, method="bm25")
    )


def probs(p_yes: float) -> dict:
    return {"text": "yes" if p_yes >= 0.5 else "no",
            "top_logprobs": [{"yes": math.log(p_yes), "no": math.log(1 - p_yes)}]}


# -- answers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("[IsRel] relevant\n[IsSup] partially supported", "reflection label"),
        ("relevant", "reflection label"),
        ("[Relevant]", "reflection label"),
        ('{"answer": "Paris"}', "json"),
        ("Question: what is the capital?", "prompt text"),
        ("a short answer (a name, number, date or phrase), never a full sentence", "prompt text"),
        ("a name", "prompt text"),
        ("Paris", None),
        ("South Shields", None),
    ],
)
def test_what_is_not_an_answer(text, reason):
    assert malformed(text) == reason


@pytest.mark.parametrize(
    ("text", "question", "reason"),
    [
        ("4", "Who wrote Hamlet?", "reflection label"),  # a utility rating in the answer's place
        ("4", None, "reflection label"),
        ("3", 'Over how many centuries were the "dwelling place of the dead" built?', None),
        ("2", "In what year of his reign did he marry?", None),
        ("5", "How old was she when she debuted?", None),
        ("1962", "Who wrote Hamlet?", None),  # not a 1-5 rating
    ],
)
def test_a_lone_digit_is_a_rating_unless_the_question_asks_for_a_number(text, question, reason):
    assert malformed(text, question) == reason


def test_labels_only_output_is_never_selected(two_hop_retriever):
    """The 0.5B model wrote only the critique labels; they must not become the answer."""
    llm = ScriptedBackend({
        DECISION: "yes",
        DOC_DIRECTOR: "[IsRel] relevant\n[IsSup] partially supported",
        DOC_BIRTH: "South Shields\n[IsRel] relevant\n[IsSup] fully supported",
        DOC_OTHER: "[IsRel] irrelevant\n[IsSup] no support",
        "Answer: South Shields": "4",
        "Answer: \n": "5",
    })
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "joint_passages": 0}})
    import asyncio

    response = asyncio.run(method.answer(TWO_HOP))
    assert response.answer == "South Shields"
    discard = next(s for s in response.reasoning_chain if s.action == "discard_candidates")
    assert [d["reason"] for d in discard.details["discarded"]] == ["empty", "empty"]


async def test_when_every_candidate_is_empty_one_answer_is_written_over_all_passages(two_hop_retriever):
    labels = "[IsRel] relevant\n[IsSup] fully supported"
    llm = ScriptedBackend({
        DECISION: "yes", "Answer the question using": labels, "Rating": "5",
        "Use the documents below": "South Shields",
    })
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "joint_passages": 0}})
    response = await method.answer(TWO_HOP)
    assert response.answer == "South Shields"
    assert response.reasoning_chain[-1].action == "generate"
    assert all(DOC in llm.calls[-1].prompt_text() for DOC in (DOC_DIRECTOR, DOC_BIRTH, DOC_OTHER))


# -- the joint candidate ------------------------------------------------------------------


def joint_script(director_support: str = "fully supported", joint_support: str = "fully supported") -> dict:
    return {
        DECISION: "yes",
        "Use the documents below": "South Shields",
        "Judge whether the documents support": joint_support,
        DOC_DIRECTOR: f"Ridley Scott\n[IsRel] relevant\n[IsSup] {director_support}",
        DOC_BIRTH: "South Shields\n[IsRel] relevant",
        DOC_OTHER: "Nostromo\n[IsRel] irrelevant\n[IsSup] no support",
        "Answer: ": "5",
    }


async def test_by_default_the_joint_passages_are_chosen_by_evidence_before_any_verdict(two_hop_retriever):
    """A small model's [IsRel] verdict separates gold passages at chance, so combined mode ranks the
    joint's passages by the lexical prior alone, before any verdict. By default the joint is then
    written alone (it answers)."""
    llm = ScriptedBackend(joint_script())
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "confidence": "off"}})
    response = await method.answer(TWO_HOP)
    actions = [s.action for s in response.reasoning_chain]
    assert actions.index("rank_evidence") < actions.index("generate")
    ranked = response.reasoning_chain[actions.index("rank_evidence")]
    assert ranked.details["ranked_by"] == "prior"
    assert [p["model"] for p in ranked.details["passages"]] == [None, None, None]
    joint = response.candidates[0]
    assert joint.joint is True and list(joint.indices) == [1, 2, 3]
    assert response.answer == "South Shields" and response.num_llm_calls == 1
    skipped = next(s for s in response.reasoning_chain if s.action == "passage_candidates")
    assert skipped.observation == "3 one-passage candidates skipped"


async def test_a_self_labelled_challenger_does_not_overturn_the_joint_candidate(two_hop_retriever):
    """Issue 16, the yes/no failure on the 1.5B model: the joint candidate said the right "no",
    rated "no support" by the support call, and a one-passage "yes" that labelled itself
    "partially supported" won. With selection: joint_first (default) the joint answer stands, even
    when every candidate is written (an abstention rule that reads them)."""
    llm = ScriptedBackend(joint_script(joint_support="no support"))
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "abstain": ["unconfirmed"]}})
    response = await method.answer(TWO_HOP)
    assert response.answer == "South Shields"
    assert response.candidates[1].support == "fully supported"  # the challenger's own label
    select = next(s for s in response.reasoning_chain if s.action == "select_best")
    assert select.thought.startswith("The joint candidate when it has an answer")
    assert [d.text for d in response.read] == [DOC_DIRECTOR, DOC_BIRTH, DOC_OTHER]  # the joint's passages
    assert [d.text for d in response.citations] == [DOC_BIRTH]  # the one holding its answer


async def test_selection_critique_lets_a_better_scored_candidate_beat_the_joint_candidate(two_hop_retriever):
    # Seed 000's rule: utility + 2 x support bonus + 0.5 if relevant. Ridley Scott: 5 + 2 + 0.5 = 7.5;
    # the joint (partially supported): 5 + 1 + 0.5 = 6.5.
    llm = ScriptedBackend(joint_script(joint_support="partially supported"))
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "selection": "critique"}})
    response = await method.answer(TWO_HOP)
    assert response.answer == "Ridley Scott"
    assert [c.score for c in response.candidates[:2]] == [6.5, 7.5]
    assert [d.text for d in response.citations] == [DOC_DIRECTOR]


async def test_without_a_usable_joint_answer_the_best_one_passage_candidate_is_selected(two_hop_retriever):
    script = joint_script() | {"Use the documents below": "[IsRel] relevant\n[IsSup] fully supported"}
    llm = ScriptedBackend(script)
    method = create_method("self_rag", llm, two_hop_retriever, {"self_rag": {"retrieval_mode": "always"}})
    response = await method.answer(TWO_HOP)
    # Ridley Scott (7.5) beats South Shields (default support: 5 + 1 + 0.5 = 6.5) and Nostromo.
    assert response.answer == "Ridley Scott"
    discard = next(s for s in response.reasoning_chain if s.action == "discard_candidates")
    assert [d["reason"] for d in discard.details["discarded"]] == ["reflection label"]


ON_DEMAND = {"retrieval_mode": "always", "confidence": "off"}


async def test_on_demand_a_joint_with_an_answer_is_written_alone(two_hop_retriever):
    """The joint is the answer whenever it has one (joint_first), so the one-passage candidates are not
    written: its answer only (its own verdicts would change nothing)."""
    llm = ScriptedBackend(joint_script())
    method = create_method("self_rag", llm, two_hop_retriever, {"self_rag": ON_DEMAND})
    response = await method.answer(TWO_HOP)
    assert response.answer == "South Shields"
    assert response.num_llm_calls == 1
    assert not any(DOC_OTHER in c.prompt_text() and DOC_DIRECTOR not in c.prompt_text() for c in llm.calls)
    assert [c.joint for c in response.candidates] == [True]
    skipped = next(s for s in response.reasoning_chain if s.action == "passage_candidates")
    assert skipped.observation == "3 one-passage candidates skipped"
    # The same answer as when every candidate is written beside it.
    every = await create_method("self_rag", ScriptedBackend(joint_script()), two_hop_retriever,
                                {"self_rag": {**ON_DEMAND, "abstain": ["unconfirmed"]}}).answer(TWO_HOP)
    assert every.answer == response.answer and every.num_llm_calls > 1


async def test_on_demand_a_joint_without_an_answer_brings_the_one_passage_candidates_back(two_hop_retriever):
    script = joint_script() | {"Use the documents below": "[IsRel] relevant\n[IsSup] fully supported"}
    response = await create_method("self_rag", ScriptedBackend(script), two_hop_retriever,
                                   {"self_rag": ON_DEMAND}).answer(TWO_HOP)
    assert response.answer == "Ridley Scott"  # as with every candidate written from the start
    assert response.num_llm_calls == 1 + 2 * 3
    step = next(s for s in response.reasoning_chain if s.action == "passage_candidates")
    assert step.observation == "joint: reflection label"


@pytest.mark.parametrize("setting", [{"selection": "critique"}, {"abstain": ["unconfirmed"]},
                                     {"abstain": ["relevance < 0.5"]}, {"joint_passages": 0}])
async def test_on_demand_candidates_are_written_whenever_something_reads_them(setting, two_hop_retriever):
    """Selection by critique and abstention rules read the one-passage candidates (and without the joint
    there is nothing else): they are written for every question."""
    response = await create_method("self_rag", ScriptedBackend(joint_script()), two_hop_retriever,
                                   {"self_rag": {**ON_DEMAND, **setting}}).answer(TWO_HOP)
    assert sum(not c.joint for c in response.candidates) == 3
    assert not any(s.action == "passage_candidates" for s in response.reasoning_chain)


async def test_a_default_support_cannot_challenge_the_joint_candidate(two_hop_retriever):
    # Passage 2's reply has no [IsSup] line: its support is a default, whatever the joint one is.
    llm = ScriptedBackend(joint_script(director_support="no support", joint_support="no support"))
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"retrieval_mode": "always", "abstain": ["unconfirmed"]}})
    response = await method.answer(TWO_HOP)
    assert response.answer == "South Shields"
    assert [name for name, v in response.candidates[2].verdicts.items() if v.default] == ["support"]


# -- the retrieval decision ---------------------------------------------------------------


async def test_an_always_no_model_is_read_from_p_yes_against_a_calibrated_threshold(two_hop_retriever):
    """Every reply is "no", but P(yes) is higher for questions that need documents."""
    script = {a: probs(0.38 + 0.01 * i) for i, a in enumerate(ANCHORS_RETRIEVE)}
    script |= {a: probs(0.28 + 0.01 * i) for i, a in enumerate(ANCHORS_SKIP)}
    script[TWO_HOP.text + "\n\nDoes answering"] = probs(0.38)
    script["What is 2 plus 2?\n\nDoes answering"] = probs(0.31)
    script |= {"Answer the question using": "South Shields\n[IsRel] relevant\n[IsSup] fully supported",
               "Rating": "5", "Question: What is 2 plus 2?": "4"}
    llm = ScriptedBackend(script)
    method = create_method("self_rag", llm, two_hop_retriever,
                           {"self_rag": {"joint_passages": 0, "retrieval_mode": "adaptive"}})

    response = await method.answer(TWO_HOP)
    assert response.retrieval_needed is True
    decision = response.reasoning_chain[0]
    assert decision.details["decision_source"] == "label_probs"
    assert decision.details["p_yes"] == pytest.approx(0.38)
    calibrated = [s for s in response.reasoning_chain if s.action == "calibrate_decision"]
    assert len(calibrated) == len(ANCHORS_RETRIEVE) + len(ANCHORS_SKIP) + 1
    assert calibrated[-1].details["threshold"] == pytest.approx(0.355)

    # The calibration is measured once per method: the next question costs one decision call.
    arithmetic = await method.answer(Question(id="a", text="What is 2 plus 2?"))
    assert arithmetic.retrieval_needed is False and arithmetic.answer == "4"
    assert arithmetic.num_llm_calls == 2


async def test_anchors_that_do_not_separate_hand_the_decision_to_the_lexical_rule(two_hop_retriever):
    """A model whose P(yes) is the same for both kinds of anchor cannot decide: a question
    that names something retrieves, whatever its P(yes); one that names nothing does not."""
    values = (0.30, 0.40, 0.35, 0.33, 0.37, 0.36)
    script = {a: probs(p) for a, p in zip(ANCHORS_RETRIEVE, values, strict=True)}
    script |= {a: probs(p) for a, p in zip(ANCHORS_SKIP, reversed(values), strict=True)}
    script[TWO_HOP.text + "\n\nDoes answering"] = probs(0.05)
    script["What is 2 plus 2?\n\nDoes answering"] = probs(0.95)
    script |= {"Answer the question using": "South Shields\n[IsRel] relevant\n[IsSup] fully supported",
               "Rating": "5", "Question: What is 2 plus 2?": "4"}
    method = create_method("self_rag", ScriptedBackend(script), two_hop_retriever,
                           {"self_rag": {"joint_passages": 0, "retrieval_mode": "adaptive"}})
    response = await method.answer(TWO_HOP)
    calibrated = [s for s in response.reasoning_chain if s.action == "calibrate_decision"][-1]
    assert "do not separate" in calibrated.observation
    decision = next(s for s in response.reasoning_chain if s.action == "retrieval_decision")
    assert decision.details["decision_source"] == "names" and decision.details["p_yes"] == pytest.approx(0.05)
    assert response.retrieval_needed is True and response.answer == "South Shields"

    arithmetic = await method.answer(Question(id="a", text="What is 2 plus 2?"))
    assert arithmetic.retrieval_needed is False and arithmetic.answer == "4"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Who discovered Uranus?", True),
        ("Which university did the director of Inception attend?", True),
        ("D1NZ is a series based on what oversteering technique?", True),
        ("Suicide's 1977 album features which song?", True),
        ("Which cyclone had a film made about it in 2007?", True),
        ("Translate 'good morning' into Spanish.", True),
        ("What is 1000 minus 387?", False),
        ("What does the word 'generous' mean?", False),
        ("Hello, how are you today? I am fine.", False),
        ("Write a short poem about the sea.", False),
        ("Can I ask you something?", False),
    ],
)
def test_names_something(text, expected):
    assert names_something(text) is expected


async def test_the_questions_own_documents_are_retrieved_without_asking():
    question = Question(id="q", text=TWO_HOP.text, contexts=(Document(id="1", text=DOC_BIRTH),))
    llm = ScriptedBackend({"Answer the question using": "South Shields\n[IsRel] relevant\n[IsSup] fully supported",
                           "Rating": "5"})
    response = await create_method("self_rag", llm, None, {}).answer(question)
    assert response.retrieval_needed is True and response.answer == "South Shields"
    first = response.reasoning_chain[0]
    assert first.details["own_evidence"] is True and first.llm_calls == 0


# -- yes/no questions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Were Scott Derrickson and Ed Wood of the same nationality?", True),
        ("Are both Cypress and Ajuga genera?", True),
        ("Do the drinks Gibson and Zurracapote both contain gin?", True),
        ("Is Gasherbrum II or Nuptse closer to Everest?", False),  # names its alternatives
        ("Who directed Alien?", False),
    ],
)
def test_yes_no_questions_are_recognised(text, expected):
    assert is_yes_no(Question(id="q", text=text)) is expected


def test_a_yes_no_question_asks_for_yes_or_no():
    assert answer_format(Question(id="q", text="Are both Cypress and Ajuga genera?")) == "Reply with only yes or no."


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Yes.", "yes"),
        ("no, they are not", "no"),
        ("Scott Derrickson and Ed Wood were of the same nationality.", "yes"),
        ("They were not of the same nationality.", "no"),
        ("", None),
    ],
)
def test_yes_no_reading(reply, expected):
    assert yes_no(reply) == expected


async def test_a_sentence_answer_to_a_yes_no_question_becomes_yes_or_no(static_retriever_factory):
    question = Question(id="q", text="Were Scott Derrickson and Ed Wood of the same nationality?")
    llm = ScriptedBackend({"Use the documents below": "Scott Derrickson and Ed Wood were of the same nationality."})
    doc = Document(id="1", text="Scott Derrickson is American. Ed Wood was American.")
    retriever = static_retriever_factory(
        RetrievalResult(documents=(doc,), scores=(1.0,), query="q", retrieval_time_ms=0.0, method="bm25")
    )
    response = await create_method("vanilla_rag", llm, retriever).answer(question)
    assert response.answer == "yes"
    assert response.details["raw_answer"].startswith("Scott Derrickson")


def test_finalize_keeps_a_free_text_answer_and_strips_structure():
    q = Question(id="q", text="Who directed Alien?")
    assert finalize_answer(q, "Ridley Scott") == "Ridley Scott"
    assert finalize_answer(q, "Ridley Scott\n[IsRel] relevant") == "Ridley Scott"
    assert finalize_answer(q, '{"answer": "Ridley Scott", "relevance": "relevant"}') == "Ridley Scott"


# -- abstention (issue 17) ---------------------------------------------------------------


async def test_abstains_when_no_candidate_reaches_the_support_level(two_hop_retriever):
    llm = ScriptedBackend(joint_script(director_support="no support", joint_support="no support"))
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["support < partially_supported"]}}
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is True and response.answer == "insufficient evidence"
    assert response.citations == ()
    step = next(s for s in response.reasoning_chain if s.action == "abstain")
    # Passage 2's verdict is missing (a default) and passage 3's is "no support": none reaches partial.
    assert "partially supported" in step.details["abstain_reason"]
    assert response.details["withheld_answer"] == "South Shields"  # the joint's, as selection would pick


async def test_a_supported_candidate_is_answered_even_when_the_joint_one_is_not(two_hop_retriever):
    llm = ScriptedBackend(joint_script(director_support="partially supported", joint_support="no support"))
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["support < partially_supported"]}}
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is False and response.answer == "Ridley Scott"


async def test_abstention_is_off_by_default_and_not_shaped_as_yes_or_no(two_hop_retriever):
    llm = ScriptedBackend(joint_script(director_support="no support", joint_support="no support"))
    response = await create_method("self_rag", llm, two_hop_retriever, {"self_rag": {"retrieval_mode": "always"}}).answer(TWO_HOP)
    assert response.abstained is False and response.answer == "South Shields"
    yes_no_q = Question(id="y", text="Was Ridley Scott born in South Shields?")
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["support < fully_supported"]}}
    script = joint_script(director_support="no support", joint_support="no support")
    script["Notes written from"] = "Yes"  # the joint's answer, read after its facts
    response = await create_method("self_rag", ScriptedBackend(script), two_hop_retriever, cfg).answer(yes_no_q)
    assert response.abstained is True and response.answer == "insufficient evidence"


async def test_abstains_when_no_passage_reaches_the_relevance_floor(two_hop_retriever):
    # Titles "Doc 1".."Doc 3" are not named in the question nor linked: the best fused relevance
    # is passage 1's (verdict relevant = 1, prior = (score share 1 + 0 + 0) / 3), i.e. 2/3.
    llm = ScriptedBackend(joint_script())
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["relevance < 0.7"], "confidence": "off"}}
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is True and response.answer == "insufficient evidence"
    assert response.citations == ()
    # Abstention is decided once the answer is read: the chains and the joint's answer call are spent.
    assert response.num_llm_calls == 2 * 3 + 1
    step = next(s for s in response.reasoning_chain if s.action == "abstain")
    assert step.details["abstain_reason"] == "no passage's fused relevance reaches 0.7 (best 0.67)"
    assert response.details["withheld_answer"] == "South Shields"  # the joint was already written
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["relevance < 0.6"]}}
    response = await create_method("self_rag", ScriptedBackend(joint_script()), two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is False and response.answer == "South Shields"


async def test_the_relevance_floor_passes_a_passage_named_in_the_question(static_retriever_factory):
    docs = tuple(Document(id=str(i), title=title, text=t) for i, (title, t) in enumerate(
        (("Alien (film)", DOC_DIRECTOR), ("Ridley Scott", DOC_BIRTH), ("Nostromo", DOC_OTHER)), start=1))
    retriever = static_retriever_factory(
        RetrievalResult(documents=docs, scores=(3.0, 2.0, 1.0), query="q", retrieval_time_ms=0.0, method="bm25"))
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["relevance < 0.7"]}}
    response = await create_method("self_rag", ScriptedBackend(joint_script()), retriever, cfg).answer(TWO_HOP)
    # "Alien" is named in the question: prior (score share 1 + named 1 + linked 0) / 3 = 2/3,
    # fused (verdict 1 + 2/3) / 2 = 0.8333.
    assert response.abstained is False and response.answer == "South Shields"
    assert best_fused(TWO_HOP.text, docs, (3.0, 2.0, 1.0), [1.0, 1.0, 0.0]) == 0.8333
    ranked = next(s for s in response.reasoning_chain if s.action == "rank_evidence")
    assert ranked.details["passages"][0]["prior"] == 0.6667


def test_an_unjudged_passage_takes_the_mean_verdict_of_the_judged_ones():
    """Issue 16: self_rag judges only its first num_candidates passages, and a fixed 0.5 for the
    rest ranked the retriever's top three above any unjudged passage. Hand-computed: verdicts
    1, 0 and two unjudged passages -> both unjudged get (1 + 0) / 2 = 0.5; with no verdict at all, 0.5."""
    assert impute([1.0, 0.0, None, None]) == [1.0, 0.0, 0.5, 0.5]
    assert impute([1.0, 1.0, 1.0, None]) == [1.0, 1.0, 1.0, 1.0]
    assert impute([None, None]) == [0.5, 0.5]


def test_the_joint_passages_are_ranked_by_evidence_not_by_which_were_judged():
    # Titles: "Alien" is named in the question (passage 4, unjudged, lowest BM25 score);
    # passages 1-3 judged relevant, none named or linked.
    docs = [Document(id=str(i), title=t, text=f"text {i}") for i, t in
            enumerate(("Zed", "Yak", "Xu", "Alien (film)"), start=1)]
    run = Run(ScriptedBackend({}), None, {})
    ranked = rank_evidence(run, TWO_HOP.text, docs, [4.0, 3.0, 2.0, 1.0], [1.0, 1.0, 1.0, None], keep=2)
    rows = next(s for s in run.records if s.action == "rank_evidence").details["passages"]
    # Passage 4: model 1 (mean), prior (1/4 + 1 + 0) / 3 = 0.4167, fused 0.7083;
    # passage 1: model 1, prior (1 + 0 + 0) / 3 = 0.3333, fused 0.6667.
    assert [r["fused"] for r in rows] == [0.6667, 0.625, 0.5833, 0.7083]
    assert [r["judged"] for r in rows] == [True, True, True, False]
    assert ranked.passages.indices == (4, 1)


# -- abstention when no other candidate confirms the answer (issue 17) ------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # tokens {stedelijk, museum} vs {stedelijk, museum, amsterdam}: P 1, R 2/3, F1 0.8
        ("the Stedelijk Museum", "Stedelijk Museum Amsterdam", True),
        # one shared token of two each: P = R = 1/2, F1 0.5 (the threshold itself agrees)
        ("South Shields", "Shields, England", True),
        # one shared token of 1 and 3: P 1, R 1/3, F1 0.5
        ("Scott", "Ridley Scott Jr", True),
        # one shared token of 1 and 4: F1 0.4
        ("Scott", "Sir Ridley Scott Jr", False),
        ("yes", "Yes.", True),
        ("no", "yes", False),
        ("yes", "yes both are", False),  # yes/no only match exactly
    ],
)
def test_two_answers_agree_when_their_token_f1_reaches_one_half(a, b, same):
    assert agree(a, b) is same and agree(b, a) is same


def confirm_script(director: str, birth: str, joint: str = "South Shields") -> dict:
    script = joint_script()
    script.update({"Use the documents below": joint,
                   DOC_DIRECTOR: f"{director}\n[IsRel] relevant\n[IsSup] fully supported",
                   DOC_BIRTH: f"{birth}\n[IsRel] relevant\n[IsSup] fully supported"})
    return script


async def test_an_answer_another_candidate_confirms_is_kept(two_hop_retriever):
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["unconfirmed"]}}
    llm = ScriptedBackend(confirm_script("Ridley Scott", "in South Shields, England"))
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is False and response.answer == "South Shields"


async def test_abstains_when_no_other_candidate_gives_the_selected_answer(two_hop_retriever):
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["unconfirmed"]}}
    llm = ScriptedBackend(confirm_script("Ridley Scott", "London"))
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.abstained is True and response.answer == "insufficient evidence"
    assert response.citations == ()
    step = next(s for s in response.reasoning_chain if s.action == "abstain")
    assert step.details["abstain_reason"] == (
        "no other candidate confirms the answer 'South Shields' (3 other usable candidates, "
        "agreement: token F1 >= 0.5)")
    assert step.action_input == "unconfirmed"
    assert response.details["withheld_answer"] == "South Shields"
    # Off (the default): the same run answers.
    llm = ScriptedBackend(confirm_script("Ridley Scott", "London"))
    response = await create_method("self_rag", llm, two_hop_retriever, {"self_rag": {"retrieval_mode": "always"}}).answer(TWO_HOP)
    assert response.abstained is False and response.answer == "South Shields"


async def test_a_yes_no_answer_needs_the_same_word_to_be_confirmed(two_hop_retriever):
    yes_no_q = Question(id="y", text="Was Ridley Scott born in South Shields?")
    # The joint writes a yes/no question's facts first, then its answer (test_facts_first.py).
    cfg = {"self_rag": {"retrieval_mode": "always", "abstain": ["unconfirmed"]}}
    llm = ScriptedBackend(confirm_script("No", "No", joint="Yes") | {"Notes written from": "Yes"})
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(yes_no_q)
    assert response.abstained is True
    llm = ScriptedBackend(confirm_script("No", "Yes", joint="Yes") | {"Notes written from": "Yes"})
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(yes_no_q)
    assert response.abstained is False and response.answer == "yes"


def likelihood_script(scores: dict[str, float]) -> ScriptedBackend:
    """joint_script's model, scoring a forced reply by ``scores`` (one token per word at that log-probability)."""
    script = joint_script(joint_support="partially supported")

    def respond(request):
        if request.forced is not None:
            return {"forced_logprobs": [scores[request.forced]] * len(request.forced.split())}
        text = request.prompt_text()
        return next(value for key, value in script.items() if key in text)

    return ScriptedBackend(respond=respond)


LIKELIHOOD = {"retrieval_mode": "always", "selection": "likelihood", "confidence": "off"}


async def test_selection_likelihood_picks_the_candidate_the_evidence_prompt_finds_most_likely(two_hop_retriever):
    """Every candidate is scored as the reply to the answer prompt over the joint's passages: the
    one-passage candidates are written for every question, and the most likely wins."""
    llm = likelihood_script({"South Shields": -0.9, "Ridley Scott": -0.2, "Nostromo": -3.0})
    response = await create_method("self_rag", llm, two_hop_retriever, {"self_rag": LIKELIHOOD}).answer(TWO_HOP)
    assert response.answer == "Ridley Scott"
    assert [c.details["evidence_likelihood"] for c in response.candidates] == [-0.9, -0.2, -0.9, -3.0]
    scored = [c for c in llm.calls if c.forced is not None]
    # One scoring pass per distinct text (South Shields is written twice), each over the joint's prompt.
    assert sorted(c.forced for c in scored) == ["Nostromo", "Ridley Scott", "South Shields"]
    assert all(DOC_DIRECTOR in c.prompt_text() and DOC_BIRTH in c.prompt_text() for c in scored)
    # 3 chains x 2 calls, the joint's answer, 3 scoring passes; the joint's own critiques are not asked.
    assert response.num_llm_calls == 2 * 3 + 1 + 3
    select = next(s for s in response.reasoning_chain if s.action == "select_best")
    assert select.thought.startswith("The candidate most likely") and select.details["selected"] == 2
    assert select.observation == "Selected candidate 2 from 'Doc 1' (mean log-probability -0.200)"


async def test_selection_likelihood_keeps_the_joint_on_ties_and_needs_a_backend_that_scores(two_hop_retriever):
    llm = likelihood_script({"South Shields": -0.5, "Ridley Scott": -0.5, "Nostromo": -0.5})
    response = await create_method("self_rag", llm, two_hop_retriever, {"self_rag": LIKELIHOOD}).answer(TWO_HOP)
    assert response.answer == "South Shields" and response.candidates[0].joint is True

    class NoScoring(ScriptedBackend):
        supports_forced = False

    with pytest.raises(ConfigError, match="selection: likelihood") as info:
        create_method("self_rag", NoScoring([]), two_hop_retriever, {"self_rag": LIKELIHOOD})
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="self_rag_critic.selection"):
        create_method("self_rag_critic", NoScoring([]), two_hop_retriever, {"self_rag_critic": {"selection": "likelihood"}})


async def test_selection_likelihood_without_a_joint_reads_the_passages_the_candidates_came_from(two_hop_retriever):
    llm = likelihood_script({"Ridley Scott": -0.8, "South Shields": -0.3, "Nostromo": -2.0})
    cfg = {"self_rag": LIKELIHOOD | {"joint_passages": 0}}
    response = await create_method("self_rag", llm, two_hop_retriever, cfg).answer(TWO_HOP)
    assert response.answer == "South Shields" and not any(c.joint for c in response.candidates)
    scored = [c.prompt_text() for c in llm.calls if c.forced is not None]
    assert len(scored) == 3 and all(DOC_DIRECTOR in p and DOC_BIRTH in p and DOC_OTHER in p for p in scored)
