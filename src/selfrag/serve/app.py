"""The ASGI application: the API routes, the two pages and their files, the guard, the error handlers."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import routes_answer, routes_runs
from .access_log import AccessLog
from .answering import Answerer
from .connections import quiet_accept_errors
from .errors import EXCEPTION_HANDLERS
from .guard import Guard
from .limits import Gate
from .settings import ServeSettings
from .state import ServerState

STATIC = Path(__file__).resolve().parent / "static"


def _page(name: str):
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / name, media_type="text/html", headers={"Cache-Control": "no-store"})

    return page


def create_app(settings: ServeSettings, answerer: Answerer | None, *, access_log: bool = True) -> Starlette:
    """The server: answers with ``answerer`` (None: runs only) and reads runs under ``settings.runs_dir``;
    ``access_log``: one line per request on stderr (outside the guard, so refusals are logged too)."""

    @asynccontextmanager
    async def lifespan(app: Starlette):
        quiet_accept_errors(asyncio.get_running_loop())
        try:
            yield
        finally:
            if answerer is not None:
                await answerer.aclose()

    app = Starlette(
        routes=[
            Route("/", _page("index.html"), methods=["GET"]),
            Route("/runs", _page("runs.html"), methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            *routes_answer.ROUTES,
            *routes_runs.ROUTES,
        ],
        middleware=[*([Middleware(AccessLog)] if access_log else []), Middleware(Guard, settings=settings)],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.selfrag = ServerState(settings=settings, answerer=answerer, gate=Gate(settings.limits.max_concurrent))
    return app
