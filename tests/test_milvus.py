"""The milvus retriever: a build killed with SIGKILL resumes without duplicates, metadata filters,
an index built and answered from on the command line.

Each test runs on embedded Milvus Lite, and again on a Milvus server when
``SELFRAG_MILVUS_URI`` (e.g. http://127.0.0.1:19530) is set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pymilvus", reason="the milvus extra is not installed: pip install 'selfrag[milvus]'")
pytest.importorskip("milvus_lite", reason="Milvus Lite is not installed: pip install 'selfrag[milvus]'")

from selfrag.cli.main import main  # noqa: E402
from selfrag.errors import ConfigError, DataError  # noqa: E402
from selfrag.retrieval import load_index, save_index  # noqa: E402
from selfrag.retrieval.dense import document_text  # noqa: E402
from selfrag.retrieval.encoders import register_encoder  # noqa: E402
from selfrag.retrieval.milvus import MilvusRetriever  # noqa: E402
from selfrag.retrieval.milvus_store import connect, row_count  # noqa: E402
from selfrag.types import Document  # noqa: E402
from tests.conftest import wait_for  # noqa: E402
from tests.helpers.hashing import HashingEncoder  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "test-hashing-milvus-cli"
register_encoder(HashingEncoder(name=MODEL))
SERVER = os.environ.get("SELFRAG_MILVUS_URI")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))


@pytest.fixture(params=["lite", "server"])
def target(request, tmp_path):
    """Where a test's collection lives: (uri, collection); a server collection is dropped afterwards."""
    if request.param == "lite":
        yield str(tmp_path / "corpus.db"), "selfrag"
        return
    if not SERVER:
        pytest.skip("set SELFRAG_MILVUS_URI=http://HOST:19530 to run this against a Milvus server")
    name = f"selfrag_test_{uuid.uuid4().hex[:10]}"
    yield SERVER, name
    client = connect(SERVER)
    if client.has_collection(name):
        client.drop_collection(name)


def corpus(n: int) -> list[Document]:
    topics = ["planets", "rivers", "mountains", "oceans", "forests"]
    return [
        Document(id=f"doc{i}", title=f"Note {i}", text=f"Passage {i} about {topics[i % 5]} and item{i}.",
                 metadata={"source": f"{topics[i % 5]}.md", "section": f"part{i % 3}", "year": 2000 + i % 30})
        for i in range(n)
    ]


# The indexer run in a child process: a hashing encoder that records every document it embeds
# (so the test knows when to kill it) and takes a moment per batch.
CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from selfrag.retrieval.encoders import register_encoder
    from selfrag.retrieval.milvus import MilvusRetriever
    from selfrag.types import Document
    from tests.helpers.hashing import HashingEncoder

    class Recording(HashingEncoder):
        def encode(self, texts, *, query=False):
            out = super().encode(texts, query=query)
            with open(sys.argv[1], "a") as fh:
                fh.write(f"{len(texts)}\\n")
            time.sleep(0.05)
            return out

    docs = [Document(**row) for row in json.loads(Path(sys.argv[2]).read_text())]
    MilvusRetriever(docs, encoder=Recording(name="test-hashing-milvus-kill"), uri=sys.argv[3] or None,
                    collection=sys.argv[4], build_dir=sys.argv[5], batch_size=40, cache=False)
    print("finished")
