"""Hiding secrets in text that is shown or stored: one function for every place.

Credentials in a URL (``scheme://USERINFO@host``, whatever USERINFO holds:
``user:password``, a token, or a password with a raw ``@`` in it) become
``***``, and so do strings that look like API keys (``sk-...``). Specs,
URLs, log lines, error messages, cache rows and files written to disk go
through :func:`redact_secrets`.
"""

from __future__ import annotations

import re

REDACTED = "***"

# Everything between "://" and the last "@" of the authority (which ends at the
# first "/", "?", "#" or whitespace): the URL's userinfo.
_USERINFO = re.compile(r"(?<=://)[^\s/?#]+@")
_API_KEY = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")


def redact_secrets(text: str) -> str:
    """``text`` with URL credentials and API-key-looking strings replaced by ``***``."""
    if "@" in text:
        text = _USERINFO.sub(f"{REDACTED}@", text)
    return _API_KEY.sub(REDACTED, text)
