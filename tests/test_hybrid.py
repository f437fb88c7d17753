"""Hybrid retrieval: fusion formulas by hand, and the retriever built on them."""

from __future__ import annotations

import numpy as np
import pytest

from selfrag.assemble import build_retriever, retriever_options
from selfrag.config import load_config
from selfrag.errors import ConfigError
from selfrag.retrieval import HybridRetriever, load_index, save_index
from selfrag.retrieval.encoders import register_encoder
from selfrag.retrieval.hybrid import (
    check_fusion,
    min_max,
    ranking,
    reciprocal_rank_fusion,
    weighted_fusion,
)
from selfrag.types import Document
from tests.helpers.hashing import HashingEncoder

ENCODER = HashingEncoder(name="test-hashing-hybrid")
register_encoder(ENCODER)

DOCS = [
    Document(id="a", title="", text="solar wind particles stream from the sun"),
    Document(id="b", title="", text="the magnetosphere deflects charged particles"),
    Document(id="c", title="", text="aurora lights glow near the poles"),
    Document(id="d", title="", text="comets grow tails pointing away from the sun"),
]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))


# -- the formulas, by hand -----------------------------------------------------------


def test_rrf_by_hand():
    # Ranking 1: d0, d1, d2. Ranking 2: d2, d0 (d1 absent).
    fused = reciprocal_rank_fusion([np.array([0, 1, 2]), np.array([2, 0])], n=4, k=60)
    assert fused[0] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1] == pytest.approx(1 / 62)
    assert fused[2] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[3] == 0.0
    assert reciprocal_rank_fusion([np.array([1, 0])], n=2, k=1).tolist() == pytest.approx([1 / 3, 1 / 2])


def test_ranking_breaks_ties_in_corpus_order_and_can_drop_zeros():
    scores = np.array([0.0, 2.0, 1.0, 2.0, 0.0])
    assert ranking(scores).tolist() == [1, 3, 2, 0, 4]
    assert ranking(scores, drop_zero=True).tolist() == [1, 3, 2]


def test_min_max_and_weighted_fusion_by_hand():
    assert min_max(np.array([1.0, 3.0, 5.0])).tolist() == [0.0, 0.5, 1.0]
    assert min_max(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    bm25 = np.array([0.0, 10.0, 5.0])  # -> 0, 1, 0.5
    dense = np.array([0.2, 0.4, 0.6])  # -> 0, 0.5, 1
    fused = weighted_fusion([bm25, dense], [0.3, 0.7])
    assert fused.tolist() == pytest.approx([0.0, 0.3 + 0.35, 0.15 + 0.7])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("borda", 60, 0.5, 0.5), "unknown fusion 'borda'"),
        (("rrf", 0, 0.5, 0.5), "rrf_k must be at least 1"),
        (("weighted", 60, -1.0, 0.5), "must not be negative"),
        (("weighted", 60, 0.0, 0.0), "needs bm25_weight or dense_weight above 0"),
    ],
)
def test_bad_fusion_settings_are_config_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        check_fusion(*args)


# -- the retriever ---------------------------------------------------------------------


def make(**options) -> HybridRetriever:
    return HybridRetriever(DOCS, encoder=ENCODER, **options)


@pytest.mark.parametrize("query", ["particles from the sun", "aurora poles", "tails"])
def test_rrf_ranking_equals_the_formula_over_both_rankings(query):
    h = make()
    bm25 = h.bm25.scores(query)
    dense = h.dense.scores(query)
    expected = reciprocal_rank_fusion([ranking(bm25, drop_zero=True), ranking(dense)], len(DOCS), 60)
    result = h.retrieve_sync(query, 4)
    assert list(result.scores) == pytest.approx(sorted(expected, reverse=True))
    assert [d.id for d in result.documents] == [DOCS[i].id for i in ranking(expected)]


def test_weighted_fusion_with_only_one_side_matches_that_side():
    only_bm25 = make(fusion="weighted", bm25_weight=1.0, dense_weight=0.0)
    q = "charged particles"
    want = [DOCS[i].id for i in ranking(only_bm25.bm25.scores(q))][:2]
    assert [d.id for d in only_bm25.retrieve_sync(q, 2).documents] == want
    only_dense = make(fusion="weighted", bm25_weight=0.0, dense_weight=2.0)
    want = [DOCS[i].id for i in ranking(only_dense.dense.scores(q))][:2]
    assert [d.id for d in only_dense.retrieve_sync(q, 2).documents] == want
    assert max(only_dense.retrieve_sync(q, 4).scores) == pytest.approx(2.0)


async def test_saved_index_takes_query_time_fusion_overrides(tmp_path):
    h = make(fusion="rrf")
    save_index(h, tmp_path / "idx")
    assert {p.name for p in (tmp_path / "idx").iterdir()} == {"bm25", "dense", "hybrid.json", "manifest.json"}
    same = load_index(tmp_path / "idx", documents=DOCS)
    assert same.fusion == "rrf" and same.rrf_k == 60
    weighted = load_index(tmp_path / "idx", options={"fusion": "weighted", "bm25_weight": 0.2, "dense_weight": 0.8})
    assert (weighted.fusion, weighted.bm25_weight, weighted.dense_weight) == ("weighted", 0.2, 0.8)
    want = make(fusion="weighted", bm25_weight=0.2, dense_weight=0.8)
    got, exp = await weighted.retrieve("sun particles", 4), await want.retrieve("sun particles", 4)
    assert [d.id for d in got.documents] == [d.id for d in exp.documents]
    assert got.scores == pytest.approx(exp.scores)
    with pytest.raises(ConfigError, match="unknown hybrid option"):
        HybridRetriever.load(tmp_path / "idx", encoder=ENCODER, top_p=1)


def test_config_options_reach_the_retriever(tmp_path):
    cfg = load_config(
        overrides=[
            "retrieval.method=hybrid",
            f"retrieval.embedding_model={ENCODER.name}",
            "retrieval.fusion=weighted",
            "retrieval.bm25_weight=0.25",
            "retrieval.dense_weight=0.75",
            "retrieval.vector_store=exact",
        ]
    )
    opts = retriever_options(cfg)
    assert opts == {
        "embedding_model": ENCODER.name,
        "vector_store": "exact",
        "fusion": "weighted",
        "rrf_k": 60,
        "bm25_weight": 0.25,
        "dense_weight": 0.75,
    }
    r = build_retriever(cfg, DOCS)
    assert isinstance(r, HybridRetriever) and r.fusion == "weighted" and r.dense.encoder is ENCODER
    save_index(r, tmp_path / "idx")
    again = build_retriever(load_config(overrides=[f"retrieval.index={tmp_path / 'idx'}", "retrieval.method=hybrid"]), DOCS)
    assert again.fusion == "rrf"  # fusion is a query-time setting: the config's default applies


@pytest.mark.dense
async def test_hybrid_on_the_demo_corpus_with_the_bundled_model():
    from selfrag.data import demo_corpus

    h = HybridRetriever(demo_corpus())
    result = await h.retrieve("Who discovered Uranus?", 3)
    assert result.documents[0].title == "Uranus" and result.method == "hybrid"
