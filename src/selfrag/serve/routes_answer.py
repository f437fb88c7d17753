"""Answering routes: ``/v1/chat/completions`` (OpenAI), ``/v1/ask``, ``/v1/methods``, ``/v1/server``, ``/health``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..llm import streaming
from ..methods.core import trace
from ..methods.core.stages import StageNames
from ..methods.factory import available_methods
from ..reflection.answer_text import answer_lines
from ..version import __version__
from . import openai_format as oai
from .answering import Answerer
from .errors import ApiError, as_api_error, error_body
from .limits import check_question, flag, read_json
from .payload import answer_payload
from .progress import Progress
from .sse import DONE, PING, SlotStream, event, pieces
from .state import ServerState, server_state

# Seconds between keep-alive comments while a method works on a streamed answer.
PING_INTERVAL = 10.0
log = logging.getLogger("selfrag.serve")


def need_answerer(st: ServerState) -> Answerer:
    if st.answerer is None:
        raise ApiError(
            503, "this server shows runs only; start it with --docs PATH or --index DIR to answer questions",
            code="answering_off",
        )
    return st.answerer


async def health(request: Request) -> Response:
    st = server_state(request)
    return JSONResponse({
        "status": "ok",
        "version": __version__,
        "answering": st.answerer is not None,
        "default_method": st.answerer.default_method if st.answerer else None,
        "runs": st.settings.runs_dir is not None,
        "auth_required": st.settings.auth_required,
        "in_flight": st.gate.in_flight,
        "limits": {
            "max_concurrent": st.settings.limits.max_concurrent,
            "max_question_chars": st.settings.limits.max_question_chars,
            "max_body_bytes": st.settings.limits.max_body_bytes,
            "timeout_s": st.settings.limits.timeout_s,
        },
    })


async def server(request: Request) -> Response:
    """What the server answers with (the page shows it): behind the key, unlike /health."""
    answerer = server_state(request).answerer
    empty = {"method": None, "model": None, "documents": None}
    return JSONResponse({"answering": answerer is not None, **(answerer.served() if answerer else empty)})


async def methods(request: Request) -> Response:
    st = server_state(request)
    if st.answerer is not None:
        data = st.answerer.describe()
    else:
        data = [{"id": n, "object": "model", "owned_by": "selfrag", "description": c.description,
                 "uses_retrieval": c.uses_retrieval, "available": False, "default": False}
                for n, c in available_methods().items()]
    return JSONResponse({"object": "list", "data": data})


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body is read by now, so only a disconnect can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _answer_now(request: Request, st: ServerState, answerer: Answerer, question: str, name: str,
                      history: tuple = ()) -> Any:
    """The answer's payload; a client that goes away first cancels the answer and frees its slot at once."""
    with st.gate.slot():
        task = asyncio.ensure_future(answerer.answer(question, name, history=history))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
                task.add_done_callback(_swallow)
        if not task.done() or task.cancelled():
            log.info("the client left before its answer was ready; stopped answering %r", question[:80])
            return None
        try:
            response = task.result()
        except Exception as exc:
            raise as_api_error(exc) from None
    return answer_payload(response)


