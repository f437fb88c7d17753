"""The options of the commands that answer questions (ask, demo, run, serve), defined once.

Every option is written once in :data:`OPTIONS`; :data:`COMMAND_OPTIONS` says
which of them each command takes (``--json`` only where output is a document,
``--index`` only where documents are retrieved from, ``--config`` where the
config is not the command's own argument). A command's parser gets them from
:func:`add_answer_options`, so a flag means the same thing everywhere, and
:func:`config_from_args` turns them into one validated config.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import defaults
from ..config import ExperimentConfig, Override, load_config


@dataclass(frozen=True)
class Option:
    """One flag: how to add it to a parser; ``help`` may be worded per command."""

    name: str
    add: Callable[[argparse.ArgumentParser, str], None]
    help: dict[str, str] = field(default_factory=dict)

    def help_for(self, command: str, default: str) -> str:
        return self.help.get(command, default)


def _method(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--method", metavar="NAME",
                        help=f"method name (default {defaults.METHOD}, or the config's; `selfrag methods` lists them; "
                        "--method vanilla_rag is the plain retrieve-then-answer baseline)")


def _llm(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--llm", metavar="SPEC",
                        help="backend spec: llamacpp[:PATH], openai:MODEL[@URL], anthropic:MODEL, scripted:PATH "
                        "(default: the embedded SmolLM2-135M model)")


def _config(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--config", metavar="FILE", help="a YAML config (see configs/)")


def _set(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key, e.g. --set self_rag.num_candidates=2 or --set data.path=FILE "
        "(repeatable; the value is read as YAML)",
    )


def _top_k(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--top-k", type=int, metavar="N",
                        help="passages to retrieve (sets retrieval.top_k; wins over a method's own top_k)")


def _retriever(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--retriever", metavar="NAME", help="bm25 (default), dense or hybrid")


def _index(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--index", metavar="DIR", help="a saved index from `selfrag index build`")


def _cache(parser: argparse.ArgumentParser, command: str) -> None:
    default = "the config's cache.enabled, on in configs/" if command == "run" else "off"
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache", nargs="?", const="", metavar="PATH",
                       help=f"cache LLM calls in SQLite, at PATH or .selfrag/cache.db (default: {default})")
    cache.add_argument("--no-cache", action="store_true", help="do not cache LLM calls")


def _trace(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--trace", action="store_true", help=TRACE.help_for(command, "show every step the method took"))


def _json(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--json", action="store_true", help=JSON.help_for(command, "print one JSON object"))


TRACE = Option("trace", _trace, {
    "demo": "also show every step the method took for each question",
    "run": "print one line per question as it is answered: its answer and what the method did "
           "(every step is in predictions.jsonl)",
    "chat": "show every step of each answer",
    "serve": "log one line per answer on stderr: what the method did (the page at / shows every step)",
})
JSON = Option("json", _json, {
    "demo": "print one JSON object per question (and one for the comparison with --compare)",
    "run": "print the run's summary as JSON instead of a table",
})
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("method", _method), Option("llm", _llm), Option("config", _config), Option("set", _set),
    Option("top_k", _top_k), Option("retriever", _retriever), Option("index", _index), Option("cache", _cache),
    TRACE, JSON,
)}
# The options every command that answers questions takes, where they apply: serve answers over HTTP
# in JSON already (no --json); run's config is its own argument (no --config), and its dataset
# brings its passages (no --index, --top-k or --retriever flags: --set retrieval.* does it).
COMMON = ("method", "llm", "set", "cache", "trace")
COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "ask": (*COMMON, "config", "top_k", "retriever", "index", "json"),
    "demo": (*COMMON, "config", "top_k", "retriever", "json"),
    "run": (*COMMON, "json"),
    "chat": (*COMMON, "config", "top_k", "retriever", "index"),
    "serve": (*COMMON, "config", "top_k", "retriever", "index"),
}


def add_answer_options(parser: argparse.ArgumentParser, command: str = "ask") -> None:
    """Add the options ``command`` takes (:data:`COMMAND_OPTIONS`), in one order for every command."""
    wanted = set(COMMAND_OPTIONS[command])
    for name, option in OPTIONS.items():
        if name in wanted:
            option.add(parser, command)


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0-65535 (0: the system picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give 0-65535 (0 picks a free one)")
    return value


def flag_overrides(args: argparse.Namespace) -> list[Override]:
    """The dedicated flags as ``(dotted.key, value, flag)`` overrides, taken as given (not YAML-read)."""
    flags: list[Override] = []
    if getattr(args, "method", None):
        flags.append(("architecture.name", args.method, "--method"))
    if getattr(args, "llm", None):
        flags.append(("llm.spec", args.llm, "--llm"))
    if getattr(args, "top_k", None) is not None:
        flags.append(("retrieval.top_k", args.top_k, "--top-k"))
    if getattr(args, "retriever", None):
        flags.append(("retrieval.method", args.retriever, "--retriever"))
    if getattr(args, "index", None):
        flags.append(("retrieval.index", args.index, "--index"))
        if not args.retriever:
            # A saved index knows its retriever: use it unless told otherwise.
            from ..retrieval.persist import read_manifest

            flags.append(("retrieval.method", read_manifest(args.index).get("retriever", "bm25"), "--index"))
    if getattr(args, "cache", None) is not None:
        flags.append(("cache.enabled", True, "--cache"))
        if args.cache:
            flags.append(("cache.path", args.cache, "--cache"))
    elif getattr(args, "no_cache", False):
        flags.append(("cache.enabled", False, "--no-cache"))
    return flags


def config_from_args(args: argparse.Namespace, *, cache_default: bool) -> ExperimentConfig:
    """Config file (if any), then --set overrides, then the explicit flags.

    With no config and no ``--method``, the method is :data:`selfrag.defaults.METHOD`
    (the config's own default). ``--top-k N`` is written once, as
    ``retrieval.top_k``; every method that leaves its own ``top_k`` unset
    inherits it, and one the config sets is cleared so the flag wins.

    ``--set`` values are parsed as YAML; the flags' values are taken as given
    (a path or spec is a string even when it looks like a number, a mapping
    or has a ``#`` in it).
    """
    base: dict[str, Any] = {"cache": {"enabled": cache_default}}
    cfg = load_config(getattr(args, "config", None), [*args.overrides, *flag_overrides(args)], base=base)
    if getattr(args, "top_k", None) is not None:
        _inherit_top_k(cfg)
    return cfg


def _inherit_top_k(cfg: ExperimentConfig) -> None:
    """--top-k wins: a top_k the method's own section sets (config file or --set) is
    cleared to None, so the method inherits the flag's retrieval.top_k."""
    from ..methods.factory import get_method_class

    own = cfg.methods.get(get_method_class(cfg.architecture.name).section())
    if own and own.get("top_k") is not None:
        own["top_k"] = None
