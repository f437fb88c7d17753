"""Shared fixtures. Logic is tested through the scripted backend; the real
embedded model, real HTTP servers, real SQLite and real files where they matter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from selfrag.types import Document, RetrievalResult

# Model tests prove in a child process that llama.cpp decodes here before they run.
pytest_plugins = ["pytester", "tests.helpers.model_guard"]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()


class StaticRetriever:
    """Returns a fixed result for every query and counts the calls (like a mock)."""

    name = "static"

    def __init__(self, result: RetrievalResult) -> None:
        self.result = result
        self.calls: list[tuple[str, int]] = []

    @property
    def documents(self):
        return self.result.documents

    def index(self, documents):  # pragma: no cover - not used
        raise NotImplementedError

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        self.calls.append((query, top_k))
        return self.result

    def save(self, path):  # pragma: no cover - not used
        raise NotImplementedError


class KeyedRetriever:
    """Returns the documents a table lists for a query (exact text), best first; records every call."""

    name = "keyed"

    def __init__(self, docs: dict[str, Document], table: dict[str, list[str]]) -> None:
        self.docs = docs
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult:
        self.calls.append((query, top_k))
        ids = self.table.get(query, [])[:top_k]
        return RetrievalResult(
            documents=tuple(self.docs[i] for i in ids),
            scores=tuple(10.0 - n for n in range(len(ids))),
            query=query,
            method="keyed",
        )


@pytest.fixture
def static_retriever_factory():
    return StaticRetriever


@pytest.fixture
def france_docs() -> list[Document]:
    return [
        Document(id="1", title="Doc A", text="Paris is the capital of France."),
        Document(id="2", title="Doc B", text="France is in Europe."),
        Document(id="3", title="Doc C", text="Berlin is the capital of Germany."),
    ]


@pytest.fixture
def france_retriever(france_docs) -> StaticRetriever:
    return StaticRetriever(
        RetrievalResult(
            documents=tuple(france_docs),
            scores=(0.9, 0.85, 0.7),
            query="capital of France",
            retrieval_time_ms=10.0,
            method="bm25",
        )
    )


@pytest.fixture(scope="session")
def embedded_llm():
    """The real embedded SmolLM2 model, loaded once per test session."""
    from selfrag.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(n_ctx=2048)
    backend.warm_up()
    return backend


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip when it is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


@pytest.fixture(autouse=True)
def _calibration_kept_per_test(tmp_path_factory, monkeypatch):
    """Each test keeps the retrieval decision's calibration in its own file (never in the repository's
    .selfrag/), so one test's calibration is not another's."""
    monkeypatch.setenv("SELFRAG_CALIBRATION_CACHE", str(tmp_path_factory.mktemp("calibration") / "calibration.json"))


@pytest.fixture(autouse=True)
def _critic_fits_per_test(tmp_path_factory, monkeypatch):
    """Each test looks for fitted critics in its own empty folder (never the user's cache), so only the
    fits shipped in the package, or those a test writes, are found."""
    from selfrag.methods.critique.fits import forget

    monkeypatch.setenv("SELFRAG_CRITIC_DIR", str(tmp_path_factory.mktemp("critics")))
    forget()
    yield
    forget()


@pytest.fixture(autouse=True)
def _routers_per_test(tmp_path_factory, monkeypatch):
    """Each test looks for adaptive_rag's fitted routers in its own empty folder (never the user's cache), and
    looks again: the packaged rule's one warning per model is each test's own."""
    from selfrag.methods.catalog.adaptive_rag import forget

    monkeypatch.setenv("SELFRAG_ROUTER_DIR", str(tmp_path_factory.mktemp("routers")))
    forget()
    yield
    forget()
