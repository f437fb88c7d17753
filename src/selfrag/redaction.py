"""Hiding secrets in text that is shown or stored.

:func:`redact_url_credentials` is the one function for URLs: credentials in a
URL (``scheme://USERINFO@host``, whatever USERINFO holds: ``user:password``,
a token, or a password with a raw ``@`` in it) become ``***``. Backend specs
and embedding-model names are built with it, so they never hold a secret.
:func:`redact_secrets` also hides strings that look like API keys
(``sk-...``); log lines, error messages and files written to disk
(``config.yaml``, ``summary.json``) go through it. :func:`redact` applies
both to a nested mapping and also hides the values of secret-looking keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***"
SECRET_MARKERS = ("api_key", "apikey", "secret", "password", "access_token", "authorization")

# Everything between "://" and the last "@" of the authority (which ends at the
# first "/", "?", "#" or whitespace): the URL's userinfo.
_USERINFO = re.compile(r"(?<=://)[^\s/?#]+@")
_API_KEY = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}")


def redact_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _USERINFO.sub(f"{REDACTED}@", text) if "@" in text else text


def redact_secrets(text: str) -> str:
    """``text`` with URL credentials and API-key-looking strings replaced by ``***``."""
    return _API_KEY.sub(REDACTED, redact_url_credentials(text))


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
