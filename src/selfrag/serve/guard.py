"""The checks every request passes before any route sees it (an ASGI middleware).

* **Host header.** A server on 127.0.0.1 answers only requests addressed to
  this machine by name (``localhost``, ``127.0.0.1``, ``[::1]``), so a web
  page elsewhere cannot reach it through DNS rebinding.
* **Who may call.** With an API key, every ``/v1/`` call must carry
  ``Authorization: Bearer <key>`` (compared in constant time). Without one,
  only this machine may call at all: a request from any other address is
  refused with 403, whatever the path.
* **Body size.** A declared ``Content-Length`` over the limit is refused
  before the body is read (a chunked body is counted as it is read, in
  :func:`selfrag.serve.limits.read_json`).
* **Headers.** Responses say ``nosniff``, no referrer, no framing, and a
  content security policy that lets the page load only its own files.
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import error_response
from .settings import ServeSettings, is_loopback

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
]


def _host_name(host_header: str | None) -> str | None:
    """The name part of a Host header (``[::1]:8000`` -> ``::1``), or None if there is none."""
    if not host_header:
        return None
    value = host_header.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else None
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def bearer_key(headers: Headers) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


class Guard:
    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings
        self.local_only = is_loopback(settings.host)

    def refusal(self, scope: Scope, headers: Headers):
        """The response that refuses this request, or None to let it through."""
        if self.local_only:
            name = _host_name(headers.get("host"))
            if name is None or not is_loopback(name):
                return error_response(
                    421, "this server answers only requests addressed to localhost or 127.0.0.1", code="bad_host"
                )
        client = scope.get("client")
        from_here = bool(client) and is_loopback(str(client[0]))
        key = self.settings.api_key
        if not key and not from_here:
            return error_response(
                403, "requests from other machines need an API key; start the server with --api-key",
                code="not_local",
            )
        path = scope.get("path", "")
        if key and path.startswith("/v1/"):
            given = bearer_key(headers)
            if given is None or not hmac.compare_digest(given.encode(), key.encode()):
                return error_response(
                    401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                    code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"},
                )
        declared = headers.get("content-length")
        if declared is not None:
            limit = self.settings.limits.max_body_bytes
            if not declared.isdigit():
                return error_response(400, "the Content-Length header is not a number", code="bad_length")
            if int(declared) > limit:
                return error_response(
                    413, f"the request body is {int(declared)} bytes; the limit is {limit}", code="body_too_large"
                )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *SECURITY_HEADERS]
            await send(message)

        refusal = self.refusal(scope, Headers(scope=scope))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)
