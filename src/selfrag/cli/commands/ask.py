"""selfrag ask: answer one question over your documents."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from ...assemble import build_backend, build_method, build_retriever
from ...errors import DataError
from ...extras import check_config
from ...serialize import response_json
from ...validation import lone_surrogate
from ..options import add_answer_options, config_from_args
from ..output import print_response
from ..progress import progress_for
from .index import add_docs_options, load_docs

NAME = "ask"
HELP = "answer one question over a folder or a file of documents"
ORDER = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question to answer")
    add_docs_options(parser)
    add_answer_options(parser, NAME)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args, cache_default=False)
    check_config(cfg)  # a missing extra (dense retrieval) before any document is read
    progress = progress_for(stream_answer=not args.json)
    if args.docs:
        progress.stage(f"reading the documents in {args.docs}")
    if not args.question.strip():
        raise DataError("the question is empty; give some text to answer")
    if (problem := lone_surrogate(args.question)) is not None:
        raise DataError(f"the question is not UTF-8 text ({problem}); give it as UTF-8")
    documents = load_docs(args, cfg)
    progress.stage("indexing the documents" if documents is not None else "loading the index")
    llm = build_backend(cfg)
    retriever = build_retriever(cfg, documents)
    method = build_method(cfg, llm, retriever)
    if retriever is None and method.uses_retrieval:
        raise DataError(f"method {method.name} retrieves passages: give --docs PATH or --index DIR")

    async def answer():
        try:
            with progress.watching():
                return await method.answer(args.question)
        finally:
            await llm.aclose()

    response = asyncio.run(answer())
    if args.json:
        print(json.dumps(response_json(response), ensure_ascii=False, indent=2))
    else:
        shown = progress.end_stream(response.answer)
        print_response(response, sys.stdout, trace=args.trace, answer_shown=shown)
    return 0
