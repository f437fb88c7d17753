"""The OpenAI-compatible backend against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import math

import pytest

from selfrag.errors import BackendError, ConfigError
from selfrag.llm import RetryPolicy, create_backend
from selfrag.llm.openai_compat import OpenAIBackend

from .helpers.servers import LlamaCppServer, ScriptedHTTPServer


def chat_reply(text: str, prompt_tokens: int = 7, completion_tokens: int = 2) -> dict:
    return {
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def fast_retry(attempts: int = 4) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.05)


@pytest.mark.server
async def test_429_then_200_retries_and_honours_retry_after():
    state = {"n": 0}

    def handler(path, body, headers):
        state["n"] += 1
        if state["n"] == 1:
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "0.2"}
        return 200, chat_reply("Paris"), {}

    sleeps: list[float] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("gpt-4o-mini", base_url=server.url, retry=fast_retry(), sleep=record_sleep)
        gen = await llm.generate([{"role": "user", "content": "capital of France?"}])
        await llm.aclose()
    assert gen.text == "Paris"
    assert state["n"] == 2
    assert sleeps == [pytest.approx(0.2)]  # the server's Retry-After, not our backoff
    assert gen.prompt_tokens == 7 and gen.completion_tokens == 2
    # A self-hosted server costs nothing even for a priced model name.
    assert gen.cost_usd == 0.0


@pytest.mark.server
async def test_always_500_gives_up_after_bounded_attempts_with_clear_error():
    calls = {"n": 0}

    def handler(path, body, headers):
        calls["n"] += 1
        return 500, {"error": {"message": "model crashed"}}, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("m", base_url=server.url, retry=fast_retry(3))
        with pytest.raises(BackendError) as info:
            await llm.generate([{"role": "user", "content": "hi"}])
        await llm.aclose()
    assert calls["n"] == 3
    message = str(info.value)
    assert "gave up after 3 attempts" in message
    assert "HTTP 500" in message and "model crashed" in message


@pytest.mark.server
async def test_non_retryable_error_surfaces_provider_message_at_once():
    calls = {"n": 0}

    def handler(path, body, headers):
        calls["n"] += 1
        return 400, {"error": {"message": "unknown model 'x'"}}, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("x", base_url=server.url, retry=fast_retry())
        with pytest.raises(BackendError, match="unknown model 'x'"):
            await llm.generate([{"role": "user", "content": "hi"}])
        await llm.aclose()
    assert calls["n"] == 1


@pytest.mark.server
async def test_request_shape_key_header_json_mode_and_logprob_parsing():
    def handler(path, body, headers):
        reply = chat_reply('{"ok": true}')
        reply["choices"][0]["logprobs"] = {
            "content": [
                {"token": "{", "logprob": -0.01, "top_logprobs": [{"token": "{", "logprob": -0.01}, {"token": "[", "logprob": -4.6}]},
            ]
        }
        return 200, reply, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("gpt-4o-mini", base_url=server.url, api_key="sk-test-secret")
        gen = await llm.generate(
            [{"role": "system", "content": "be terse"}, {"role": "user", "content": "json please"}],
            response_format="json",
            top_logprobs=2,
            stop=["\n\n"],
            max_tokens=12,
        )
        await llm.aclose()
        path, body, headers = server.requests[0]
    assert path == "/chat/completions"
    assert headers["authorization"] == "Bearer sk-test-secret"
    assert body["response_format"] == {"type": "json_object"}
    assert body["logprobs"] is True and body["top_logprobs"] == 2
    assert body["stop"] == ["\n\n"] and body["max_tokens"] == 12
    assert body["messages"][0] == {"role": "system", "content": "be terse"}
    assert gen.logprobs[0].token == "{"
    assert gen.logprobs[0].top == {"{": -0.01, "[": -4.6}


@pytest.mark.server
async def test_plain_string_prompt_uses_completions_endpoint():
    def handler(path, body, headers):
        return 200, {
            "choices": [{"text": "[Retrieval]", "finish_reason": "length",
                         "logprobs": {"tokens": ["[Retrieval]"], "token_logprobs": [-0.2],
                                      "top_logprobs": [{"[Retrieval]": -0.2, "[No Retrieval]": -1.7}]}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1},
        }, {}

    with ScriptedHTTPServer(handler) as server:
        llm = OpenAIBackend("selfrag", base_url=server.url)
        gen = await llm.generate("### Instruction:\nq\n\n### Response:\n", max_tokens=1, top_logprobs=2)
        await llm.aclose()
        path, body, _ = server.requests[0]
    assert path == "/completions"
    assert body["prompt"].startswith("### Instruction:") and body["logprobs"] == 2
    assert gen.text == "[Retrieval]"
    assert gen.logprobs[0].top["[No Retrieval]"] == -1.7


def test_missing_key_for_openai_api_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        create_backend("openai:gpt-4o-mini")


def test_local_base_url_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = create_backend("openai:qwen2.5:7b@http://127.0.0.1:11434/v1")
    assert llm.model == "qwen2.5:7b"
    assert llm.base_url == "http://127.0.0.1:11434/v1"
    assert llm.spec == "openai:qwen2.5:7b@http://127.0.0.1:11434/v1"


@pytest.mark.server
@pytest.mark.model
async def test_real_llama_cpp_server_chat_and_logprobs():
    """The backend against llama_cpp.server serving the embedded SmolLM2 GGUF."""
    from selfrag.llm.llamacpp import default_model_path

    with LlamaCppServer(str(default_model_path())) as server:
        llm = create_backend(f"openai:{server.alias}@{server.url}")
        gen = await llm.generate(
            [{"role": "user", "content": "Passage: Paris is the capital of France.\n"
                                         "Question: What is the capital of France? Answer in one word."}],
            max_tokens=24,
            top_logprobs=5,
        )
        await llm.aclose()
    assert "paris" in gen.text.lower()
    assert gen.prompt_tokens > 0 and gen.completion_tokens > 0
    assert gen.logprobs, "the server returned no log-probabilities"
    first = gen.logprobs[0]
    assert len(first.top) == 5  # exactly the alternatives asked for
    assert first.token in first.top and first.logprob == max(first.top.values())  # greedy picks the best
    total = sum(math.exp(lp) for lp in first.top.values())
    assert 0 < total <= 1.0001
