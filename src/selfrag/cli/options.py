"""Options shared by the commands that answer questions (ask, demo, run)."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import ExperimentConfig, Override, load_config


def add_answer_options(parser: argparse.ArgumentParser, *, default_method: str | None = None) -> None:
    parser.add_argument("--method", default=default_method, help="method name (see `selfrag methods`)")
    parser.add_argument("--llm", metavar="SPEC", help="backend spec: llamacpp[:PATH], openai:MODEL[@URL], anthropic:MODEL, scripted:PATH")
    parser.add_argument("--top-k", type=int, metavar="N", help="passages to retrieve (sets retrieval.top_k; wins over a method's own top_k)")
    parser.add_argument("--retriever", metavar="NAME", help="bm25 (default), dense or hybrid")
    parser.add_argument("--index", metavar="DIR", help="a saved index from `selfrag index build`")
    parser.add_argument("--config", metavar="FILE", help="a YAML config (see configs/)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set self_rag.num_candidates=2 (repeatable; the value is read as YAML)",
    )
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache", nargs="?", const="", metavar="PATH", help="cache LLM calls in SQLite (optional path)")
    cache.add_argument("--no-cache", action="store_true", help="do not cache LLM calls")


def config_from_args(args: argparse.Namespace, *, cache_default: bool) -> ExperimentConfig:
    """Config file (if any), then --set overrides, then the explicit flags.

    ``--top-k N`` is written once, as ``retrieval.top_k``; every method that
    leaves its own ``top_k`` unset inherits it, and one the config sets is
    cleared so the flag wins.

    ``--set`` values are parsed as YAML; the flags' values are taken as given
    (a path or spec is a string even when it looks like a number, a mapping
    or has a ``#`` in it).
    """
    flags: list[Override] = []
    if args.method:
        flags.append(("architecture.name", args.method, "--method"))
    if args.llm:
        flags.append(("llm.spec", args.llm, "--llm"))
    if args.top_k is not None:
        flags.append(("retrieval.top_k", args.top_k, "--top-k"))
    if args.retriever:
        flags.append(("retrieval.method", args.retriever, "--retriever"))
    if args.index:
        flags.append(("retrieval.index", args.index, "--index"))
        if not args.retriever:
            # A saved index knows its retriever: use it unless told otherwise.
            from ..retrieval.persist import read_manifest

            flags.append(("retrieval.method", read_manifest(args.index).get("retriever", "bm25"), "--index"))
    base: dict[str, Any] = {"cache": {"enabled": cache_default}}
    if args.cache is not None:
        flags.append(("cache.enabled", True, "--cache"))
        if args.cache:
            flags.append(("cache.path", args.cache, "--cache"))
    elif args.no_cache:
        flags.append(("cache.enabled", False, "--no-cache"))
    cfg = load_config(args.config, [*args.overrides, *flags], base=base)
    if args.top_k is not None:
        _inherit_top_k(cfg)
    return cfg


def _inherit_top_k(cfg: ExperimentConfig) -> None:
    """--top-k wins: a top_k the method's own section sets (config file or --set) is
    cleared to None, so the method inherits the flag's retrieval.top_k."""
    from ..methods.factory import get_method_class

    own = cfg.methods.get(get_method_class(cfg.architecture.name).section())
    if own and own.get("top_k") is not None:
        own["top_k"] = None
