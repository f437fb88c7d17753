"""Entry point of the ``selfrag`` command.

Subcommands are the modules of :mod:`selfrag.cli.commands`; each defines
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
Errors meant for the user print as one line on stderr with a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence

from ..errors import SelfragError
from ..redaction import redact_secrets
from ..version import __version__
from . import commands
from .progress import LINE, announce_start, logging_clears_the_line
from .signals import Terminated, sigterm_stops


def _command_modules():
    mods = []
    for info in pkgutil.iter_modules(commands.__path__):
        if not info.name.startswith("_"):
            mods.append(importlib.import_module(f"{commands.__name__}.{info.name}"))
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 50))


VERBOSE_HELP = "log progress details to stderr (each model call with its tokens and time)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser; what it prints (usage, errors, help) starts on a line of its own, not after
    the "starting…" line. Subcommands' parsers are of the same class."""

    def _print_message(self, message: str, file=None) -> None:  # type: ignore[no-untyped-def]
        LINE.clear()
        super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="selfrag",
        description="Self-reflective retrieval-augmented generation: Self-RAG and its relatives.",
    )
    parser.add_argument("--version", action="version", version=f"selfrag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _own_sigterm=getattr(mod, "OWN_SIGTERM", False))
        _verbose_anywhere(p)
    return parser


def _verbose_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``-v`` come after the (sub)command too, as users type it: ``selfrag ask "..." -v``.

    The default is suppressed, so a command's parser sets ``verbose`` only when
    the flag is given there and never undoes a ``-v`` given before the command.
    """
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _verbose_anywhere(child)


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments reached, e.g. ``selfrag data download``'s."""
    while True:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
        if chosen is None:
            return parser
        parser = chosen


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown argument is reported with the usage of the command it was given to
    (argparse reports it with the top-level usage: ``selfrag [-h] ... COMMAND``)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    announce_start(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parse(parser, argv)
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="selfrag: %(levelname)s: %(message)s")
    for handler in logging.root.handlers:
        # Libraries that set their own loggers to DEBUG must not leak through.
        handler.setLevel(level)
        logging_clears_the_line(handler)  # a warning starts a line of its own, not after a stage's
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return _run(args)
    finally:
        LINE.finish()  # no progress text is left on the terminal, whatever the ending


def _run(args: argparse.Namespace) -> int:
    try:
        if getattr(args, "_own_sigterm", False):
            return int(args._run(args) or 0)
        with sigterm_stops():
            return int(args._run(args) or 0)
    except SelfragError as exc:
        LINE.finish()
        # Messages name specs and URLs: never print the credentials in them.
        print(f"selfrag: error: {redact_secrets(str(exc))}", file=sys.stderr)
        return 2
    except Terminated:
        LINE.finish()
        print("selfrag: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        LINE.finish()
        print("selfrag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into a closed reader (e.g. `| head`): exit quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
