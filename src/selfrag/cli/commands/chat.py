"""selfrag chat: a conversation over your documents, one question after another.

Each question after the first is rewritten, from the earlier turns, into one
that stands on its own before anything is retrieved ("and when did he die?"
becomes "When did William Herschel die?"), and the answer shows what was
asked. ``exit`` (or ``quit``, or end of input) leaves.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

NAME = "chat"
HELP = "a conversation over your documents: follow-up questions are read with the earlier turns"
DESCRIPTION = (
    "Ask questions one after another over a folder or file of documents. A follow-up is rewritten "
    "from the earlier turns into a standalone question before retrieving. Type exit to leave."
)
ORDER = 11
EXIT_WORDS = ("exit", "quit", ":q", "/exit", "/quit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..options import add_answer_options
    from .index import add_docs_options

    add_docs_options(parser)
    add_answer_options(parser, NAME)


def run(args: argparse.Namespace) -> int:
    from ...assemble import build_backend, build_method, build_retriever
    from ...errors import DataError
    from ..options import config_from_args
    from ..progress import LINE, progress_for
    from .index import load_docs

    cfg = config_from_args(args, cache_default=False)
    documents = load_docs(args, cfg)
    llm = build_backend(cfg)
    retriever = build_retriever(cfg, documents)
    method = build_method(cfg, llm, retriever)
    if retriever is None and method.uses_retrieval:
        raise DataError(f"method {method.name} retrieves passages: give --docs PATH or --index DIR")
    interactive = sys.stdin.isatty()
    if interactive:
        LINE.clear()  # the "starting…" line
        print(f"selfrag chat · {method.name} · {llm.model} · type exit to leave", file=sys.stderr)
    return asyncio.run(_converse(args, method, llm, interactive, progress_for))


def _read(interactive: bool) -> str | None:
    """The next line typed (None at the end of input)."""
    try:
        if interactive:
            return input("you> ")
    except EOFError:
        return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


async def _converse(args: argparse.Namespace, method, llm, interactive: bool, progress_for) -> int:
    from ...errors import SelfragError
    from ...methods.steps.followup import Turn, standalone_question, with_rewrite
    from ...redaction import redact_secrets
    from ..output import print_response

    turns: list[Turn] = []
    try:
        while True:
            line = _read(interactive)
            if line is None or line.strip().lower() in EXIT_WORDS:
                return 0
            question = line.strip()
            if not question:
                continue
            progress = progress_for()
            try:
                with progress.watching():
                    if turns:
                        progress.stage("reading the question with the earlier turns")
                    rewrite = await standalone_question(llm, turns, question)
                    if rewrite.changed:
                        progress.say(f"(asked as: {rewrite.standalone})")
                    response = with_rewrite(await method.answer(rewrite.standalone), rewrite)
            except SelfragError as exc:  # one bad question does not end the conversation
                print(f"selfrag: error: {redact_secrets(str(exc))}", file=sys.stderr)
                continue
            shown = progress.end_stream(response.answer)
            print_response(response, sys.stdout, trace=args.trace, answer_shown=shown)
            sys.stdout.flush()
            turns += [Turn("user", question), Turn("assistant", response.answer)]
    finally:
        await llm.aclose()
