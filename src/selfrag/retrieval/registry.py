"""Retrievers by name: one entry per kind of retriever.

Each entry names the module whose ``KIND`` (a :class:`~.base.RetrieverKind`)
says how to build, save, load and configure that retriever. Adding a
retriever is writing its module and adding its line here; building
(:func:`create_retriever`), config options (:func:`options_for`) and saved
indexes (:mod:`.persist`) all read the entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..kinds import Kinds
from ..types import Document
from .base import Retriever, RetrieverFactory, RetrieverKind

# name -> the module that declares its KIND (imported on first use).
RETRIEVERS: Kinds[RetrieverKind] = Kinds(
    {
        "bm25": "selfrag.retrieval.bm25",
        "dense": "selfrag.retrieval.dense",
        "hybrid": "selfrag.retrieval.hybrid",
        "milvus": "selfrag.retrieval.milvus",
    }
)


def available_retrievers() -> list[str]:
    return sorted(RETRIEVERS.names())


def find_kind(name: Any) -> RetrieverKind | None:
    """The registered kind called ``name``, or None."""
    return RETRIEVERS.find(name)


def get_kind(name: str) -> RetrieverKind:
    """The registered kind called ``name``; a one-line ConfigError listing the names otherwise."""
    kind = RETRIEVERS.find(name)
    if kind is None:
        raise ConfigError(f"unknown retriever {name!r}; use one of: {', '.join(available_retrievers())}")
    return kind


def options_for(name: str, settings: Any) -> dict[str, Any]:
    """The options retriever ``name`` takes, from the ``retrieval`` config section ({} for an unknown name)."""
    kind = RETRIEVERS.find(name)
    return kind.options_from(settings) if kind is not None else {}


def create_retriever(method: str, documents: Sequence[Document] | None = None, **options: Any) -> Retriever:
    """Build (and index, when documents are given) the retriever called ``method``."""
    return get_kind(method).build(documents, **options)


def retriever_factory(method: str, **options: Any) -> RetrieverFactory:
    """A function that indexes a document list with the named retriever (for per-question corpora)."""
    kind = get_kind(method)  # an unknown name fails here, with the helpful error

    def build(documents: Sequence[Document]) -> Retriever:
        return kind.build(documents, **options)

    return build
