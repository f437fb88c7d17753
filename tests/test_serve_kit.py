"""What the serve tests share: documents, scripts, an app over a scripted backend, a held backend.

(A module of its own so every test_serve_* file builds servers the same way;
its own tests check the pieces.)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from selfrag.config import load_config
from selfrag.llm.base import LLMRequest, RequestGenerator
from selfrag.llm.scripted import ScriptedBackend
from selfrag.retrieval.registry import create_retriever
from selfrag.serve.answering import Answerer
from selfrag.serve.app import create_app
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits, ServeSettings
from selfrag.types import Document, Generation

QUESTION = "What is the capital of France?"
PARIS = "Paris is the capital of France. It lies on the river Seine."
BERLIN = "Berlin is the capital of Germany."
DOCS = [
    Document("paris", PARIS, "Paris"),
    Document("berlin", BERLIN, "Berlin"),
    Document("bananas", "Bananas are a yellow fruit.", "Bananas"),
]
# Keys are tried in order; the question is in every prompt, so it comes last.
SCRIPT: dict[str, Any] = {
    "Follow-up question:": QUESTION,  # a follow-up stands on its own already
    "checked in reference documents": "yes",
    PARIS: "Paris\n[IsRel] relevant\n[IsSup] fully supported",
    BERLIN: "Berlin\n[IsRel] relevant\n[IsSup] no support",
    "Answer: Paris": "3",
    "Answer: Berlin": "4",
    QUESTION: "Paris",
}
# Seed 000's pipeline and budget (1 + 2n calls): the question-only decision call, no joint candidate,
# no confidence reading.
SELF_RAG = {"retrieval": {"top_k": 2}, "self_rag": {"num_candidates": 2, "joint_passages": 0, "confidence": "off",
                                                  "retrieval_mode": "adaptive", "critic": "prompted"}}
LOCAL = ("127.0.0.1", 50000)


def make_answerer(llm: Any = None, *, method: str = "vanilla_rag", timeout_s: float = 30.0,
                  docs: list[Document] | None = DOCS, config: dict | None = None) -> Answerer:
    base = {"architecture": {"name": method}, "cache": {"enabled": False}, **(config or SELF_RAG)}
    cfg = load_config(None, base=base)
    retriever = create_retriever("bm25", docs) if docs else None
    return Answerer(cfg, llm if llm is not None else ScriptedBackend(SCRIPT), retriever, timeout_s=timeout_s)


def make_app(answerer: Answerer | None = None, *, limits: Limits | None = None, **settings: Any):
    settings.setdefault("limits", limits or Limits())
    return create_app(ServeSettings(**settings), answerer if answerer is not None else make_answerer())


def client(app, host: tuple[str, int] = LOCAL, **kwargs: Any) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1:8000", client=host, raise_server_exceptions=False, **kwargs)


class HeldBackend(RequestGenerator):
    """Answers "Paris" only once ``release`` is set; counts the calls waiting."""

    model = "held"
    spec = "held"
    supports_logprobs = False
    supports_json = False
    supports_raw_prompt = True
    decodes_serially = False

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = 0

    async def generate_request(self, request: LLMRequest) -> Generation:
        self.waiting += 1
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        finally:
            self.waiting -= 1
        return Generation(text="Paris", prompt_tokens=10, completion_tokens=1)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        pass


def test_the_kit_answers_through_a_test_client():
    with client(make_app()) as c:
        r = c.post("/v1/ask", json={"question": QUESTION})
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "Paris"


@pytest.mark.server
def test_the_background_server_listens_on_127_0_0_1_and_stops():
    with BackgroundServer(make_app()) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=2)
