"""Relevance read beside an anchor passage (critic.relevance: linked): anchors, prompts, trace, budget."""

from __future__ import annotations

from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.critique.relevance import anchors
from selfrag.types import Document
from tests.helpers.reflection import word
from tests.test_self_rag_critic import Q, label_script

LINKED = {"critic": {"relevance": "linked"}}


def linked_script():
    """label_script, with the linked relevance prompts answered by the judged passage (the one before
    the question that follows it): A 0.9, B 0.5, C 0.1."""
    tail = "\n</document>\n\nRead together with the document"
    return {
        f"capital of France.{tail}": word(relevant=0.9, irrelevant=0.1),
        f"in Europe.{tail}": word(relevant=0.5, irrelevant=0.5),
        f"of Germany.{tail}": word(relevant=0.1, irrelevant=0.9),
        **label_script(),
    }

ALIEN = Document(id="a", title="Alien (film)", text="Alien is a 1979 film directed by Ridley Scott.")
SCOTT = Document(id="s", title="Ridley Scott", text="Ridley Scott was born in South Shields.")
ALIENS = Document(id="x", title="Aliens", text="Aliens is a 1986 film.")


def test_the_anchor_is_the_best_other_passage_by_evidence_prior():
    question = "In which city was the director of Alien born?"
    # Priors (score share, title named, title linked from another top passage) / 3:
    # Ridley Scott (0.5 + 0 + 1) / 3 = 0.5, Alien (1 + 1 + 0) / 3 = 0.67, Aliens (0.25 + 0 + 0) / 3 = 0.08.
    docs = [SCOTT, ALIEN, ALIENS]
    assert anchors(question, docs, [1.0, 2.0, 0.5]) == [ALIEN, SCOTT, ALIEN]
    assert anchors(question, [ALIEN], [1.0]) == [None]


async def test_each_passage_is_judged_beside_its_anchor_before_the_candidates(france_retriever):
    llm = ScriptedBackend(linked_script())
    cfg = {"self_rag_critic": {"joint_candidate": False, **LINKED}}
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    assert r.answer == "Paris"
    actions = [s.action for s in r.reasoning_chain]
    assert actions[3:6] == ["critique_relevance"] * 3
    assert actions[6:9] == ["generate_candidate", "critique_support", "critique_utility"]
    relevance = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    # france_docs have untitled-in-question titles: the prior is the score share, so A, B, C in order;
    # A's anchor is B, the others' is A.
    assert [(s.details["passage"], s.details["anchor"]) for s in relevance] == [("1", "2"), ("2", "1"), ("3", "1")]
    prompts = [c.prompt_text() for c in llm.calls if "Read together with the document already found" in c.prompt_text()]
    assert len(prompts) == 3
    berlin = prompts[2]
    assert berlin.index("Paris is the capital of France.") < berlin.index("Another document:") < berlin.index("Berlin")
    # The readings are the judged passage's, not the anchor's: C (Berlin) 0.1, as scripted.
    assert relevance[2].details["value"] == 0.1
    # Same budget as judging alone: 1 decision + 3 × (relevance, candidate, support, utility).
    assert r.num_llm_calls == 13


async def test_passage_judges_each_passage_alone(france_retriever):
    llm = ScriptedBackend(linked_script())
    cfg = {"self_rag_critic": {"joint_candidate": False, "critic": {"relevance": "passage"}}}
    r = await create_method("self_rag_critic", llm, france_retriever, cfg).answer(Q)
    assert r.answer == "Paris" and r.num_llm_calls == 13
    texts = [c.prompt_text() for c in llm.calls]
    assert not any("Read together" in t for t in texts)
    assert sum("Does the document above give information" in t for t in texts) == 3
    actions = [s.action for s in r.reasoning_chain][3:7]
    assert actions == ["critique_relevance", "generate_candidate", "critique_support", "critique_utility"]


async def test_one_passage_is_judged_alone(france_docs):
    from selfrag.types import RetrievalResult
    from tests.conftest import StaticRetriever

    one = StaticRetriever(RetrievalResult(documents=(france_docs[0],), scores=(0.9,), query=Q, retrieval_time_ms=1.0,
                                          method="bm25"))
    llm = ScriptedBackend(linked_script())
    r = await create_method("self_rag_critic", llm, one, {"self_rag_critic": {"joint_candidate": False, **LINKED}}).answer(Q)
    assert r.answer == "Paris"
    assert sum("Does the document above give information" in c.prompt_text() for c in llm.calls) == 1


async def test_the_critic_reranker_augmentation_reads_linked_relevance(france_retriever):
    llm = ScriptedBackend(linked_script())
    cfg = {"vanilla": {"top_k": 3}, "augmentations": {"rerank": {"top_k": 1}, **LINKED}}
    r = await create_method("vanilla_rag", llm, france_retriever, cfg).answer(Q)
    rel = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.details.get("anchor") for s in rel] == ["2", "1", "1"]


async def test_the_segment_method_reads_linked_relevance_after_a_retrieval(france_retriever):
    llm = ScriptedBackend({"need facts looked up": word(yes=1.0), **linked_script()})
    cfg = {"self_rag_segment": {"max_segments": 1, "beam_width": 1, "short_answer": False, **LINKED,
                                "adaptive": {"mode": "always"}}}
    r = await create_method("self_rag_segment", llm, france_retriever, cfg).answer(Q)
    rel = [s for s in r.reasoning_chain if s.action == "critique_relevance"]
    assert [s.details.get("anchor") for s in rel] == ["2", "1", "1"]
