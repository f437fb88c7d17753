"""The milvus retriever keeps the shared retriever contract (embedded Milvus Lite, dense and hybrid)."""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus", reason="the milvus extra is not installed: pip install 'selfrag[milvus]'")
pytest.importorskip("milvus_lite", reason="Milvus Lite is not installed: pip install 'selfrag[milvus]'")

from selfrag.retrieval.encoders import register_encoder  # noqa: E402
from selfrag.retrieval.milvus import MilvusRetriever  # noqa: E402
from tests.helpers.hashing import HashingEncoder  # noqa: E402
from tests.test_retriever_contract import RetrieverContract  # noqa: E402

ENCODER = HashingEncoder(name="test-hashing-milvus")
register_encoder(ENCODER)  # so a saved index finds it by name


class TestMilvusDense(RetrieverContract):
    name = "milvus"

    def make(self, documents=None):
        return MilvusRetriever(documents, encoder=ENCODER)

    def load(self, path):
        return MilvusRetriever.load(path, encoder=ENCODER)


class TestMilvusHybrid(RetrieverContract):
    name = "milvus"

    def make(self, documents=None):
        return MilvusRetriever(documents, encoder=ENCODER, search="hybrid")

    def load(self, path):
        return MilvusRetriever.load(path, encoder=ENCODER)


class TestMilvusHybridWeighted(RetrieverContract):
    name = "milvus"

    def make(self, documents=None):
        return MilvusRetriever(documents, encoder=ENCODER, search="hybrid", fusion="weighted",
                               bm25_weight=0.3, dense_weight=0.7, index_type="FLAT")

    def load(self, path):
        return MilvusRetriever.load(path, encoder=ENCODER, fusion="weighted", bm25_weight=0.3, dense_weight=0.7)
