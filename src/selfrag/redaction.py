"""Hiding secrets in text that is shown or stored.

:func:`redact_url_credentials` is the one function for URLs: credentials in a
URL (``scheme://USERINFO@host``, whatever USERINFO holds: ``user:password``,
a token, or a password with a raw ``@`` in it) become ``***``. Backend specs
and embedding-model names are built with it, so they never hold a secret.
:func:`redact_secrets` also hides strings that look like API keys
(``sk-...``) and HTTP credentials a server may echo back in an error body
(``Bearer <token>``, ``Basic <base64 of user:password>``); log lines, error
messages and files written to disk (``config.yaml``, ``summary.json``) go
through it. :func:`redact_values` also hides given secrets (a client's own
key and password, and their base64 forms) wherever they appear;
:func:`hide_values` hides only those (an API reply: what a model wrote stays
as written otherwise). :func:`redact`
applies :func:`redact_secrets` to a nested mapping and also hides the values
of secret-looking keys.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***"
SECRET_MARKERS = ("api_key", "apikey", "secret", "password", "access_token", "authorization")

# Everything between "://" and the last "@" of the authority (which ends at the
# first "/", "?", "#" or whitespace): the URL's userinfo.
_USERINFO = re.compile(r"(?<=://)[^\s/?#]+@")
_API_KEY = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}")
# "Bearer <token>": a token of 8 or more token characters with a digit or a symbol in it,
# so "bearer bonds" stays; "Basic <base64>": only when it decodes to "user:password".
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9\-._~+/]+=*)")
_BASIC = re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})")


def redact_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _USERINFO.sub(f"{REDACTED}@", text) if "@" in text else text


def _bearer(match: re.Match[str]) -> str:
    token = match.group(2)
    if len(token) >= 8 and re.search(r"[0-9\-._~+/=]", token):
        return match.group(1) + REDACTED
    return match.group()


def _basic(match: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return match.group()
    return match.group(1) + REDACTED if b":" in decoded else match.group()


def redact_secrets(text: str) -> str:
    """``text`` with URL credentials, API-key-looking strings and echoed auth headers replaced by ``***``."""
    text = _API_KEY.sub(REDACTED, redact_url_credentials(text))
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(_bearer, text)
    if "asic" in text or "ASIC" in text:
        text = _BASIC.sub(_basic, text)
    return text


def secret_forms(secrets: Iterable[str | None], basic: tuple[str, str] | None = None) -> list[str]:
    """The strings that give ``secrets`` away: each one, and for ``basic`` its password (the user,
    when it is a token alone: ``http://TOKEN@host``) and base64 form."""
    forms = [s for s in secrets if s]
    if basic is not None:
        user, password = basic
        forms += [password or user, base64.b64encode(f"{user}:{password}".encode()).decode()]
    # Longest first, so a secret that contains another is hidden whole; short ones would hide ordinary words.
    return sorted({f for f in forms if len(f) >= 4}, key=len, reverse=True)


def hide_values(text: str, forms: Iterable[str]) -> str:
    """``text`` with every string of ``forms`` (see :func:`secret_forms`) replaced by ``***``; nothing else
    changes, so a model's answer that merely mentions ``Bearer`` tokens or ``sk-`` keys reads as written."""
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact_values(text: str, forms: Iterable[str]) -> str:
    """``text`` through :func:`redact_secrets`, with every string of ``forms`` also replaced by ``***``."""
    return redact_secrets(hide_values(text, forms))


def _is_secret_key(key: Any) -> bool:
    # A key ending in _env holds the *name* of an environment variable, not its value.
    if not isinstance(key, str) or key.lower().endswith("_env"):
        return False
    return any(m in key.lower() for m in SECRET_MARKERS)


def redact(data: Any) -> Any:
    """A copy with secret-looking keys' values and URL credentials replaced by ``***``."""
    if isinstance(data, Mapping):
        return {k: (REDACTED if _is_secret_key(k) and v else redact(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v) for v in data]
    if isinstance(data, str):
        return redact_secrets(data)
    return data
