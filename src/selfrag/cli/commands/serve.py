"""selfrag serve: an OpenAI-compatible endpoint and a web page that draws each method's trace."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ... import defaults
from ...errors import DataError, require
from ...extras import check_config
from ..options import add_answer_options, config_from_args, port_number
from .index import add_docs_options, load_docs

NAME = "serve"
HELP = "serve methods over HTTP: an OpenAI-compatible API and a page that shows how a method answered"
DESCRIPTION = (
    "Answer questions over --docs or --index through POST /v1/chat/completions (OpenAI format; "
    "`model` names the method) and POST /v1/ask, and serve a page at / that draws each answer's "
    f"trace (default method: {defaults.METHOD}). With --runs DIR, the page at /runs also opens run "
    "directories. Listens on 127.0.0.1 "
    "unless told otherwise; any other address needs an API key. Every request is logged on stderr "
    "(time, method, path, status, latency; never the query string or a header)."
)
ORDER = 60
# uvicorn handles SIGTERM itself (a graceful shutdown, then the signal again): keep the default.
OWN_SIGTERM = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ...serve.settings import API_KEY_ENV, Limits

    limits = Limits()
    add_docs_options(parser)
    add_answer_options(parser, NAME)
    parser.add_argument("--runs", metavar="DIR", help="also show the run directories under DIR (written by `selfrag run`)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=port_number, default=8000, help="port (default 8000; 0 picks a free one)")
    parser.add_argument(
        "--api-key", metavar="KEY",
        help=f"require 'Authorization: Bearer KEY' on every API call (default: ${API_KEY_ENV}); "
        f"needed for any --host other than this machine (prefer ${API_KEY_ENV}: a flag shows in `ps`)",
    )
    parser.add_argument("--max-concurrent", type=int, default=limits.max_concurrent, metavar="N",
                        help=f"questions answered at once; one more gets 429 (default {limits.max_concurrent})")
    parser.add_argument("--timeout", type=float, default=limits.timeout_s, metavar="SECONDS",
                        help=f"longest time one answer may take (default {limits.timeout_s:g})")
    parser.add_argument("--max-question-chars", type=int, default=limits.max_question_chars, metavar="N",
                        help=f"longest question accepted (default {limits.max_question_chars})")
    parser.add_argument("--max-body-bytes", type=int, default=limits.max_body_bytes, metavar="N",
                        help=f"largest request body accepted (default {limits.max_body_bytes})")
    parser.add_argument("--header-timeout", type=float, default=limits.header_timeout_s, metavar="SECONDS",
                        help="a connection's request headers must be complete this long after it opens; then it "
                        f"is closed (default {limits.header_timeout_s:g})")
    parser.add_argument("--max-pending-connections", type=int, default=limits.max_pending_connections, metavar="N",
                        help="connections whose request (headers or body) is still arriving, at once; one more "
                        "closes the oldest "
                        f"(default {limits.max_pending_connections})")
    parser.add_argument("--body-timeout", type=float, default=limits.body_timeout_s, metavar="SECONDS",
                        help=f"longest time a request's body may take to arrive (default {limits.body_timeout_s:g})")
    parser.add_argument("--send-timeout", type=float, default=limits.send_timeout_s, metavar="SECONDS",
                        help="a client that reads nothing of its reply for this long, while the reply waits, is "
                        f"disconnected (default {limits.send_timeout_s:g})")
    parser.add_argument("--max-run-file-mb", type=int, default=limits.max_run_file_bytes // 2**20, metavar="N",
                        help="largest run file (predictions.jsonl, ledger.jsonl) the runs view opens "
                        f"(default {limits.max_run_file_bytes // 2**20})")
    parser.add_argument("--plain-replies", action="store_true",
                        help="OpenAI-compatible replies carry the bare answer, without the [n] markers and the notes "
                        "`ask` prints (a request's \"selfrag\": {\"plain\": false} still gets them)")
    parser.add_argument("--no-access-log", action="store_true", help="do not log each request on stderr")


def _megabytes(value: int) -> int:
    if value < 1:
        raise DataError(f"--max-run-file-mb must be a whole number >= 1, got {value}")
    return value * 2**20


def _answers(args: argparse.Namespace) -> bool:
    """Whether this server answers questions (--runs alone only shows runs)."""
    return not args.runs or any((args.docs, args.index, args.llm, args.method, args.config))


def _build_answerer(args: argparse.Namespace, timeout_s: float):
    from ...assemble import build_backend, build_retriever
    from ...serve.answering import Answerer

    cfg = config_from_args(args, cache_default=False)
    check_config(cfg)  # a missing extra (dense retrieval) before any document is read
    documents = load_docs(args, cfg)
    retriever = build_retriever(cfg, documents)
    llm = build_backend(cfg)
    warm_up = getattr(llm, "warm_up", None)
    if callable(warm_up):
        warm_up()  # load the model now, not on the first question
    on_answer = _trace_line if args.trace else None
    source = args.index or args.docs  # the page names the documents by their folder's (or file's) name
    name = Path(source).expanduser().resolve().name if source else None
    return Answerer(cfg, llm, retriever, timeout_s=timeout_s, on_answer=on_answer, documents_name=name)


def _trace_line(method_name: str, response) -> None:
    """serve --trace: one line per answer on stderr, what the method did."""
    from ..explain import explain

    print(f"selfrag: {method_name}: {explain(response)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    require("uvicorn", "serve", "selfrag serve")
    require("starlette", "serve", "selfrag serve")
    import uvicorn

    from ...serve.app import create_app
    from ...serve.connections import raise_file_limit, server_config
    from ...serve.settings import API_KEY_ENV, Limits, ServeSettings, check_bind
    from ...serve.sockets import listen

    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    check_bind(args.host, api_key)
    limits = Limits(
        max_body_bytes=args.max_body_bytes, max_question_chars=args.max_question_chars,
        timeout_s=args.timeout, max_concurrent=args.max_concurrent, header_timeout_s=args.header_timeout,
        max_pending_connections=args.max_pending_connections, body_timeout_s=args.body_timeout,
        send_timeout_s=args.send_timeout,
        max_run_file_bytes=_megabytes(args.max_run_file_mb),
    )
    runs_dir = None
    if args.runs:
        runs_dir = Path(args.runs).expanduser()
        if not runs_dir.is_dir():
            raise DataError(f"--runs {args.runs}: not a folder; give the folder `selfrag run` writes to (e.g. results/)")
    if not _answers(args) and runs_dir is None:
        raise DataError("give --docs PATH or --index DIR to answer questions, or --runs DIR to show runs")
    if _answers(args) and not (args.docs or args.index):
        raise DataError("give --docs PATH or --index DIR: the documents the server answers from")
    answerer = _build_answerer(args, limits.timeout_s) if _answers(args) else None
    settings = ServeSettings(host=args.host, port=args.port, api_key=api_key, limits=limits, runs_dir=runs_dir,
                             plain_replies=args.plain_replies)
    raise_file_limit()  # room for many connections before a flood of unfinished ones can run out of files
    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    what = ["page /"] if answerer else []
    what += ["runs /runs"] if runs_dir else []
    what += ["API /v1/chat/completions, /v1/ask"] if answerer else []
    print(f"selfrag: serving on http://{shown}:{port} ({'; '.join(what)}); Ctrl-C stops", file=sys.stderr)
    verbose = bool(getattr(args, "verbose", False))
    # uvicorn's own access log would print query strings: selfrag's (serve/access_log.py) never does.
    config = server_config(
        create_app(settings, answerer, access_log=not args.no_access_log), limits,
        log_level="info" if verbose else "warning", access_log=False, timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0
