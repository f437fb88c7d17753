"""The contract every retriever keeps: one set of tests, one fixture per retriever.

Each subclass of :class:`RetrieverContract` says how to build its retriever;
the tests are the same for all.
"""

from __future__ import annotations

import pytest

from selfrag.errors import ConfigError, DataError
from selfrag.retrieval import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    Retriever,
    load_index,
    save_index,
)
from selfrag.retrieval.encoders import register_encoder
from selfrag.types import Document
from tests.helpers.hashing import HashingEncoder

DOCS = [
    Document(id="mercury", title="Mercury", text="Mercury is the smallest planet and the closest to the Sun."),
    Document(id="venus", title="Venus", text="Venus has a thick carbon dioxide atmosphere and is the hottest planet."),
    Document(id="earth", title="Earth", text="Earth is the only planet known to support life, with liquid water oceans."),
    Document(id="mars", title="Mars", text="Mars is the red planet; iron oxide dust colours its surface."),
    Document(id="jupiter", title="Jupiter", text="Jupiter is a gas giant whose Great Red Spot is a storm larger than Earth."),
    Document(id="saturn", title="Saturn", text="Saturn is famous for its bright rings of ice and rock."),
    Document(id="uranus", title="Uranus", text="William Herschel discovered Uranus in 1781 with a telescope."),
    Document(id="neptune", title="Neptune", text="Neptune was found by mathematical prediction before it was observed."),
]
QUERIES = ["Great Red Spot storm", "who discovered Uranus", "rings of ice", "hottest planet atmosphere"]


@pytest.fixture(autouse=True)
def _embedding_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))


def ranked(result) -> list[tuple[str, float]]:
    return [(d.id, s) for d, s in zip(result.documents, result.scores, strict=True)]


class RetrieverContract:
    name: str

    def make(self, documents=None) -> Retriever:
        raise NotImplementedError

    def load(self, path) -> Retriever:
        raise NotImplementedError

    @pytest.fixture
    def retriever(self) -> Retriever:
        return self.make(DOCS)

    def test_satisfies_the_protocol(self, retriever):
        assert isinstance(retriever, Retriever)
        assert retriever.name == self.name
        assert [d.id for d in retriever.documents] == [d.id for d in DOCS]

    @pytest.mark.parametrize("k", [1, 3, 8])
    async def test_top_k_is_honoured(self, retriever, k):
        result = await retriever.retrieve("Great Red Spot storm", top_k=k)
        assert len(result.documents) == len(result.scores) == k
        assert len({d.id for d in result.documents}) == k
        assert result.method == self.name and result.query == "Great Red Spot storm"
        assert result.retrieval_time_ms >= 0

    @pytest.mark.parametrize("query", QUERIES)
    async def test_scores_descend(self, retriever, query):
        scores = list((await retriever.retrieve(query, top_k=8)).scores)
        assert scores == sorted(scores, reverse=True)

    async def test_finds_the_obvious_document(self, retriever):
        assert (await retriever.retrieve("Great Red Spot storm on the gas giant", 3)).documents[0].id == "jupiter"

    async def test_deterministic_across_calls_and_rebuilds(self, retriever):
        again = self.make(DOCS)
        for query in QUERIES:
            first = ranked(await retriever.retrieve(query, 5))
            assert ranked(await retriever.retrieve(query, 5)) == first
            assert ranked(await again.retrieve(query, 5)) == first

    async def test_k_larger_than_the_corpus_returns_every_document(self, retriever):
        result = await retriever.retrieve("planet", top_k=50)
        assert sorted(d.id for d in result.documents) == sorted(d.id for d in DOCS)

    async def test_one_document_corpus(self):
        only = self.make(DOCS[:1])
        result = await only.retrieve("anything at all", top_k=5)
        assert [d.id for d in result.documents] == ["mercury"]

    def test_empty_corpus_is_a_clear_error(self):
        with pytest.raises(DataError, match="zero documents"):
            self.make([])

    async def test_bad_top_k_is_a_clear_error(self, retriever):
        with pytest.raises(ConfigError, match="top_k must be at least 1"):
            await retriever.retrieve("planet", top_k=0)

    async def test_retrieving_before_indexing_is_a_clear_error(self):
        empty = self.make(None)
        with pytest.raises(DataError, match="no index yet"):
            await empty.retrieve("planet", top_k=1)

    async def test_save_load_round_trip_gives_identical_results(self, retriever, tmp_path):
        retriever.save(tmp_path / "plain")
        loaded = self.load(tmp_path / "plain")
        save_index(retriever, tmp_path / "managed")
        managed = load_index(tmp_path / "managed", documents=DOCS, expected_method=self.name)
        for query in QUERIES:
            want = ranked(await retriever.retrieve(query, 8))
            for other in (loaded, managed):
                got = ranked(await other.retrieve(query, 8))
                assert [i for i, _ in got] == [i for i, _ in want]
                assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6, abs=1e-7)

    def test_stale_index_is_refused_with_the_rebuild_command(self, retriever, tmp_path):
        save_index(retriever, tmp_path / "idx")
        changed = [*DOCS[:-1], Document(id="neptune", title="Neptune", text="Neptune has supersonic winds.")]
        with pytest.raises(DataError, match=f"stale.*selfrag index build .*--retriever {self.name}"):
            load_index(tmp_path / "idx", documents=changed)


class TestBM25(RetrieverContract):
    name = "bm25"

    def make(self, documents=None):
        return BM25Retriever(documents)

    def load(self, path):
        return BM25Retriever.load(path)


class TestDenseWithHashingEncoder(RetrieverContract):
    """The dense retriever's own logic, with a torch-free stand-in encoder."""

    name = "dense"
    encoder = HashingEncoder()
    register_encoder(encoder)  # so a saved index finds it by name

    def make(self, documents=None):
        return DenseRetriever(documents, encoder=self.encoder)

    def load(self, path):
        return DenseRetriever.load(path, encoder=self.encoder)


@pytest.mark.dense
class TestDense(RetrieverContract):
    name = "dense"

    def make(self, documents=None):
        return DenseRetriever(documents)

    def load(self, path):
        return DenseRetriever.load(path)


@pytest.mark.dense
class TestHybrid(RetrieverContract):
    name = "hybrid"

    def make(self, documents=None):
        return HybridRetriever(documents)

    def load(self, path):
        return HybridRetriever.load(path)


@pytest.mark.dense
class TestHybridWeighted(RetrieverContract):
    name = "hybrid"

    def make(self, documents=None):
        return HybridRetriever(documents, fusion="weighted", bm25_weight=0.3, dense_weight=0.7)

    def load(self, path):
        return HybridRetriever.load(path)
