"""retrieval.rerank: evidence — the evidence ranking as a retrieval stage for every method."""

from __future__ import annotations

import pytest

from selfrag.assemble import build_method, build_retriever_factory
from selfrag.config import ExperimentConfig, validate
from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.retrieval.bm25 import BM25Retriever
from selfrag.retrieval.links import evidence_prior
from selfrag.retrieval.rerank import EvidenceReranked, evidence_order
from selfrag.types import Document, Question

# "Alien" is named in the question; "Ridley Scott" is named in the Alien passage (a second hop);
# the distractors share the question's words but neither link.
DOCS = [
    Document("d1", "In which city was the director born? Many directors were born in cities.", "Directors"),
    Document("d2", "Alien is a 1979 film directed by Ridley Scott.", "Alien"),
    Document("d3", "Ridley Scott was born in South Shields.", "Ridley Scott"),
    Document("d4", "A city is a large settlement; the director of a city plans it.", "Metropolis"),
    Document("d5", "Born Free is a 1966 film.", "Born Free"),
    Document("d6", "Aliens is the 1986 sequel directed by James Cameron.", "Aliens"),
]
QUESTION = "In which city was the director of Alien born?"


def test_evidence_order_sorts_by_prior_and_keeps_retrieval_order_on_ties():
    docs = DOCS[:4]
    scores = [4.0, 2.0, 1.0, 1.0]
    priors = evidence_prior(QUESTION, docs, scores)
    order = evidence_order(QUESTION, docs, scores)
    assert [p for _, p in order] == sorted(priors, reverse=True)
    # d3 (linked from d2) and d4 (neither named nor linked) share the score 1.0: the named and linked
    # passages come first, d4 last
    assert [i for i, _ in order][:2] == [1, 2] and order[-1][0] == 3
    tied = evidence_order("q", [Document("a", "x"), Document("b", "y")], [1.0, 1.0])
    assert [i for i, _ in tied] == [0, 1]


async def test_reranked_retriever_keeps_top_k_of_rerank_from_by_evidence():
    inner = BM25Retriever()
    inner.index(DOCS)
    wide = await inner.retrieve(QUESTION, 6)
    reranked = EvidenceReranked(inner, rerank_from=6)
    result = await reranked.retrieve(QUESTION, 2)
    expected = [wide.documents[i].id for i, _ in evidence_order(QUESTION, wide.documents, wide.scores)[:2]]
    assert [d.id for d in result.documents] == expected
    assert set(expected) == {"d2", "d3"}  # the two hops, whatever BM25's own order
    assert list(result.scores) == sorted(result.scores, reverse=True)
    assert result.method == "bm25+evidence" and reranked.name == "bm25+evidence"
    # asked for more than rerank_from, it retrieves top_k (never fewer passages than asked)
    assert len((await EvidenceReranked(inner, rerank_from=2).retrieve(QUESTION, 4)).documents) == 4


def test_rerank_settings_are_checked():
    with pytest.raises(ConfigError, match="retrieval.rerank"):
        validate({"retrieval": {"rerank": "cross_encoder"}})
    with pytest.raises(ConfigError, match="retrieval.rerank_from"):
        validate({"retrieval": {"rerank_from": 0}})
    with pytest.raises(ConfigError, match="rerank_from must be at least 1"):
        EvidenceReranked(BM25Retriever(), rerank_from=0)


async def test_vanilla_rag_behind_the_stage_reads_the_passages_self_rag_s_joint_reads():
    """The baseline of every self-reflective method: vanilla_rag over the same passages."""
    question = Question(id="q", text=QUESTION, contexts=tuple(DOCS))
    llm = ScriptedBackend({"Question:": "South Shields"})
    vanilla_cfg = ExperimentConfig.model_validate({
        "architecture": {"name": "vanilla_rag"},
        "retrieval": {"rerank": "evidence", "rerank_from": 6, "top_k": 3},
    })
    vanilla = build_method(vanilla_cfg, llm)
    v = await vanilla.answer(question)
    read = next(s for s in v.reasoning_chain if s.action == "generate")
    self_rag_cfg = ExperimentConfig.model_validate({
        "architecture": {"name": "self_rag"},
        "self_rag": {"top_k": 6, "joint_passages": 3, "retrieval_mode": "always", "confidence": "off"},
    })
    s = await build_method(self_rag_cfg, llm).answer(question)
    joint = next(st for st in s.reasoning_chain if st.action == "generate" and "passage_ids" in st.details)
    assert read.details["passages_in_context"] == joint.details["passage_ids"]
    assert [d.id for d in v.read] == joint.details["passage_ids"]
    assert [d.id for d in s.read] == joint.details["passage_ids"]


def test_the_stage_wraps_per_question_retrievers_only_when_configured():
    plain = build_retriever_factory(ExperimentConfig.model_validate({}))(DOCS)
    staged = build_retriever_factory(ExperimentConfig.model_validate({"retrieval": {"rerank": "evidence"}}))(DOCS)
    assert plain.name == "bm25"
    assert isinstance(staged, EvidenceReranked) and staged.rerank_from == 10
