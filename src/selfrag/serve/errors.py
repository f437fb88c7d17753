"""Every failure as a JSON body with one message, in the shape OpenAI clients read.

``{"error": {"message": ..., "type": ..., "code": ...}}``. A request the
server refuses raises :class:`ApiError`; a user error from selfrag
(:class:`~selfrag.errors.SelfragError`) keeps its one-line message; anything
unexpected is logged here with its traceback and answered with a plain
"internal error" line, so no traceback ever reaches a client.

A failure of the model backend is answered with a short line (the upstream
HTTP status, if any) and an error id (``"id"`` in the body); what the
upstream server said goes only to the server log under that id, redacted: an
upstream body can echo the request's credentials, which are the server
owner's, not the client's.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import BackendError, SelfragError
from ..redaction import redact_secrets

log = logging.getLogger("selfrag.serve")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    421: "invalid_request_error",
    429: "rate_limit_error",
    502: "backend_error",
    503: "unavailable_error",
    504: "timeout_error",
}


class ApiError(Exception):
    """A refusal with its HTTP status and one line saying why."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        error_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.error_id = error_id


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None, error_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": redact_secrets(message),
        "type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
        "param": param,
        "code": code,
    }
    if error_id:
        body["id"] = error_id
    return {"error": body}


def new_error_id() -> str:
    return f"err_{secrets.token_hex(6)}"


def backend_failure(exc: BackendError) -> ApiError:
    """A backend failure as a short 502 with an error id; the whole (redacted) message goes to the log."""
    error_id = new_error_id()
    log.warning("model backend error %s: %s", error_id, " ".join(redact_secrets(str(exc)).split()))
    what = f"HTTP {exc.status} from the model server" if exc.status else "no usable answer from the model server"
    return ApiError(502, f"the model backend failed ({what}); error id {error_id}, the server log has the details",
                    code="backend_error", error_id=error_id)


def error_response(status: int, message: str, **kwargs: Any) -> JSONResponse:
    headers = kwargs.pop("headers", None)
    return JSONResponse(error_body(status, message, **kwargs), status_code=status, headers=headers)


def as_api_error(exc: BaseException) -> ApiError:
    """Any exception as the refusal a client sees (unexpected ones are logged here)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BackendError):
        return backend_failure(exc)
    if isinstance(exc, SelfragError):
        return ApiError(400, str(exc))
    log.error("unexpected error while answering", exc_info=exc)
    return ApiError(500, "internal error while answering; the server log has the details", code="internal_error")


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    err = as_api_error(exc)
    return error_response(err.status, err.message, code=err.code, param=err.param, headers=err.headers,
                          error_id=err.error_id)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    message = {404: f"no such endpoint: {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
    headers = dict(exc.headers or {})
    return error_response(exc.status_code, message.get(exc.status_code, str(exc.detail)), headers=headers or None)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The last resort (Starlette's server-error middleware): log, never show the traceback.
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error; the server log has the details", code="internal_error")


EXCEPTION_HANDLERS = {
    ApiError: _api_error,
    SelfragError: _api_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
