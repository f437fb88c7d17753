"""HTTP plumbing shared by the API backends: one client, error mapping, Retry-After.

``timeout`` bounds the whole call (connecting, sending, the server's wait and
reading the whole body), not only each read: a server that drips bytes cannot
hold a call longer than that. A call that runs out of time is a retryable
:class:`BackendError`.

``max_reply_bytes`` (default :data:`DEFAULT_MAX_REPLY_BYTES`, 16 MiB: a batch
of 128 embeddings of 3,072 dimensions is about 8 MB, a chat reply a few KB)
bounds the reply body as it is read, decompressed: a larger reply is a
:class:`BackendError` after that many bytes, never a body held whole in memory
(a 60 MB reply took 850 MB once parsed). An error body is read up to its first
64 KB.

Every string of a reply passes through :func:`~selfrag.redaction.hide_values`
with the client's own key, password and Basic form before anyone sees it: a
model (or server) that repeats the credentials it was sent cannot put them in
an answer, a cache row, a predictions file or a served reply.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import time
from typing import Any

import httpx

from ..errors import BackendError
from ..redaction import hide_values, redact_secrets, redact_values, secret_forms
from ..validation import load_json

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
# The wait before the one retry of a refused connection to this machine.
LOCAL_REFUSED_RETRY_S = 0.25
LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
ERROR_BODY_BYTES = 64 * 1024  # what is read of an error reply: its message is at the start


def is_local_url(url: str) -> bool:
    """Whether ``url``'s host is this machine (localhost, 127.0.0.0/8, ::1)."""
    host = (httpx.URL(url).host or "").lower().strip("[]")
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refused(exc: BaseException) -> bool:
    """Whether a connect error is a refused connection (the port is closed), by its cause or its text."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore, which wraps the OSError
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    text = str(exc).lower()
    return "connection refused" in text or "errno 111" in text
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization"}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _json(body: bytes) -> Any:
    """The body as JSON (bounded nesting; a lone surrogate becomes U+FFFD); ValueError when it is not."""
    return load_json(body, surrogates="replace")


def provider_message(content: bytes, reason: str = "") -> str:
    """The error message the provider put in its body, or the start of the body."""
    try:
        body = _json(content)
    except ValueError:  # not JSON, not UTF-8, nested too deep, cut at ERROR_BODY_BYTES
        return " ".join(content.decode("utf-8", errors="replace").split())[:300] or reason
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
        if body.get("message"):
            return str(body["message"])[:500]
    return json.dumps(body)[:300]


class HTTPTransport:
    """A lazily created ``httpx.AsyncClient`` that maps failures to :class:`BackendError`.

    ``auth`` is a (user, password) pair sent as HTTP Basic auth; ``unauthorized_hint``
    is added to HTTP 401/403 errors (e.g. that a key was withheld from this host).
    """

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        timeout: float,
        label: str,
        *,
        auth: tuple[str, str] | None = None,
        unauthorized_hint: str | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_reply_bytes = max_reply_bytes
        self._headers = headers
        self._timeout = timeout
        self._label = label
        self._auth = httpx.BasicAuth(*auth) if auth is not None else None
        self._unauthorized_hint = unauthorized_hint
        # What a server echoing our request back could reveal: hidden in every reply and error message.
        keys = [v for k, v in headers.items() if k.lower() in _SECRET_HEADERS]
        self._secrets = secret_forms([*keys, *(v.partition(" ")[2] for v in keys)], auth)
        self._client: httpx.AsyncClient | None = None

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._headers,
                auth=self._auth,
                timeout=httpx.Timeout(self._timeout, connect=min(10.0, self._timeout)),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
            )
        return self._client

    async def post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        client = self._get_client()
        try:
            status, reason, headers, content = await asyncio.wait_for(self._post(client, path, payload), self._timeout)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise BackendError(
                f"{self._label}: no complete answer within {self._timeout:g} s "
                f"({type(exc).__name__}; raise llm.timeout if the server is just slow)",
                is_retryable=True,
            ) from exc
        except httpx.ConnectError as exc:
            if refused(exc) and is_local_url(self.base_url):
                # Nothing listens on this machine's port: one quick retry (a server just starting), not five.
                raise BackendError(
                    f"{self._label}: connection refused by {redact_secrets(self.base_url)}: nothing is listening "
                    "there (start the server, or fix the URL's port)",
                    is_retryable=True, retry_after=LOCAL_REFUSED_RETRY_S, max_attempts=2,
                ) from exc
            raise BackendError(
                f"{self._label}: cannot reach {redact_secrets(self.base_url)} "
                f"({type(exc).__name__}: {redact_secrets(str(exc))})",
                is_retryable=True,
            ) from exc
        except httpx.TransportError as exc:
            raise BackendError(
                f"{self._label}: cannot reach {redact_secrets(self.base_url)} "
                f"({type(exc).__name__}: {redact_secrets(str(exc))})",
                is_retryable=True,
            ) from exc
        if status >= 400:
            message = redact_values(provider_message(content, reason), self._secrets)
            if status in (401, 403) and self._unauthorized_hint:
                message += f" ({self._unauthorized_hint})"
            raise BackendError(
                f"{self._label}: HTTP {status}: {message}",
                status=status,
                is_retryable=status in RETRYABLE_STATUS,
                retry_after=parse_retry_after(headers.get("retry-after")),
            )
        try:
            data = _json(content)
        except ValueError as exc:  # not JSON, not UTF-8, nested too deep
            shown = redact_values(content[:200].decode("utf-8", errors="replace"), self._secrets)
            raise BackendError(
                f"{self._label}: the server answered with something that is not JSON "
                f"({getattr(exc, 'msg', type(exc).__name__)}): {shown!r}",
                is_retryable=True,
            ) from None
        if not isinstance(data, dict):
            shown = redact_values(str(data)[:200], self._secrets)
            raise BackendError(f"{self._label}: unexpected response shape: {shown}")
        return self._hidden(data) if self._secrets else data

    async def _post(
        self, client: httpx.AsyncClient, path: str, payload: dict[str, Any]
    ) -> tuple[int, str, httpx.Headers, bytes]:
        """POST and read the body up to its bound: (status, reason, headers, body)."""
        async with client.stream("POST", path, json=payload) as response:
            error = response.status_code >= 400
            limit = ERROR_BODY_BYTES if error else self.max_reply_bytes
            declared = response.headers.get("content-length", "")
            if not error and declared.isdigit() and int(declared) > limit:
                raise self._too_large(f"{int(declared):,} bytes declared")
            body = bytearray()
            async for chunk in response.aiter_bytes():  # decompressed: a gzip bomb counts in full
                body += chunk
                if len(body) > limit:
                    if error:
                        break  # an error's message is at the start of its body
                    raise self._too_large(f"more than {limit:,} bytes read")
            return response.status_code, response.reason_phrase, response.headers, bytes(body[:limit])

    def _too_large(self, seen: str) -> BackendError:
        return BackendError(
            f"{self._label}: the server's reply is larger than {self.max_reply_bytes / 2**20:g} MiB "
            f"({seen}); a model reply is never that large: check the server and the URL"
        )

    def _hidden(self, value: Any) -> Any:
        """``value`` (a reply) with this client's secrets hidden in every string in it."""
        if isinstance(value, str):
            return hide_values(value, self._secrets)
        if isinstance(value, list):
            return [self._hidden(v) for v in value]
        if isinstance(value, dict):
            return {k: self._hidden(v) for k, v in value.items()}
        return value

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
