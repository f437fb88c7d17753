"""The official ``openai`` client, unchanged, against a real server on 127.0.0.1 with a scripted backend."""

from __future__ import annotations

import pytest

from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits

from .conftest import wait_for
from .test_serve_kit import QUESTION, HeldBackend, make_answerer, make_app

openai = pytest.importorskip("openai", reason="the openai client is in the `dev` extra")

pytestmark = pytest.mark.server
KEY = "test-key-123456"


@pytest.fixture(scope="module")
def server():
    with BackgroundServer(make_app(make_answerer(method="self_rag"), api_key=KEY)) as s:
        yield s


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=30)


def test_a_completion_through_the_openai_client(client):
    r = client.chat.completions.create(model="self_rag", messages=[{"role": "user", "content": QUESTION}])
    message = r.choices[0].message
    assert message.content == "Paris [1]" and message.role == "assistant"  # the marker of the passage it cites
    assert r.choices[0].finish_reason == "stop" and r.model == "self_rag"
    extra = r.model_extra["selfrag"]
    assert extra["num_llm_calls"] == 5 and extra["view"]["selected"] == 0
    assert r.usage.total_tokens == extra["total_tokens"] > 0
    assert [c["id"] for c in message.model_extra["citations"]][0] == "paris"


def test_a_stream_through_the_openai_client(client):
    stream = client.chat.completions.create(
        model="vanilla_rag", messages=[{"role": "user", "content": QUESTION}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Paris\n[1]"  # streamed as written, then its marker on a line of its own (as ask prints it)
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert last.choices[0].finish_reason == "stop" and last.model_extra["selfrag"]["method"] == "vanilla_rag"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_the_method_list_is_the_model_list(client):
    ids = [m.id for m in client.models.list()]
    assert "self_rag" in ids and "vanilla_rag" in ids


def test_refusals_arrive_as_the_clients_own_errors(server, client):
    with pytest.raises(openai.NotFoundError, match="unknown method"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    with pytest.raises(openai.BadRequestError, match="role 'user'"):
        client.chat.completions.create(model="self_rag", messages=[{"role": "system", "content": "x"}])
    wrong = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="self_rag", messages=[{"role": "user", "content": QUESTION}])


def test_a_full_server_is_a_rate_limit_error_for_the_client():
    held = HeldBackend()
    app = make_app(make_answerer(held), limits=Limits(max_concurrent=1))
    with BackgroundServer(app) as s:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="local", max_retries=0, timeout=30)
        stream = c.chat.completions.create(model="vanilla_rag", stream=True,
                                           messages=[{"role": "user", "content": QUESTION}])
        chunks = iter(stream)
        assert next(chunks).choices[0].delta.role == "assistant"
        assert wait_for(lambda: held.waiting == 1)
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(model="vanilla_rag", messages=[{"role": "user", "content": QUESTION}])
        held.release.set()
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "Paris\n[1]"
