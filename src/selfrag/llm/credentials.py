"""Where an API client sends its requests, and which key goes with them.

One policy for the OpenAI-compatible and Anthropic backends and for
OpenAI-compatible embeddings:

* A provider's own key variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) is
  sent only to that provider's official host (``https://api.openai.com``,
  ``https://api.anthropic.com``, default port). A base URL pointing anywhere
  else gets no key from it, so a config naming a stranger's server cannot
  collect your key.
* To send a key to another server, name the environment variable that holds
  it (``llm.api_key_env``; for embeddings ``SELFRAG_EMBEDDING_API_KEY_ENV``).
  That variable is read and its value sent whatever the host: the opt-in.
* Credentials written in the base URL (``http://user:password@host/v1``, or a
  token alone) are taken out of the URL the client uses, sent to that server
  as HTTP Basic auth, and shown as ``***`` wherever the URL is displayed.
* A key passed in Python (``api_key=...``) is sent as given.

:func:`resolve_credentials` applies the policy; :meth:`Credentials.transport`
opens the HTTP client that follows it (key header, Basic auth, the hint on a
401/403 that a key was withheld). Every API client sets up through these two.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import ConfigError
from ..redaction import redact_url_credentials
from .http import HTTPTransport

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Provider:
    name: str
    default_url: str
    key_env: str
    key_header: str
    key_prefix: str = ""

    @property
    def official_host(self) -> str:
        return urlsplit(self.default_url).hostname or ""


PROVIDERS = {
    "openai": Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "Authorization", "Bearer "),
    "anthropic": Provider("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", "x-api-key"),
}


class APITarget(TypedDict, total=False):
    """Where an API client sends its requests and which key goes with them: the keyword arguments
    every API client (the HTTP backends, OpenAI-compatible embeddings) takes and hands, as they are,
    to :func:`resolve_credentials`."""

    base_url: str | None  # None: the provider's own URL
    api_key: str | None  # a key given in code, sent as given
    api_key_env: str | None  # the environment variable holding the key for another server


@dataclass(frozen=True)
class Credentials:
    """The resolved target of an API client. Secrets are left out of ``repr``."""

    provider: Provider
    base_url: str  # what the client connects to: no credentials in it
    display_url: str  # the base URL as shown anywhere (credentials as ***)
    official: bool  # the provider's own host: its key variable may be sent
    key_env: str | None  # the environment variable the key came from (None: no key, or given in code)
    api_key: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    # Set when the provider's key variable exists but is not sent to this host.
    withheld_hint: str | None = None

    @property
    def is_default_url(self) -> bool:
        return self.base_url == self.provider.default_url

    def headers(self) -> dict[str, str]:
        """The key header for this provider, or nothing when no key is sent."""
        if not self.api_key:
            return {}
        return {self.provider.key_header: f"{self.provider.key_prefix}{self.api_key}"}

    def transport(self, headers: Mapping[str, str], timeout: float, label: str) -> HTTPTransport:
        """An HTTP client for this target: ``headers`` plus the key header, the URL's credentials
        as Basic auth, and the withheld-key hint on HTTP 401/403. ``label`` starts its errors."""
        return HTTPTransport(
            self.base_url,
            {**headers, **self.headers()},
            timeout,
            label=label,
            auth=self.basic_auth,
            unauthorized_hint=self.withheld_hint,
        )


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``(url without credentials, the credentials or None)``."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return url, None
    return urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment)), userinfo


def resolve_credentials(
    provider: str | Provider,
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    api_key_env: str | None = None,
    setting: str = "llm.api_key_env",
    opt_in: str = "--set llm.api_key_env={name}",
    missing_hint: str = "",
    environ: Mapping[str, str] | None = None,
) -> Credentials:
    """Resolve where ``provider`` requests go and which key goes with them (see the module docstring).

    ``provider`` is a name in :data:`PROVIDERS` or a :class:`Provider` of a backend's own.

    ``setting`` names the opt-in where errors mention it; ``opt_in`` shows how
    to send a withheld key (``{name}`` is the variable); ``missing_hint`` is
    added to the error for a missing key on the official host.
    """
    env = os.environ if environ is None else environ
    p = provider if isinstance(provider, Provider) else PROVIDERS[provider]
    raw = (base_url or p.default_url).strip().rstrip("/")
    shown = redact_url_credentials(raw)
    try:
        url, userinfo = split_userinfo(raw)
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket: http://[::1/v1
        raise ConfigError(
            f"{p.name} base URL {shown!r} is not a valid URL ({exc}); give http(s)://HOST[:PORT]/PATH"
        ) from None
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"{p.name} base URL {shown!r} has an invalid port; give http(s)://HOST[:PORT]/PATH") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{p.name} base URL {shown!r} is not an http(s) URL; give http(s)://HOST[:PORT]/PATH")
    official = parts.scheme == "https" and parts.hostname.lower() == p.official_host and port in (None, 443)
    basic = None
    if userinfo is not None:
        user, _, password = userinfo.partition(":")
        basic = (unquote(user), unquote(password))

    key: str | None = None
    key_env: str | None = None
    if api_key is not None:
        key = api_key or None
    elif api_key_env:
        if not ENV_NAME.match(api_key_env):
            raise ConfigError(f"{setting} must name an environment variable (letters, digits, _), got {api_key_env!r}")
        key = env.get(api_key_env) or None
        if key is None:
            raise ConfigError(
                f"{api_key_env} is not set ({setting} names it): export {api_key_env}=... or drop {setting}"
            )
        key_env = api_key_env
    elif official:
        key = env.get(p.key_env) or None
        if key is None:
            raise ConfigError(f"{p.key_env} is not set: export {p.key_env}=...{missing_hint}")
        key_env = p.key_env
    if key is not None and basic is not None and p.key_header.lower() == "authorization":
        raise ConfigError(
            f"{p.name} base URL {shown!r} has credentials and a key is set too; both would go in the "
            f"Authorization header: give the server's credentials once"
        )
    hint = None
    if key is None and env.get(p.key_env):
        hint = (
            f"{p.key_env} is sent only to {p.official_host}; to send a key to this server: "
            + opt_in.format(name=p.key_env)
        )
    return Credentials(
        provider=p,
        base_url=url,
        display_url=shown,
        official=official,
        key_env=key_env,
        api_key=key,
        basic_auth=basic,
        withheld_hint=hint,
    )
