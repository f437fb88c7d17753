"""Any OpenAI-compatible server: OpenAI itself, vLLM, llama.cpp's server, Ollama.

Spec: ``openai:MODEL`` (https://api.openai.com/v1, key from ``OPENAI_API_KEY``)
or ``openai:MODEL@BASE_URL``. ``OPENAI_API_KEY`` goes only to api.openai.com;
a key for another server comes from the variable ``api_key_env`` names
(``llm.api_key_env``), see :mod:`selfrag.llm.credentials`.
Chat messages go to ``/chat/completions``; a plain-string prompt goes to
``/completions`` so fine-tuned models get their own prompt format untouched.
"""

from __future__ import annotations

from typing import Any

from ..errors import BackendError
from ..types import Generation, TokenLogprobs
from .base import HTTP_SETTINGS, BackendKind, LLMRequest
from .credentials import PROVIDERS, Credentials
from .pricing import Pricing, lookup_pricing
from .remote import HTTPBackend
from .replies import mapping, parsed, text, token_count

DEFAULT_BASE_URL = PROVIDERS["openai"].default_url
_COMPLETION_TOKENS_MODELS = ("o1", "o3", "o4", "gpt-5")


class OpenAIBackend(HTTPBackend):
    provider = "openai"
    api = PROVIDERS["openai"]
    supports_logprobs = True
    supports_json = True
    supports_raw_prompt = True
    spec_forms = "openai:MODEL or openai:MODEL@BASE_URL"
    missing_key_hint = " (or point at a local server with openai:MODEL@http://127.0.0.1:8000/v1)"

    def list_pricing(self, model: str, creds: Credentials) -> Pricing:
        # A self-hosted server (a local base URL) costs nothing.
        return lookup_pricing("openai", model, None if creds.is_default_url else creds.base_url)

    async def _generate(self, request: LLMRequest) -> Generation:
        if request.prompt is not None:
            return await self._complete(request)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages or ()],
            "temperature": request.temperature,
        }
        if self.model.startswith(_COMPLETION_TOKENS_MODELS):
            payload["max_completion_tokens"] = request.max_tokens
        else:
            payload["max_tokens"] = request.max_tokens
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.top_logprobs:
            payload["logprobs"] = True
            payload["top_logprobs"] = request.top_logprobs
        if request.response_format == "json":
            payload["response_format"] = {"type": "json_object"}
        data = await self._http.post_json("/chat/completions", payload)
        choice = _first_choice(data, self.spec)
        message = mapping(choice.get("message"), self.spec, "choices[0].message")
        logprobs = None
        if request.top_logprobs:
            logprobs = parsed(_chat_logprobs, choice.get("logprobs"), self.spec, "choices[0].logprobs")
        return self._generation(data, choice, text(message.get("content"), self.spec, "choices[0].message.content"),
                                logprobs)

    def _generation(
        self, data: dict[str, Any], choice: dict[str, Any], reply: str, logprobs: tuple[TokenLogprobs, ...] | None,
    ) -> Generation:
        usage = data.get("usage")
        return Generation(
            text=reply,
            prompt_tokens=token_count(usage, "prompt_tokens", self.spec),
            completion_tokens=token_count(usage, "completion_tokens", self.spec),
            finish_reason=text(choice.get("finish_reason"), self.spec, "choices[0].finish_reason"),
            model=text(data.get("model"), self.spec, "model") or self.model,
            logprobs=logprobs,
        )

    async def _complete(self, request: LLMRequest) -> Generation:
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": request.prompt,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.top_logprobs:
            payload["logprobs"] = request.top_logprobs
        data = await self._http.post_json("/completions", payload)
        choice = _first_choice(data, self.spec)
        logprobs = None
        if request.top_logprobs:
            logprobs = parsed(_completion_logprobs, choice.get("logprobs"), self.spec, "choices[0].logprobs")
        return self._generation(data, choice, text(choice.get("text"), self.spec, "choices[0].text"), logprobs)


def _first_choice(data: dict[str, Any], label: str) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BackendError(f"{label}: response has no choices: {str(data)[:200]}", is_retryable=True)
    return choices[0]


def _chat_logprobs(raw: Any) -> tuple[TokenLogprobs, ...] | None:
    """Parse ``choices[0].logprobs.content`` of a chat completion."""
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
        return None
    out = []
    for item in raw["content"]:
        if not isinstance(item, dict):
            continue
        top = {}
        for alt in item.get("top_logprobs") or []:
            if isinstance(alt, dict) and "token" in alt and alt.get("logprob") is not None:
                top.setdefault(str(alt["token"]), float(alt["logprob"]))
        token = str(item.get("token", ""))
        logprob = float(item.get("logprob") if item.get("logprob") is not None else 0.0)
        top.setdefault(token, logprob)
        out.append(TokenLogprobs(token=token, logprob=logprob, top=top))
    return tuple(out)


def _completion_logprobs(raw: Any) -> tuple[TokenLogprobs, ...] | None:
    """Parse the legacy ``choices[0].logprobs`` of a text completion."""
    if not isinstance(raw, dict):
        return None
    tokens = raw.get("tokens") or []
    token_lps = raw.get("token_logprobs") or []
    tops = raw.get("top_logprobs") or []
    out = []
    for i, token in enumerate(tokens):
        lp = token_lps[i] if i < len(token_lps) and token_lps[i] is not None else 0.0
        top_raw = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        top = {str(t): float(v) for t, v in top_raw.items() if v is not None}
        top.setdefault(str(token), float(lp))
        out.append(TokenLogprobs(token=str(token), logprob=float(lp), top=top))
    return tuple(out)


# The registry's entry (see selfrag.llm.factory).
KIND = BackendKind(
    name="openai",
    create=OpenAIBackend,
    specs=("openai:MODEL", "openai:MODEL@BASE_URL"),
    settings=HTTP_SETTINGS,
)
