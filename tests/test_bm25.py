"""BM25 retrieval: bm25s-compatible analysis, scores and saved indexes."""

from __future__ import annotations

import pytest

from selfrag.errors import ConfigError, DataError
from selfrag.retrieval import BM25Retriever
from selfrag.types import Document

DOCS = [
    Document(id="mars", title="Mars", text="Mars is called the Red Planet because of iron oxide."),
    Document(id="venus", title="Venus", text="Venus is the hottest planet with a thick atmosphere."),
    Document(id="titan", title="Titan", text="Titan is a moon of Saturn with lakes of methane."),
]


async def test_ranks_the_matching_document_first_with_stemming():
    r = BM25Retriever(DOCS)
    result = await r.retrieve("Which moons have methane lakes?", top_k=2)
    assert result.documents[0].id == "titan"  # "moons" and "lakes" match by stem
    assert len(result.documents) == 2
    assert list(result.scores) == sorted(result.scores, reverse=True)
    assert result.method == "bm25" and result.query.startswith("Which")


async def test_k_larger_than_corpus_and_stopword_only_query():
    r = BM25Retriever(DOCS)
    assert len((await r.retrieve("planet", top_k=50)).documents) == 3
    res = await r.retrieve("the of and", top_k=2)
    assert len(res.documents) == 2 and set(res.scores) == {0.0}


def test_errors_are_clear():
    with pytest.raises(DataError, match="zero documents"):
        BM25Retriever([])
    with pytest.raises(ConfigError, match="top_k"):
        BM25Retriever(DOCS).retrieve_sync("x", 0)


async def test_save_load_round_trip(tmp_path):
    r = BM25Retriever(DOCS)
    r.save(tmp_path / "idx")
    loaded = BM25Retriever.load(tmp_path / "idx")
    a = await r.retrieve("red planet iron", 3)
    b = await loaded.retrieve("red planet iron", 3)
    assert [d.id for d in a.documents] == [d.id for d in b.documents]
    assert a.scores == pytest.approx(b.scores)


def test_document_text_is_what_the_index_reads():
    from selfrag.retrieval.bm25 import document_text

    titled = Document(id="1", title="Paris", text="the capital of France")
    untitled = Document(id="2", title="", text="Lyon is a city on the Rhone")
    assert document_text(titled) == "Paris\nthe capital of France"
    assert document_text(untitled) == "Lyon is a city on the Rhone"
    direct = BM25Retriever([titled, untitled])
    shared = BM25Retriever()
    shared.index_tokens([titled, untitled], shared.tokenize([document_text(d) for d in (titled, untitled)]))
    for query in ("paris", "rhone city", "capital"):
        assert direct.scores_for_tokens(direct.tokenize([query])[0]).tolist() == (
            shared.scores_for_tokens(shared.tokenize([query])[0]).tolist())
