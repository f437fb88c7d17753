"""Dense retrieval: model naming, offline loading, the embedding cache, FAISS, persistence."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from selfrag.errors import ConfigError, DataError
from selfrag.retrieval import (
    DenseRetriever,
    create_retriever,
    load_index,
    retriever_factory,
    save_index,
)
from selfrag.retrieval import dense as dense_module
from selfrag.retrieval.embedding_cache import EmbeddingCache, default_cache, encode_documents
from selfrag.retrieval.encoders import (
    DEFAULT_MODEL,
    bundled_model_dir,
    canonical_model_name,
    get_encoder,
    normalize_rows,
)
from selfrag.types import Document
from tests.helpers.hashing import HashingEncoder

DOCS = [
    Document(id="doctors", title="", text="Physicians and nurses treat patients in hospitals."),
    Document(id="cats", title="", text="A kitten is a young domestic feline."),
    Document(id="cars", title="", text="Automobiles need fuel, tyres and regular servicing."),
]


@pytest.fixture(autouse=True)
def cache_path(tmp_path, monkeypatch):
    path = tmp_path / "embeddings.db"
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(path))
    return path


# -- naming -----------------------------------------------------------------------


def test_default_model_aliases_and_bundled_directory():
    for alias in (None, "", "all-MiniLM-L6-v2", DEFAULT_MODEL):
        assert canonical_model_name(alias) == DEFAULT_MODEL
    model_dir = bundled_model_dir()
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "modules.json").is_file()
    assert canonical_model_name(str(model_dir)) == DEFAULT_MODEL


def test_paths_names_and_openai_specs(tmp_path):
    assert canonical_model_name(str(tmp_path)) == str(tmp_path.resolve())
    assert canonical_model_name("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"
    assert canonical_model_name("openai:text-embedding-3-small") == "openai:text-embedding-3-small"
    assert canonical_model_name("openai:m@https://api.openai.com/v1/") == "openai:m"
    assert canonical_model_name("openai:m@http://127.0.0.1:9/v1/") == "openai:m@http://127.0.0.1:9/v1"
    with pytest.raises(DataError, match="embedding model not found"):
        canonical_model_name(str(tmp_path / "no-such-model"))
    with pytest.raises(ConfigError, match="http"):
        canonical_model_name("openai:m@localhost")
    with pytest.raises(ConfigError, match="unknown vector_store"):
        DenseRetriever(vector_store="annoy")


def test_normalize_rows_keeps_zero_rows():
    out = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)


# -- the embedding cache ------------------------------------------------------------


def test_corpus_is_encoded_once_and_reused_from_disk(cache_path):
    enc = HashingEncoder()
    first = DenseRetriever(DOCS, encoder=enc)
    assert len(enc.encoded) == 3
    second = DenseRetriever(DOCS, encoder=enc)
    assert len(enc.encoded) == 3  # all from the cache
    np.testing.assert_array_equal(first.embeddings, second.embeddings)
    # Another process: a fresh connection to the same file.
    fresh = EmbeddingCache(cache_path)
    assert len(fresh) == 3
    assert set(fresh.get_many(enc.name, [DOCS[0].text, "never seen"])) == {0}


def test_duplicates_are_encoded_once_and_longest_texts_go_first():
    enc = HashingEncoder()
    texts = ["b", "a longer text", "b", "mid text"]
    out = encode_documents(enc, texts, cache=None, batch_size=2)
    assert enc.encoded == ["a longer text", "mid text", "b"]
    assert out.shape == (4, enc.dim)
    np.testing.assert_array_equal(out[0], out[2])


def test_cache_is_keyed_by_model(cache_path):
    a, b = HashingEncoder(name="model-a"), HashingEncoder(name="model-b")
    DenseRetriever(DOCS, encoder=a)
    DenseRetriever(DOCS, encoder=b)
    assert len(a.encoded) == len(b.encoded) == 3


def test_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", "off")
    assert default_cache() is None
    enc = HashingEncoder()
    DenseRetriever(DOCS, encoder=enc)
    DenseRetriever(DOCS, encoder=enc, cache=False)
    assert len(enc.encoded) == 6
    DenseRetriever(DOCS, encoder=enc, cache=tmp_path / "explicit.db")
    assert (tmp_path / "explicit.db").is_file()


def test_a_broken_cache_file_degrades_to_encoding(tmp_path, caplog):
    bad = tmp_path / "bad.db"
    bad.write_text("this is not sqlite")
    enc = HashingEncoder()
    r = DenseRetriever(DOCS, encoder=enc, cache=EmbeddingCache(bad))
    assert len(enc.encoded) == 3 and len(r.documents) == 3
    assert "embedding cache" in caplog.text


def test_progress_bar_on_stderr_for_long_jobs(capsys):
    enc = HashingEncoder()
    encode_documents(enc, [f"text {i}" for i in range(10)], batch_size=4, show_progress=True)
    assert "encoding (test-hashing-64)" in capsys.readouterr().err
    encode_documents(enc, ["short job"], batch_size=4)
    assert capsys.readouterr().err == ""


# -- search -------------------------------------------------------------------------


async def test_faiss_store_gives_the_exact_results(tmp_path):
    enc = HashingEncoder()
    docs = [Document(id=str(i), title="", text=f"word{i % 7} word{i % 5} item{i}") for i in range(40)]
    exact = DenseRetriever(docs, encoder=enc, vector_store="exact")
    flat = DenseRetriever(docs, encoder=enc, vector_store="faiss")
    assert flat._faiss is not None and exact._faiss is None
    for q in ("word3 word4", "item7", "word6 item12"):
        a, b = await exact.retrieve(q, 10), await flat.retrieve(q, 10)
        assert a.scores == pytest.approx(b.scores, abs=1e-6)
        for da, db, score in zip(a.documents, b.documents, a.scores, strict=True):
            # Same document, or two documents tied on score.
            assert da.id == db.id or a.scores.count(score) > 1 or abs(
                exact.scores_for_vector(enc.encode([q])[0])[int(db.id)] - score
            ) < 1e-6
    save_index(flat, tmp_path / "idx")
    assert (tmp_path / "idx" / "faiss.index").is_file()
    loaded = DenseRetriever.load(tmp_path / "idx", encoder=enc)
    assert loaded._faiss is not None
    for q in ("word3", "word6 item12"):
        a, b = await loaded.retrieve(q, 8), await flat.retrieve(q, 8)
        assert [d.id for d in a.documents] == [d.id for d in b.documents] and a.scores == b.scores


def test_auto_store_switches_to_faiss_for_large_collections(monkeypatch):
    monkeypatch.setattr(dense_module, "FAISS_THRESHOLD", 3)
    enc = HashingEncoder()
    assert DenseRetriever(DOCS[:2], encoder=enc)._faiss is None
    assert DenseRetriever(DOCS, encoder=enc)._faiss is not None


def test_index_built_with_another_dimension_is_refused(tmp_path):
    DenseRetriever(DOCS, encoder=HashingEncoder(dim=64)).save(tmp_path / "idx")
    other = DenseRetriever.load(tmp_path / "idx", encoder=HashingEncoder(dim=32))
    with pytest.raises(DataError, match="64.*another model|32 dimensions"):
        other.retrieve_sync("kitten", 1)


def test_not_an_index_and_damaged_index(tmp_path):
    with pytest.raises(DataError, match="not a saved dense index"):
        DenseRetriever.load(tmp_path)
    DenseRetriever(DOCS, encoder=HashingEncoder()).save(tmp_path / "idx")
    (tmp_path / "idx" / "embeddings.npy").write_bytes(b"garbage")
    with pytest.raises(DataError, match="embeddings.npy"):
        DenseRetriever.load(tmp_path / "idx", encoder=HashingEncoder())


@pytest.mark.dense
def test_a_per_question_factory_shares_one_encoder():
    build = retriever_factory("dense")
    a, b = build(DOCS[:2]), build(DOCS[1:])
    assert a.encoder is b.encoder is get_encoder(None)


# -- the real model (torch) -----------------------------------------------------------


@pytest.mark.dense
def test_bundled_model_gives_normalised_384_dimensional_embeddings():
    enc = get_encoder(None)
    vecs = enc.encode(["Paris is in France.", "", "x" * 5000])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert enc.encode([]).shape == (0, 384)


@pytest.mark.dense
async def test_dense_finds_meaning_without_shared_words():
    r = create_retriever("dense", DOCS)
    assert (await r.retrieve("Where do doctors work?", 1)).documents[0].id == "doctors"
    assert (await r.retrieve("baby cat", 1)).documents[0].id == "cats"
    assert r.params()["embedding_model"] == DEFAULT_MODEL and r.params()["dimension"] == 384


@pytest.mark.dense
def test_unknown_model_name_fails_offline_with_one_line():
    with pytest.raises(DataError, match="cannot load embedding model 'no-such-org/no-such-model' offline") as info:
        DenseRetriever(DOCS, embedding_model="no-such-org/no-such-model")
    assert "\n" not in str(info.value)


@pytest.mark.dense
def test_saved_index_records_the_model_and_loads_without_reencoding(tmp_path, cache_path):
    r = DenseRetriever(DOCS)
    save_index(r, tmp_path / "idx")
    manifest = (tmp_path / "idx" / "manifest.json").read_text()
    assert DEFAULT_MODEL in manifest
    with sqlite3.connect(cache_path) as conn:
        conn.execute("DELETE FROM embeddings")
    loaded = load_index(tmp_path / "idx", documents=DOCS, options={"embedding_model": "all-MiniLM-L6-v2"})
    np.testing.assert_array_equal(loaded.embeddings, r.embeddings)
    with pytest.raises(DataError, match="built with embedding model .*rebuild it: selfrag index build"):
        load_index(tmp_path / "idx", options={"embedding_model": str(tmp_path)})
