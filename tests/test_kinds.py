"""The retriever and backend registries: one entry per kind, everything else read from its KIND.

The toy kinds below live in a module of their own plus one registry line each,
which is all that adding a retriever or a backend takes (docs/architecture.md,
"Adding a retriever or a backend").
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from selfrag.assemble import build_retriever, retriever_options
from selfrag.config import load_config
from selfrag.errors import ConfigError
from selfrag.kinds import Kinds
from selfrag.llm.factory import BACKENDS, create_backend, parse_spec, spec_help
from selfrag.retrieval import load_index, save_index
from selfrag.retrieval.persist import INDEX_FILES
from selfrag.retrieval.registry import RETRIEVERS, available_retrievers, create_retriever, get_kind
from selfrag.types import Document

DOCS = [
    Document(id="tea", title="Tea", text="green tea leaves are steamed"),
    Document(id="cocoa", title="Cocoa", text="cocoa pods hold beans"),
]

TOY_RETRIEVER = '''
import json
import time
from pathlib import Path

from selfrag.retrieval.base import RetrieverKind
from selfrag.retrieval.store import read_documents, write_documents
from selfrag.types import RetrievalResult


class ToyRetriever:
    """Counts shared words."""

    name = "toy"

    def __init__(self, documents=None, *, vector_store="auto"):
        self.vector_store = vector_store
        self._docs = []
        if documents is not None:
            self.index(documents)

    @property
    def documents(self):
        return self._docs

    def index(self, documents):
        self._docs = list(documents)

    async def retrieve(self, query, top_k):
        words = set(query.split())
        ranked = sorted(self._docs, key=lambda d: -len(words & set(d.text.split())))[:top_k]
        scores = tuple(float(len(words & set(d.text.split()))) for d in ranked)
        return RetrievalResult(documents=tuple(ranked), scores=scores, query=query, retrieval_time_ms=0.0, method=self.name)

    def params(self):
        return {"vector_store": self.vector_store}

    def save(self, path):
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        write_documents(out / "documents.jsonl", self._docs)
        (out / "toy.json").write_text(json.dumps(self.params()), encoding="utf-8")

    @classmethod
    def load(cls, path, *, vector_store=None):
        saved = json.loads((Path(path) / "toy.json").read_text(encoding="utf-8"))
        retriever = cls(vector_store=vector_store or saved["vector_store"])
        retriever.index(read_documents(Path(path) / "documents.jsonl"))
        return retriever


KIND = RetrieverKind(
    name="toy",
    build=ToyRetriever,
    load=ToyRetriever.load,
    files=frozenset({"documents.jsonl", "toy.json"}),
    options={"vector_store": "auto"},
    load_options=("vector_store",),
)
'''

TOY_BACKEND = '''
from selfrag.llm.base import BackendKind
from selfrag.llm.scripted import ScriptedBackend


def create(target, **settings):
    backend = ScriptedBackend([target], model="echo")
    backend.settings = settings
    return backend


KIND = BackendKind(name="echo", create=create, specs=("echo:TEXT",), settings=frozenset({"timeout", "n_ctx"}))
'''


@pytest.fixture
def toy_modules(tmp_path, monkeypatch):
    (tmp_path / "selfrag_toy_retriever.py").write_text(textwrap.dedent(TOY_RETRIEVER), encoding="utf-8")
    (tmp_path / "selfrag_toy_backend.py").write_text(textwrap.dedent(TOY_BACKEND), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    # The one registry line each kind adds.
    monkeypatch.setitem(RETRIEVERS.modules, "toy", "selfrag_toy_retriever")
    monkeypatch.setitem(BACKENDS.modules, "echo", "selfrag_toy_backend")
    yield
    for name in ("selfrag_toy_retriever", "selfrag_toy_backend"):
        sys.modules.pop(name, None)


def test_each_registered_kind_is_declared_by_its_module_under_its_name():
    assert available_retrievers() == ["bm25", "dense", "hybrid", "milvus"]
    for name in available_retrievers():
        kind = get_kind(name)
        assert kind.name == name and kind.build.name == name and kind.files == INDEX_FILES[name]
    assert [kind.name for kind in BACKENDS.all()] == ["llamacpp", "openai", "anthropic", "scripted"]
    assert spec_help() == (
        "llamacpp, llamacpp:PATH.gguf, openai:MODEL, openai:MODEL@BASE_URL, anthropic:MODEL, scripted:PATH.json"
    )


def test_config_options_are_routed_by_the_registry_entry():
    def opts(*overrides):
        return retriever_options(load_config(overrides=list(overrides)))

    assert opts("retrieval.method=bm25", "retrieval.vector_store=exact", "retrieval.fusion=weighted") == {}
    assert opts("retrieval.method=dense") == {}
    assert opts("retrieval.method=dense", "retrieval.vector_store=faiss", "retrieval.fusion=weighted") == {
        "vector_store": "faiss"
    }
    assert opts("retrieval.method=nope", "retrieval.vector_store=exact") == {}
    with pytest.raises(ConfigError, match=r"^unknown retriever 'nope'; use one of: bm25, dense, hybrid, milvus$"):
        create_retriever("nope")


def test_a_kinds_module_must_declare_the_name_it_is_registered_under(monkeypatch):
    kinds: Kinds = Kinds({"other": "selfrag.retrieval.bm25"})
    with pytest.raises(TypeError, match="named 'bm25', registered as 'other'"):
        kinds.find("other")
    assert kinds.find("missing") is None and kinds.find(["bm25"]) is None


def test_a_retriever_added_as_one_module_and_one_entry_builds_saves_and_loads(toy_modules, tmp_path):
    assert "toy" in available_retrievers()
    cfg = load_config(overrides=["retrieval.method=toy", "retrieval.vector_store=exact", "retrieval.fusion=weighted"])
    assert retriever_options(cfg) == {"vector_store": "exact"}
    retriever = build_retriever(cfg, DOCS)
    assert retriever.vector_store == "exact"
    assert asyncio.run(retriever.retrieve("green tea", 1)).documents[0].id == "tea"
    save_index(retriever, tmp_path / "idx")
    assert INDEX_FILES["toy"] == {"documents.jsonl", "toy.json"}
    loaded = load_index(tmp_path / "idx", documents=DOCS, expected_method="toy", options={"vector_store": "faiss"})
    assert loaded.vector_store == "faiss" and [d.id for d in loaded.documents] == ["tea", "cocoa"]
    again = build_retriever(load_config(overrides=["retrieval.method=toy", f"retrieval.index={tmp_path / 'idx'}"]), DOCS)
    assert again.vector_store == "exact"  # saved value: the config leaves it unset


def test_a_backend_added_as_one_module_and_one_entry_gets_only_the_settings_it_takes(toy_modules):
    backend = create_backend("echo:hello", timeout=7, api_key_env="NOPE", n_ctx=None, seed=3)
    assert backend.settings == {"timeout": 7}
    assert asyncio.run(backend.generate("hi")).text == "hello"
    assert "echo:TEXT" in spec_help()
    assert parse_spec("echo:a@http://x/v1") == ("echo", "a@http://x/v1", None)  # no base_url setting
    with pytest.raises(ConfigError, match=r"unknown LLM backend 'gemini:pro'; use one of: .*echo:TEXT$"):
        create_backend("gemini:pro")
