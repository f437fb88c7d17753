"""Anthropic's Messages API.

Spec: ``anthropic:MODEL`` (key from ``ANTHROPIC_API_KEY``), or
``anthropic:MODEL@BASE_URL`` for a proxy or a local test server.
``ANTHROPIC_API_KEY`` goes only to api.anthropic.com; a key for another
server comes from the variable ``api_key_env`` names (``llm.api_key_env``),
see :mod:`selfrag.llm.credentials`. The API
returns no log-probabilities and has no JSON mode: critics that want either
fall back to text critique and say so in the trace.
"""

from __future__ import annotations

from typing import Any

from ..errors import BackendError, ConfigError
from ..types import Generation
from .base import HTTP_SETTINGS, BackendKind, LLMRequest
from .credentials import PROVIDERS
from .remote import HTTPBackend
from .replies import mapping, text, token_count

DEFAULT_BASE_URL = PROVIDERS["anthropic"].default_url
API_VERSION = "2023-06-01"


class AnthropicBackend(HTTPBackend):
    provider = "anthropic"
    api = PROVIDERS["anthropic"]
    supports_logprobs = False
    supports_json = False
    request_headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
    spec_forms = "anthropic:MODEL"

    async def _generate(self, request: LLMRequest) -> Generation:
        system_parts: list[str] = []
        messages: list[dict[str, str]] = []
        if request.prompt is not None:
            messages.append({"role": "user", "content": request.prompt})
        for m in request.messages or ():
            if m.role == "system":
                system_parts.append(m.content)
            else:
                messages.append({"role": m.role, "content": m.content})
        if not messages:
            raise ConfigError("anthropic needs at least one user message besides the system prompt")
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "temperature": request.temperature,
        }
        if system_parts:
            payload["system"] = "\n\n".join(system_parts)
        if request.stop:
            payload["stop_sequences"] = list(request.stop)
        data = await self._http.post_json("/messages", payload)
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise BackendError(f"{self.spec}: response has no content: {str(data)[:200]}", is_retryable=True)
        parts = [mapping(b, self.spec, f"content[{i}]") for i, b in enumerate(blocks)]
        reply = "".join(text(b.get("text"), self.spec, f"content[{i}].text") for i, b in enumerate(parts)
                        if b.get("type") == "text")
        usage = data.get("usage")
        return Generation(
            text=reply,
            prompt_tokens=token_count(usage, "input_tokens", self.spec),
            completion_tokens=token_count(usage, "output_tokens", self.spec),
            finish_reason=text(data.get("stop_reason"), self.spec, "stop_reason"),
            model=text(data.get("model"), self.spec, "model") or self.model,
        )


# The registry's entry (see selfrag.llm.factory).
KIND = BackendKind(
    name="anthropic",
    create=AnthropicBackend,
    specs=("anthropic:MODEL",),
    settings=HTTP_SETTINGS,
)
