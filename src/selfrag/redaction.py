"""Hiding secrets in text that is shown or stored.

:func:`redact_url_credentials` is the one function for URLs: credentials in a
URL (``scheme://USERINFO@host``, whatever USERINFO holds: ``user:password``,
a token, or a password with a raw ``@`` in it) become ``***``. Backend specs
and embedding-model names are built with it, so they never hold a secret.
:func:`redact_secrets` also hides strings that look like API keys
(``sk-...``); log lines, error messages and files written to disk
(``config.yaml``, ``summary.json``) go through it.
"""

from __future__ import annotations

import re

REDACTED = "***"

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
