"""The Anthropic backend against a local HTTP server speaking the Messages API."""

from __future__ import annotations

import pytest

from selfrag.errors import BackendError, ConfigError
from selfrag.llm import RetryPolicy, create_backend
from selfrag.llm.anthropic import API_VERSION, AnthropicBackend

from .helpers.servers import ScriptedHTTPServer


def reply(text: str) -> dict:
    return {
        "model": "claude-3-5-haiku-20241022",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 200},
    }


@pytest.mark.server
async def test_messages_request_shape_usage_and_cost():
    with ScriptedHTTPServer(lambda p, b, h: (200, reply("Paris"), {})) as server:
        llm = AnthropicBackend("claude-3-5-haiku-latest", base_url=server.url, api_key="sk-ant-secret")
        gen = await llm.generate(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
            max_tokens=20,
            stop=["\n"],
        )
        await llm.aclose()
        path, body, headers = server.requests[0]
    assert path == "/messages"
    assert headers["x-api-key"] == "sk-ant-secret"
    assert headers["anthropic-version"] == API_VERSION
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "Capital of France?"}]
    assert body["max_tokens"] == 20 and body["stop_sequences"] == ["\n"]
    assert gen.text == "Paris"
    assert (gen.prompt_tokens, gen.completion_tokens) == (1000, 200)
    # claude-3-5-haiku list price: $0.80 / $4.00 per million tokens.
    assert gen.cost_usd == pytest.approx(1000 * 0.8e-6 + 200 * 4e-6)
    assert llm.supports_logprobs is False


@pytest.mark.server
async def test_overloaded_529_is_retried():
    state = {"n": 0}

    def handler(path, body, headers):
        state["n"] += 1
        if state["n"] < 3:
            return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}
        return 200, reply("ok"), {}

    async def no_sleep(_):
        return None

    with ScriptedHTTPServer(handler) as server:
        llm = AnthropicBackend("claude-x", base_url=server.url, retry=RetryPolicy(max_attempts=5), sleep=no_sleep)
        assert (await llm.generate([{"role": "user", "content": "hi"}])).text == "ok"
        await llm.aclose()
    assert state["n"] == 3


@pytest.mark.server
async def test_provider_error_message_surfaces():
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}
    with ScriptedHTTPServer(lambda p, b, h: (400, body, {})) as server:
        llm = AnthropicBackend("claude-x", base_url=server.url)
        with pytest.raises(BackendError, match="max_tokens: too large"):
            await llm.generate([{"role": "user", "content": "hi"}])
        await llm.aclose()


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        create_backend("anthropic:claude-3-5-haiku-latest")


def test_unknown_backend_names_the_valid_specs():
    with pytest.raises(ConfigError, match="unknown LLM backend 'gemini:pro'.*llamacpp"):
        create_backend("gemini:pro")
