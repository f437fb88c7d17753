"""`selfrag index build` over a folder that changed re-reads and re-embeds only the changed files."""

from __future__ import annotations

import json

import pytest

from selfrag.cli.main import main
from selfrag.ingest import loading
from selfrag.retrieval import load_index
from selfrag.retrieval.encoders import register_encoder
from tests.helpers.hashing import HashingEncoder

MODEL = "test-hashing-incremental"
ENCODER = HashingEncoder(name=MODEL)
register_encoder(ENCODER)


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in (("espresso", "Espresso is brewed at 93 degrees."), ("milk", "Steam milk to 60 degrees."),
                       ("cold_brew", "Cold brew keeps two weeks in the fridge.")):
        (folder / f"{name}.md").write_text(f"# {name}\n\n{text}\n")
    return folder


@pytest.fixture
def counted(monkeypatch):
    """Files parsed, by name (the embedding cache is off, so every embedded passage is encoded)."""
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", "off")
    parsed: list[str] = []
    original = loading.read_file
    monkeypatch.setattr(loading, "read_file", lambda path, *a, **k: parsed.append(path.name) or original(path, *a, **k))
    ENCODER.encoded.clear()
    return parsed


def build(capsys, notes, out, *extra):
    code = main(["index", "build", "--docs", str(notes), "--out", str(out), "--json", *map(str, extra)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid"])
def test_only_the_changed_file_is_read_and_embedded_again(tmp_path, notes, capsys, counted, retriever):
    out = tmp_path / "idx"
    flags = ["--retriever", retriever] + (["--embedding-model", MODEL] if retriever != "bm25" else [])
    first = build(capsys, notes, out, *flags)
    assert first["rebuild"] == {"files": 3, "read": 3, "unchanged": 0}
    assert sorted(counted) == ["cold_brew.md", "espresso.md", "milk.md"]
    assert len(ENCODER.encoded) == (3 if retriever != "bm25" else 0)
    assert first["sources"]["milk.md"]["passages"] == ["milk"]
    assert first["chunking"] == {"size": 200, "overlap": 20}

    counted.clear()
    ENCODER.encoded.clear()
    (notes / "milk.md").write_text("# milk\n\nSteam oat milk to 55 degrees.\n")
    second = build(capsys, notes, out, *flags)
    assert second["rebuild"] == {"files": 3, "read": 1, "unchanged": 2}
    assert counted == ["milk.md"]
    if retriever != "bm25":
        assert ENCODER.encoded == ["milk.md § milk\nSteam oat milk to 55 degrees."]
    assert second["sources"]["milk.md"]["sha256"] != first["sources"]["milk.md"]["sha256"]
    assert second["sources"]["espresso.md"] == first["sources"]["espresso.md"]
    index = load_index(out, options={"embedding_model": MODEL} if retriever != "bm25" else {})
    assert "Steam oat milk" in next(d.text for d in index.documents if d.id == "milk")

    # Rebuilt from scratch: the same index as the incremental one.
    fresh = build(capsys, notes, tmp_path / "fresh", *flags)
    assert fresh["corpus_checksum"] == second["corpus_checksum"]
    if retriever != "bm25":
        import numpy as np

        sub = "dense/" if retriever == "hybrid" else ""
        assert np.allclose(np.load(out / f"{sub}embeddings.npy"), np.load(tmp_path / "fresh" / f"{sub}embeddings.npy"))


def test_added_and_removed_files_and_new_chunk_settings(tmp_path, notes, capsys, counted):
    out = tmp_path / "idx"
    build(capsys, notes, out)
    counted.clear()
    (notes / "espresso.md").unlink()
    (notes / "grinder.md").write_text("# grinder\n\nGrind fine for espresso.\n")
    again = build(capsys, notes, out)
    assert counted == ["grinder.md"]
    assert sorted(again["sources"]) == ["cold_brew.md", "grinder.md", "milk.md"]
    assert again["document_count"] == 3
    counted.clear()
    other = build(capsys, notes, out, "--chunk-size", "50")
    assert other["rebuild"]["read"] == 3 and other["chunking"]["size"] == 50


def test_ask_with_the_index_uses_the_index_chunking(tmp_path, notes, capsys):
    out = tmp_path / "idx"
    script = tmp_path / "script.json"
    script.write_text('["two weeks"]')
    build(capsys, notes, out, "--chunk-size", "50")
    code = main(["ask", "How long does cold brew keep?", "--docs", str(notes), "--index", str(out),
                 "--method", "vanilla_rag", "--llm", f"scripted:{script}", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["sources"][0]["id"] == "cold_brew"