""")


def test_a_build_killed_with_sigkill_resumes_without_duplicates(tmp_path, target):
    uri, collection = target
    if uri.endswith(".db"):
        uri = ""  # the default: Milvus Lite in the build folder, as `selfrag index build` keeps it
    docs = corpus(600)
    (tmp_path / "docs.json").write_text(json.dumps([d.__dict__ for d in docs]))
    embedded = tmp_path / "embedded.log"
    build = tmp_path / ".idx.milvus-build"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(embedded), str(tmp_path / "docs.json"), uri, collection, str(build)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )

    def embedded_docs() -> int:
        return sum(int(n) for n in embedded.read_text().split()) if embedded.exists() else 0

    try:
        assert wait_for(lambda: embedded_docs() >= 200, timeout=120), child.stderr.read().decode()[-2000:]
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    done_before = embedded_docs() - 1  # the first call embeds one document to learn the dimension
    assert done_before < len(docs)

    encoder = HashingEncoder(name="test-hashing-milvus-kill")
    register_encoder(encoder)
    resumed = MilvusRetriever(docs, encoder=encoder, uri=uri or None, collection=collection, build_dir=build,
                              batch_size=40, cache=False)
    # The documents inserted before the kill were neither embedded nor inserted again: at most the
    # batch in flight when it died is redone.
    assert len(encoder.encoded) - 1 <= len(docs) - done_before + 40
    assert len(encoder.encoded) - 1 < len(docs) - 150
    client = resumed.client
    assert row_count(client, collection) == len(docs)
    rows = client.query(collection, filter="pk >= 0", output_fields=["pk", "doc_id"], limit=len(docs) + 10)
    assert sorted(r["doc_id"] for r in rows) == sorted(d.id for d in docs)  # each exactly once
    assert sorted(r["pk"] for r in rows) == list(range(len(docs)))

    out = save_index(resumed, tmp_path / "idx")
    loaded = load_index(out, documents=docs, expected_method="milvus")
    assert [d.id for d in loaded.documents] == [d.id for d in docs]
    assert not build.exists()  # the build folder moved into the index


async def test_filters_by_metadata(target):
    uri, collection = target
    docs = corpus(60)
    encoder = HashingEncoder(name="test-hashing-milvus-filter")
    retriever = MilvusRetriever(docs, encoder=encoder, uri=uri, collection=collection, search="hybrid")
    query = "passage about rivers"
    assert {d.metadata["source"] for d in (await retriever.retrieve(query, 20)).documents} != {"rivers.md"}

    retriever.filter = 'source == "rivers.md"'
    found = (await retriever.retrieve(query, 20)).documents
    assert len(found) == 12 and {d.metadata["source"] for d in found} == {"rivers.md"}

    retriever.filter = 'section in ["part1", "part2"] and metadata["year"] >= 2020'
    found = (await retriever.retrieve(query, 60)).documents
    want = {d.id for d in docs if d.metadata["section"] != "part0" and d.metadata["year"] >= 2020}
    assert found and {d.id for d in found} == want

    retriever.filter = "no_such_field == 1"
    with pytest.raises(ConfigError, match=r"^retrieval.filter 'no_such_field == 1': .*no_such_field[^\n]*$"):
        await retriever.retrieve(query, 5)


def test_indexing_again_inserts_only_what_changed(target):
    uri, collection = target
    docs = corpus(50)
    MilvusRetriever(docs, encoder=HashingEncoder(name="test-hashing-milvus-sync"), uri=uri, collection=collection,
                    cache=False)
    changed = [*docs[:40], Document(id="new", title="New", text="A new passage about deserts.")]
    encoder = HashingEncoder(name="test-hashing-milvus-sync")
    again = MilvusRetriever(changed, encoder=encoder, uri=uri, collection=collection, cache=False)
    # The first document once, for the vectors' size, and the one new document.
    assert encoder.encoded == [document_text(docs[0]), "New\nA new passage about deserts."]
    client = again.client
    assert row_count(client, collection) == 41
    assert {r["doc_id"] for r in client.query(collection, filter="pk >= 40", output_fields=["doc_id"])} == {"new"}


def test_another_embedding_model_is_refused(target):
    uri, collection = target
    MilvusRetriever(corpus(5), encoder=HashingEncoder(name="test-hashing-milvus-a"), uri=uri, collection=collection)
    with pytest.raises(DataError, match="built with embedding model 'test-hashing-milvus-a'"):
        MilvusRetriever(corpus(5), encoder=HashingEncoder(name="test-hashing-milvus-b"), uri=uri, collection=collection)


def test_a_local_database_open_in_another_process_is_a_clear_error(tmp_path):
    docs = corpus(5)
    path = tmp_path / "shared.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from selfrag.retrieval.milvus_store import connect; "
         "connect(sys.argv[1]); print('open', flush=True); time.sleep(60)", str(path)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(DataError, match="open in another process.*milvus-lite server --data-dir"):
            MilvusRetriever(docs, encoder=HashingEncoder(name="test-hashing-milvus-lock"), uri=str(path))
    finally:
        holder.kill()
        holder.wait()


def test_index_build_and_ask_on_the_command_line(tmp_path, capsys, target):
    uri, collection = target
    docs = tmp_path / "docs.jsonl"
    rows = [
        {"id": "paris", "title": "Paris", "text": "Paris is the capital of France.", "metadata": {"section": "eu"}},
        {"id": "tokyo", "title": "Tokyo", "text": "Tokyo is the capital of Japan.", "metadata": {"section": "asia"}},
        {"id": "rome", "title": "Rome", "text": "Rome is the capital of Italy.", "metadata": {"section": "eu"}},
    ]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    idx = tmp_path / "idx"
    server = [] if uri.endswith(".db") else ["--uri", uri, "--collection", collection]
    for _ in range(2):  # a second build replaces the first
        code = main(["index", "build", "--docs", str(docs), "--retriever", "milvus", "--search", "hybrid",
                     "--embedding-model", MODEL, "--out", str(idx), "--quiet", *server])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out.startswith("built milvus index of 3 documents")
    assert not (tmp_path / ".idx.milvus-build").exists()
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["params"]["search"] == "hybrid"
    assert (any(f.startswith("milvus.db/") for f in manifest["files"])) == (not server)

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"capital of Japan": "Tokyo [1]"}))
    code = main(["ask", "What is the capital of Japan?", "--index", str(idx), "--llm", f"scripted:{script}",
                 "--method", "vanilla_rag", "--top-k", "2", "--json", "--set", 'retrieval.filter=section == "asia"'])
    out, err = capsys.readouterr()
    assert code == 0, err
    answer = json.loads(out)
    assert answer["answer"].startswith("Tokyo")
    assert [p["id"] for p in answer["sources"]] == ["tokyo"]
    # The index stays valid after being used: its checksums still hold.
    assert load_index(idx, expected_method="milvus").documents[0].id == "paris"
