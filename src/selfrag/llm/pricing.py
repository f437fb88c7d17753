"""Token prices per model, in US dollars per million tokens.

Local backends (llama.cpp, scripted) cost nothing. API prices are list prices
as published by the providers; override them per run with the ``llm.pricing``
config section (or ``Pricing(...)`` in Python) when they change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pricing:
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


FREE = Pricing(0.0, 0.0)

# Longest matching prefix wins, so dated snapshots inherit their family's price.
API_PRICES: dict[str, Pricing] = {
    # OpenAI
    "gpt-4o-mini": Pricing(0.15, 0.60),
    "gpt-4o": Pricing(2.50, 10.00),
    "gpt-4.1-nano": Pricing(0.10, 0.40),
    "gpt-4.1-mini": Pricing(0.40, 1.60),
    "gpt-4.1": Pricing(2.00, 8.00),
    "gpt-4-turbo": Pricing(10.00, 30.00),
    "gpt-3.5-turbo": Pricing(0.50, 1.50),
    "o3-mini": Pricing(1.10, 4.40),
    "o4-mini": Pricing(1.10, 4.40),
    "text-embedding-3-small": Pricing(0.02, 0.0),
    "text-embedding-3-large": Pricing(0.13, 0.0),
    # Anthropic
    "claude-3-haiku": Pricing(0.25, 1.25),
    "claude-3-5-haiku": Pricing(0.80, 4.00),
    "claude-haiku-4-5": Pricing(1.00, 5.00),
    "claude-3-5-sonnet": Pricing(3.00, 15.00),
    "claude-3-7-sonnet": Pricing(3.00, 15.00),
    "claude-sonnet-4": Pricing(3.00, 15.00),
    "claude-3-opus": Pricing(15.00, 75.00),
    "claude-opus-4": Pricing(15.00, 75.00),
}

LOCAL_PROVIDERS = {"llamacpp", "scripted"}

_warned: set[str] = set()


def lookup_pricing(provider: str, model: str, base_url: str | None = None) -> Pricing:
    """Price for a model; free for local providers and self-hosted servers."""
    if provider in LOCAL_PROVIDERS:
        return FREE
    if base_url and is_local_url(base_url):
        return FREE
    best = ""
    for prefix in API_PRICES:
        if model.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if best:
        return API_PRICES[best]
    if model not in _warned:
        _warned.add(model)
        log.warning(
            "no price known for %s:%s; costs are reported as 0 (set llm.pricing to fix)",
            provider,
            model,
        )
    return FREE


def is_local_url(url: str) -> bool:
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    return host in {"localhost", "127.0.0.1", "::1", "0.0.0.0"} or host.endswith(".localhost")
