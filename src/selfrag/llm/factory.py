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
from ..kinds import Kinds
from ..redaction import redact_url_credentials
from .base import BackendKind, RetryPolicy
from .cache import cached
from .pricing import Pricing

# name (the spec's prefix) -> the module that declares its KIND (imported on first use).
# Adding a backend is writing its module and adding its line here.
BACKENDS: Kinds[BackendKind] = Kinds(
    {
        "llamacpp": "selfrag.llm.llamacpp",
        "openai": "selfrag.llm.openai_compat",
        "anthropic": "selfrag.llm.anthropic",
        "scripted": "selfrag.llm.scripted",
    }
)
_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def spec_help() -> str:
    """Every spec form the registered backends accept, for help and errors."""
    return ", ".join(form for kind in BACKENDS.all() for form in kind.specs)


def parse_spec(spec: str | None) -> tuple[str, str, str | None]:
    """Split a spec into (provider, target, base_url); only backends that take a base URL have one."""
    spec = (spec or "llamacpp").strip()
    provider, _, rest = spec.partition(":")
    provider = provider.lower()
    kind = BACKENDS.find(provider)
    if kind is not None and "base_url" in kind.settings:
        m = _URL.match(rest)
        if m:
            return provider, m["model"], m["url"]
        model, at, server = rest.rpartition("@")
        if at and not model.strip():
            raise ConfigError(f"{provider} spec has no model name before '@'; give {provider}:MODEL@URL")
        if at:
            # MODEL@SERVER whose server is not an http(s) URL: name it, rather than send the
            # whole text as a model name to the provider's own API (and ask for its key). Only
            # what follows the last '@' is shown: what comes before may hold a password.
            raise ConfigError(
                f"{provider} spec: {redact_url_credentials(server)!r} after '@' is not an http(s) URL; "
                f"give {provider}:MODEL@http(s)://HOST[:PORT]/v1"
            )
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
    """Create the backend a spec names, optionally wrapped in the SQLite cache.

    Each backend is given the settings and ``options`` (``n_ctx``, ...) its
    registry entry takes; options that are None are left out.
    """
    provider, target, base_url = parse_spec(spec)
    if isinstance(pricing, dict):
        pricing = Pricing(**pricing)
    kind = BACKENDS.find(provider)
    if kind is None:
        raise ConfigError(f"unknown LLM backend {spec!r}; use one of: {spec_help()}")
    given = {k: v for k, v in options.items() if v is not None}
    given.update(base_url=base_url, pricing=pricing, retry=retry, timeout=timeout, api_key_env=api_key_env)
    try:
        backend = kind.create(target, **{k: v for k, v in given.items() if k in kind.settings})
    except OSError as exc:  # a file the spec names (a script, a model) that cannot be read
        where = exc.filename or target
        raise ConfigError(f"LLM backend {provider}: cannot read {where} ({exc.strerror or exc}); "
                          "check the path and its permissions") from None
    if cache_path:
        return cached(backend, cache_path)
    return backend
