"""Run-directory routes: the list, one run's summary and questions, one trace, two runs compared.

Files are read in a worker thread, so a large run never stalls the answers
being streamed at the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .errors import ApiError
from .runs import RunsRoot
from .state import server_state


def _root(request: Request) -> RunsRoot:
    runs = server_state(request).runs
    if runs is None:
        raise ApiError(404, "this server shows no runs; start it with --runs DIR", code="runs_off")
    return runs


async def _reply(call: Callable[..., Any], *args: Any) -> Response:
    return JSONResponse(await run_in_threadpool(call, *args))


async def list_runs(request: Request) -> Response:
    root = _root(request)
    return JSONResponse({"root": root.root.name, "runs": await run_in_threadpool(root.list)})


async def run_table(request: Request) -> Response:
    return await _reply(_root(request).table, request.query_params.get("run"))


async def run_question(request: Request) -> Response:
    root = _root(request)
    qid = request.query_params.get("id")
    if not qid:
        raise ApiError(400, "give a question: ?id=QUESTION_ID", param="id")
    return await _reply(root.question, request.query_params.get("run"), qid)


async def run_compare(request: Request) -> Response:
    root = _root(request)
    a, b = request.query_params.get("a"), request.query_params.get("b")
    return await _reply(root.compare, a, b)


ROUTES = [
    Route("/v1/runs", list_runs, methods=["GET"]),
    Route("/v1/runs/table", run_table, methods=["GET"]),
    Route("/v1/runs/question", run_question, methods=["GET"]),
    Route("/v1/runs/compare", run_compare, methods=["GET"]),
]
