"""OpenAI-compatible embeddings against a real HTTP server on 127.0.0.1.

The server computes a hashed bag of words per input, so vectors are
deterministic and similar texts are near each other.
"""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from selfrag.errors import BackendError, ConfigError
from selfrag.retrieval import DenseRetriever, HybridRetriever, load_index, save_index
from selfrag.retrieval.encoders import OpenAIEmbeddingEncoder, create_encoder, get_encoder
from selfrag.types import Document
from tests.helpers.hashing import hashed_vector
from tests.helpers.servers import ScriptedHTTPServer

pytestmark = pytest.mark.server

DOCS = [
    Document(id="tea", title="Tea", text="Green tea leaves are steamed and dried."),
    Document(id="coffee", title="Coffee", text="Coffee beans are roasted before grinding."),
    Document(id="cocoa", title="Cocoa", text="Cocoa pods hold the beans used for chocolate."),
]


def embeddings_handler(failures: list[tuple[int, dict]] | None = None, shuffle: bool = True):
    """An /embeddings endpoint; ``failures`` are answered first, in order."""
    pending = list(failures or [])
    rng = random.Random(0)

    def handle(path, body, headers):
        if pending:
            status, extra = pending.pop(0)
            return status, {"error": {"message": f"scripted failure {status}"}}, extra
        if path != "/v1/embeddings":
            return 404, {"error": {"message": f"no route {path}"}}, {}
        inputs = body["input"]
        rows = [{"object": "embedding", "index": i, "embedding": hashed_vector(t, 32)} for i, t in enumerate(inputs)]
        if shuffle:
            rng.shuffle(rows)  # the API may answer out of order; `index` says where each belongs
        return 200, {"object": "list", "data": rows, "model": body["model"], "usage": {"prompt_tokens": 1}}, {}

    return handle


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))


def test_vectors_come_back_in_input_order_and_batched():
    with ScriptedHTTPServer(embeddings_handler()) as server:
        enc = OpenAIEmbeddingEncoder("hash-32", base_url=f"{server.url}/v1", batch_size=2)
        texts = ["alpha beta", "gamma", "", "delta epsilon zeta"]
        vecs = enc.encode(texts)
        enc.close()
    want = np.asarray([hashed_vector(t if t else " ", 32) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vecs, want, atol=1e-6)
    sizes = [len(body["input"]) for _, body, _ in server.requests]
    assert sizes == [2, 2]
    assert server.requests[0][1]["model"] == "hash-32"
    assert server.requests[1][1]["input"][0] == " "  # empty strings are not sent as ""


async def test_dense_retrieval_through_the_server_sync_and_async(tmp_path):
    with ScriptedHTTPServer(embeddings_handler()) as server:
        spec = f"openai:hash-32@{server.url}/v1"
        r = DenseRetriever(DOCS, embedding_model=spec)
        assert r.embedding_model == spec and r.params()["dimension"] == 32
        assert r.retrieve_sync("roasted coffee beans", 1).documents[0].id == "coffee"
        # Inside a running event loop (as methods call it): no nested-loop error.
        results = await asyncio.gather(*(r.retrieve(q, 1) for q in ("green tea leaves", "chocolate cocoa pods")))
        assert [res.documents[0].id for res in results] == ["tea", "cocoa"]
        # Document embeddings are cached: a second index sends nothing.
        before = len(server.requests)
        DenseRetriever(DOCS, embedding_model=spec)
        assert len(server.requests) == before
        save_index(r, tmp_path / "idx")
        loaded = load_index(tmp_path / "idx", documents=DOCS, options={"embedding_model": spec})
        assert loaded.retrieve_sync("steamed tea", 1).documents[0].id == "tea"
        h = HybridRetriever(DOCS, embedding_model=spec)
        assert (await h.retrieve("coffee grinding", 1)).documents[0].id == "coffee"


def test_retryable_errors_are_retried_and_others_are_not(monkeypatch):
    failures = [(429, {"retry-after": "0"}), (503, {"retry-after": "0"})]
    with ScriptedHTTPServer(embeddings_handler(failures)) as server:
        enc = OpenAIEmbeddingEncoder("hash-32", base_url=f"{server.url}/v1")
        assert enc.encode(["tea"]).shape == (1, 32)
        assert len(server.requests) == 3
    with ScriptedHTTPServer(embeddings_handler([(400, {})])) as server:
        enc = OpenAIEmbeddingEncoder("hash-32", base_url=f"{server.url}/v1")
        with pytest.raises(BackendError, match="HTTP 400: scripted failure 400") as info:
            enc.encode(["tea"])
        assert "\n" not in str(info.value) and len(server.requests) == 1


def test_malformed_responses_are_backend_errors():
    def short(path, body, headers):
        return 200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}, {}

    with ScriptedHTTPServer(short) as server:
        enc = OpenAIEmbeddingEncoder("m", base_url=server.url)
        with pytest.raises(BackendError, match="expected 2 embeddings, got 1"):
            enc.encode(["a", "b"])


def test_api_key_stays_off_custom_servers_and_is_required_for_the_default_url(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-123")
    with ScriptedHTTPServer(embeddings_handler()) as server:
        create_encoder(f"openai:m@{server.url}/v1").encode(["x"])
        assert "authorization" not in server.requests[0][2]
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        create_encoder("openai:text-embedding-3-small")


def test_one_encoder_per_spec_per_process():
    assert get_encoder("openai:m@http://127.0.0.1:1/v1") is get_encoder("openai:m@http://127.0.0.1:1/v1/")
