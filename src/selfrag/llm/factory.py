"""Build a backend from a spec string.

=============================  =============================================
spec                           backend
=============================  =============================================
(none) or ``llamacpp``         embedded SmolLM2-135M-Instruct via llama.cpp
``llamacpp:PATH``              any GGUF file via llama.cpp
``openai:MODEL``               OpenAI (key from ``OPENAI_API_KEY``)
``openai:MODEL@BASE_URL``      any OpenAI-compatible server
``anthropic:MODEL``            Anthropic Messages API (``ANTHROPIC_API_KEY``)
``scripted:PATH``              replay a JSON script (tests, dry runs)
=============================  =============================================

``api_key_env`` names the environment variable whose value is sent as the
key to a server other than the provider's own (see :mod:`.credentials`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import RetryPolicy
from .cache import CachedBackend
from .pricing import Pricing

SPEC_HELP = (
    "llamacpp, llamacpp:PATH.gguf, openai:MODEL, openai:MODEL@BASE_URL, "
    "anthropic:MODEL, scripted:PATH.json"
)
_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")
# Options that only the in-process backend understands.
LOCAL_OPTIONS = {"n_ctx", "n_threads", "n_batch", "seed"}


def parse_spec(spec: str | None) -> tuple[str, str, str | None]:
    """Split a spec into (provider, target, base_url)."""
    spec = (spec or "llamacpp").strip()
    provider, _, rest = spec.partition(":")
    provider = provider.lower()
    if provider in ("openai", "anthropic"):
        m = _URL.match(rest)
        if m:
            return provider, m["model"], m["url"]
        return provider, rest, None
    return provider, rest, None


def create_backend(
    spec: str | None = None,
    *,
    pricing: Pricing | dict[str, float] | None = None,
    retry: RetryPolicy | None = None,
    cache_path: str | Path | None = None,
    timeout: float = 120.0,
    api_key_env: str | None = None,
    **options: Any,
):
    """Create the backend a spec names, optionally wrapped in the SQLite cache."""
    provider, target, base_url = parse_spec(spec)
    if isinstance(pricing, dict):
        pricing = Pricing(**pricing)
    common: dict[str, Any] = {"pricing": pricing, "retry": retry}
    if provider == "llamacpp":
        from .llamacpp import LlamaCppBackend

        local = {k: v for k, v in options.items() if k in LOCAL_OPTIONS and v is not None}
        backend = LlamaCppBackend(target or None, **local, **common)
    elif provider == "openai":
        from .openai_compat import OpenAIBackend

        backend = OpenAIBackend(target, base_url=base_url, api_key_env=api_key_env, timeout=timeout, **common)
    elif provider == "anthropic":
        from .anthropic import AnthropicBackend

        backend = AnthropicBackend(target, base_url=base_url, api_key_env=api_key_env, timeout=timeout, **common)
    elif provider == "scripted":
        from .scripted import ScriptedBackend

        if not target:
            raise ConfigError("scripted backend needs a file: scripted:PATH.json")
        backend = ScriptedBackend.from_file(target)
    else:
        raise ConfigError(f"unknown LLM backend {spec!r}; use one of: {SPEC_HELP}")
    if cache_path:
        return CachedBackend(backend, cache_path)
    return backend
