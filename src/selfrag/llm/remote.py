"""The shared set-up of backends that call a provider's HTTP API.

A subclass names its provider (:data:`.credentials.PROVIDERS`, or a
:class:`~.credentials.Provider` of its own), its request headers and its spec
forms, and implements ``_generate`` with ``self._http``. This class resolves
the base URL and the key (:mod:`.credentials`), opens the transport, and
shows the spec with any URL credentials as ``***``.
"""

from __future__ import annotations

import asyncio
from typing import Unpack

from ..errors import ConfigError
from .base import BaseBackend, RetryPolicy
from .credentials import APITarget, Credentials, Provider, resolve_credentials
from .pricing import Pricing, lookup_pricing


class HTTPBackend(BaseBackend):
    """``NAME:MODEL`` or ``NAME:MODEL@BASE_URL`` over HTTP, with one key policy for every provider."""

    api: Provider  # the default URL, the key variable and how the key is sent
    request_headers: dict[str, str] = {"Content-Type": "application/json"}
    spec_forms: str = ""  # how a spec looks, for the error when the model is missing
    missing_key_hint: str = ""  # added to the error for a missing key on the official host

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 120.0,
        pricing: Pricing | None = None,
        retry: RetryPolicy | None = None,
        sleep=asyncio.sleep,
        **target: Unpack[APITarget],
    ) -> None:
        if not model:
            raise ConfigError(f"{self.provider} backend needs a model name: {self.spec_forms}")
        creds = resolve_credentials(self.api, **target, missing_hint=self.missing_key_hint)
        self.base_url = creds.base_url
        self._display_url = creds.display_url
        self._default_url = creds.is_default_url
        if pricing is None:
            pricing = self.list_pricing(model, creds)
        super().__init__(model, pricing=pricing, retry=retry, sleep=sleep)
        self._http = creds.transport(self.request_headers, timeout, label=f"{self.provider}:{model}")

    def list_pricing(self, model: str, creds: Credentials) -> Pricing:
        """The price when none is given: the provider's list price (a base URL is a proxy in front of it)."""
        return lookup_pricing(self.provider, model)

    @property
    def spec(self) -> str:
        if self._default_url:
            return f"{self.provider}:{self.model}"
        return f"{self.provider}:{self.model}@{self._display_url}"

    async def aclose(self) -> None:
        await self._http.aclose()
