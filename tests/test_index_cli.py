"""selfrag index build/info, --index on ask, eval-retrieval, and --retriever dense/hybrid on the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.data import demo_corpus_path
from selfrag.retrieval.encoders import DEFAULT_MODEL, register_encoder
from tests.helpers.hashing import HashingEncoder

HASH_MODEL = "test-hashing-cli"
register_encoder(HashingEncoder(name=HASH_MODEL))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))


@pytest.fixture
def docs_file(tmp_path: Path) -> Path:
    p = tmp_path / "docs.jsonl"
    rows = [
        {"id": "paris", "title": "Paris", "text": "Paris is the capital of France."},
        {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany."},
        {"id": "rome", "title": "Rome", "text": "Rome is the capital of Italy."},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def script(tmp_path: Path, responses) -> str:
    p = tmp_path / "script.json"
    p.write_text(json.dumps(responses))
    return f"scripted:{p}"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("selfrag: error: "), err
    return lines[0]


def test_build_info_and_ask_with_the_index(tmp_path, docs_file, capsys):
    idx = tmp_path / "idx"
    code, out, err = run_cli(capsys, "index", "build", "--docs", docs_file, "--out", idx)
    assert code == 0, err
    assert out.startswith("built bm25 index of 3 documents") and str(idx) in out
    code, out, _ = run_cli(capsys, "index", "info", idx, "--json")
    manifest = json.loads(out)
    assert manifest["retriever"] == "bm25" and manifest["document_count"] == 3
    assert manifest["source"] == str(docs_file.resolve()) and len(manifest["corpus_checksum"]) == 64
    code, out, _ = run_cli(capsys, "index", "info", idx)
    assert "retriever        bm25" in out
    code, out, err = run_cli(
        capsys, "ask", "capital of Italy?", "--index", idx, "--docs", docs_file, "--method", "vanilla_rag",
        "--llm", script(tmp_path, ["Rome"]), "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["answer"] == "Rome" and data["sources"][0]["id"] == "rome"


def test_a_stale_index_is_refused_with_the_rebuild_command(tmp_path, docs_file, capsys):
    idx = tmp_path / "idx"
    assert run_cli(capsys, "index", "build", "--docs", docs_file, "--out", idx)[0] == 0
    with docs_file.open("a") as fh:
        fh.write(json.dumps({"id": "madrid", "text": "Madrid is the capital of Spain."}) + "\n")
    code, _, err = run_cli(capsys, "ask", "q", "--index", idx, "--docs", docs_file, "--llm", script(tmp_path, ["x"]))
    line = one_line_error(err)
    assert code == 2 and "stale" in line
    assert f"selfrag index build --docs {docs_file.resolve()} --retriever bm25 --out {idx}" in line


def test_a_mismatched_retriever_or_model_is_refused(tmp_path, docs_file, capsys):
    idx = tmp_path / "idx"
    run_cli(capsys, "index", "build", "--docs", docs_file, "--out", idx, "--retriever", "dense", "--embedding-model", HASH_MODEL)
    code, _, err = run_cli(capsys, "ask", "q", "--index", idx, "--retriever", "bm25", "--llm", script(tmp_path, ["x"]))
    line = one_line_error(err)
    assert "built with retriever 'dense', not 'bm25'; use --retriever dense" in line
    other_model = tmp_path / "some-model-dir"
    other_model.mkdir()
    code, _, err = run_cli(
        capsys, "ask", "q", "--index", idx, "--set", f"retrieval.embedding_model={other_model}",
        "--llm", script(tmp_path, ["x"]),
    )
    line = one_line_error(err)
    assert f"built with embedding model '{HASH_MODEL}', not '{other_model}'" in line
    assert f"--embedding-model {other_model}" in line


def test_rebuilding_replaces_the_index_and_other_directories_are_left_alone(tmp_path, docs_file, capsys):
    idx = tmp_path / "idx"
    run_cli(capsys, "index", "build", "--docs", docs_file, "--out", idx)
    code, out, err = run_cli(
        capsys, "index", "build", "--docs", docs_file, "--out", idx,
        "--retriever", "hybrid", "--embedding-model", HASH_MODEL, "--fusion", "weighted", "--json",
    )
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["retriever"] == "hybrid" and manifest["embedding_model"] == HASH_MODEL
    assert manifest["params"]["fusion"] == "weighted"
    assert sorted(p.name for p in idx.iterdir()) == ["bm25", "dense", "hybrid.json", "manifest.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".idx")]  # no temporary leftovers
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    code, _, err = run_cli(capsys, "index", "build", "--docs", docs_file, "--out", precious)
    assert code == 2 and "not empty and is not a selfrag index" in one_line_error(err)
    assert (precious / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["index", "build", "--docs", "{docs}", "--out", "{tmp}/i", "--retriever", "splade"], "unknown retriever 'splade'"),
        (["index", "build", "--docs", "{tmp}/nothing.jsonl", "--out", "{tmp}/i"], "documents not found"),
        (["index", "build", "--docs", "{docs}", "--out", "{tmp}/i", "--retriever", "dense", "--embedding-model", "{tmp}/no-model"], "embedding model not found"),
        (["index", "build", "--docs", "{docs}", "--out", "{tmp}/i", "--rrf-k", "0"], "retrieval.rrf_k"),
        (["index", "info", "{tmp}"], "is not a selfrag index (no manifest.json)"),
        (["ask", "q", "--index", "{tmp}/missing", "--llm", "scripted:x.json"], "is not a selfrag index"),
        (["eval-retrieval", "--beir", "{tmp}"], "is not a BEIR folder"),
    ],
)
def test_errors_are_one_line(tmp_path, docs_file, capsys, argv, message):
    argv = [a.format(docs=docs_file, tmp=tmp_path) for a in argv]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in one_line_error(err)


def _tiny_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    corpus = [("d1", "apples are red"), ("d2", "bananas are yellow"), ("d3", "cherries are small and red")]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in corpus))
    queries = [("q1", "yellow bananas"), ("q2", "small cherries")]
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\r\nq1\td2\t1\r\nq2\td3\t1\r\n")
    return root


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid"])
def test_eval_retrieval_json_and_text(tmp_path, capsys, retriever):
    beir = _tiny_beir(tmp_path / "tiny")
    extra = ["--embedding-model", HASH_MODEL] if retriever != "bm25" else []
    code, out, err = run_cli(capsys, "eval-retrieval", "--beir", beir, "--retriever", retriever, *extra, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ndcg@10"] == pytest.approx(1.0) and data["recall@10"] == data["recall@100"] == 1.0
    assert data["index_seconds"] >= 0 and data["queries_per_second"] > 0
    assert data["retriever"] == retriever and data["num_queries"] == 2
    code, out, _ = run_cli(capsys, "eval-retrieval", "--beir", beir, "--retriever", retriever, *extra)
    assert "nDCG@10     1.0000" in out and "recall@100  1.0000" in out and "queries" in out


def test_eval_retrieval_on_a_saved_index(tmp_path, capsys):
    beir = _tiny_beir(tmp_path / "tiny")
    idx = tmp_path / "idx"
    run_cli(capsys, "index", "build", "--docs", beir / "corpus.jsonl", "--out", idx)
    code, out, err = run_cli(capsys, "eval-retrieval", "--beir", beir, "--index", idx, "--json")
    assert code == 0, err
    assert json.loads(out)["ndcg@10"] == pytest.approx(1.0)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d9", "text": "other"}) + "\n")
    code, _, err = run_cli(capsys, "eval-retrieval", "--beir", beir, "--index", idx)
    assert code == 2 and "stale" in one_line_error(err)


# -- the real model --------------------------------------------------------------------


@pytest.mark.dense
@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_ask_over_the_demo_corpus_with_dense_and_hybrid(tmp_path, capsys, retriever):
    code, out, err = run_cli(
        capsys, "ask", "Who discovered Uranus?", "--docs", demo_corpus_path(), "--retriever", retriever,
        "--method", "vanilla_rag", "--llm", script(tmp_path, ["William Herschel"]), "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["answer"] == "William Herschel" and data["sources"][0]["title"] == "Uranus"
    assert data["reasoning_chain"][0]["action"] == "retrieve"


@pytest.mark.dense
def test_dense_index_of_the_demo_corpus_is_loaded_by_ask(tmp_path, capsys):
    idx = tmp_path / "demo-dense"
    code, out, err = run_cli(capsys, "index", "build", "--docs", demo_corpus_path(), "--out", idx, "--retriever", "dense")
    assert code == 0, err
    assert f"model {DEFAULT_MODEL}" in out
    code, out, err = run_cli(
        capsys, "ask", "Who discovered Uranus?", "--index", idx, "--docs", demo_corpus_path(),
        "--method", "vanilla_rag", "--llm", script(tmp_path, ["Herschel"]), "--json",
    )
    assert code == 0, err
    assert json.loads(out)["sources"][0]["title"] == "Uranus"


@pytest.mark.dense
@pytest.mark.model
def test_vanilla_rag_with_hybrid_retrieval_on_the_embedded_model(capsys):
    code, out, err = run_cli(
        capsys, "ask", "Who discovered Uranus?", "--docs", demo_corpus_path(), "--retriever", "hybrid",
        "--method", "vanilla_rag", "--set", "llm.max_tokens=32", "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["answer"] and data["sources"][0]["title"] == "Uranus"


FULL_PATH_SCRIPT = Path(__file__).parent / "fixtures" / "full_path_script.json"


@pytest.mark.dense
@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_every_method_answers_over_the_demo_corpus_with_dense_and_hybrid(capsys, retriever):
    from selfrag.methods.factory import available_methods

    # The keyed script agrees with every critique, so each method takes its retrieval path.
    for method in available_methods():
        code, out, err = run_cli(
            capsys, "ask", "Who discovered Uranus?", "--docs", demo_corpus_path(), "--retriever", retriever,
            "--method", method, "--llm", f"scripted:{FULL_PATH_SCRIPT}", "--json",
        )
        assert code == 0, (method, err)
        data = json.loads(out)
        assert data["answer"].startswith("William Herschel"), (method, data["answer"])
        if method == "no_retrieval":
            assert data["num_retrieval_calls"] == 0
            continue
        assert data["num_retrieval_calls"] >= 1, method
        assert any(s["title"] == "Uranus" for s in data["sources"]), (method, data["sources"])