def _swallow(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not warn about it


def _start(st: ServerState, model: Any) -> tuple[Answerer, str]:
    answerer = need_answerer(st)
    name = answerer.resolve(model)
    answerer.method(name)  # built now, so a method that cannot answer here is a status, not a broken stream
    return answerer, name


async def ask(request: Request) -> Response:
    st = server_state(request)
    need_answerer(st)
    body = await read_json(request, st.settings.limits)
    question = check_question(body.get("question"), st.settings.limits.max_question_chars)
    answerer, name = _start(st, body.get("method"))
    if not flag(body, "stream"):
        data = await _answer_now(request, st, answerer, question, name)
        return JSONResponse(data) if data is not None else Response(status_code=499)
    st.gate.enter()
    return SlotStream(_ask_events(answerer, question, name), st.gate.leave)


async def _run_with_progress(answerer: Answerer, question: Any, name: str,
                             history: tuple = ()) -> AsyncIterator[tuple[str, Any]]:
    """("stage", {...}) as each step starts (the stages `selfrag ask` shows), ("progress", {...}) after
    each model call, ("token", text) as the answer is written (methods whose answer is one model call
    known in advance), pings while waiting, then ("result" | "error", ...)."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    progress = Progress(report=queue.put_nowait)
    stages = StageNames()
    shown: list[str] = []

    def on_step(event: str, action: str, payload: Any) -> None:
        if event != "start":
            return
        label = stages.label(action)
        if not shown or shown[-1] != label:
            shown.append(label)
            queue.put_nowait({"stage": label, "elapsed_ms": progress.elapsed_ms()})

    async def answer() -> Any:
        token = trace.step_listener.set(on_step)  # copied into the tasks the answer runs in
        try:
            with streaming.listening(lambda piece: queue.put_nowait({"token": piece}), loop):
                return await answerer.answer(question, name, progress, history)
        finally:
            trace.step_listener.reset(token)

    task = asyncio.ensure_future(answer())
    getter: asyncio.Future | None = None
    try:
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({task, getter}, timeout=PING_INTERVAL, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield _kind(getter.result())
            else:
                getter.cancel()
                if not done:
                    yield "ping", None
        while not queue.empty():
            yield _kind(queue.get_nowait())
        try:
            response = task.result()
        except Exception as exc:
            err = as_api_error(exc)
            yield "error", error_body(err.status, err.message, code=err.code, error_id=err.error_id)
            return
        yield "result", response
    finally:
        if getter is not None and not getter.done():
            getter.cancel()
        if not task.done():
            task.cancel()  # the client went away: stop working on its question


def _kind(item: dict[str, Any]) -> tuple[str, Any]:
    if "token" in item:
        return "token", item["token"]
    return ("stage", item) if "stage" in item else ("progress", item)


async def _ask_events(answerer: Answerer, question: str, name: str) -> AsyncIterator[bytes]:
    yield event({"method": name, "question": question}, "start")
    async for kind, value in _run_with_progress(answerer, question, name):
        if kind == "ping":
            yield PING
        elif kind == "token":
            yield event({"text": value}, "token")
        elif kind in ("progress", "stage"):
            yield event(value, kind)
        elif kind == "error":
            yield event(value, "error")
        else:
            yield event(answer_payload(value), "result")


async def chat_completions(request: Request) -> Response:
    st = server_state(request)
    need_answerer(st)
    body = await read_json(request, st.settings.limits)
    chat = oai.parse_chat(body, st.settings.limits.max_question_chars)
    answerer, name = _start(st, chat.model)
    plain = st.settings.plain_replies if chat.plain is None else chat.plain
    cid, created = oai.new_id()
    if not chat.stream:
        data = await _answer_now(request, st, answerer, chat.question, name, chat.history)
        if data is None:
            return Response(status_code=499)  # nobody is there to read it
        return JSONResponse(oai.completion(data, cid=cid, created=created, model=name, plain=plain))
    st.gate.enter()
    return SlotStream(_chat_chunks(answerer, chat, name, cid, created, plain), st.gate.leave)


async def _chat_chunks(answerer: Answerer, chat: oai.ChatRequest, name: str, cid: str, created: int,
                       plain: bool) -> AsyncIterator[bytes]:
    ids = {"cid": cid, "created": created, "model": name}
    yield event(oai.chunk(**ids, delta={"role": "assistant", "content": ""}))
    streamed = ""
    async for kind, value in _run_with_progress(answerer, chat.question, name, chat.history):
        if kind == "ping":
            yield PING
        elif kind == "token":
            streamed += value
            yield event(oai.chunk(**ids, delta={"content": value}))
        elif kind == "error":
            yield event(value)  # OpenAI clients raise an APIError on {"error": ...}
            return
        elif kind == "result":
            data = answer_payload(value)
            notes = answer_lines(value, answer_shown=True)
            for piece in pieces(oai.rest_of_content(data, streamed, notes, plain=plain)):
                yield event(oai.chunk(**ids, delta={"content": piece}))
            yield event(oai.chunk(**ids, delta={}, finish="stop", citations=oai.citations(data), selfrag=data))
            if chat.include_usage:
                yield event(oai.chunk(**ids, delta=None, usage=oai.usage(data)))
    yield DONE


ROUTES = [
    Route("/health", health, methods=["GET"]),
    Route("/v1/methods", methods, methods=["GET"]),
    Route("/v1/server", server, methods=["GET"]),
    Route("/v1/models", methods, methods=["GET"]),
    Route("/v1/ask", ask, methods=["POST"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]
