"""The Retriever protocol.

A retriever is built over a collection (``index(documents)``), answers
``await retrieve(query, top_k)`` with a :class:`~selfrag.types.RetrievalResult`
whose scores descend, and persists itself with ``save(dir)`` /
``load(dir)``. Per-question corpora (HotpotQA's ten paragraphs) build a small
index per question through a :class:`RetrieverFactory`.

Each kind of retriever is described once, by the :class:`RetrieverKind` its
module declares as ``KIND``: how to build one, how to load a saved one, the
files its ``save`` writes and the config options it takes. The registry
(:mod:`.registry`) maps names to those modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..types import Document, RetrievalResult


@runtime_checkable
class Retriever(Protocol):
    name: str

    @property
    def documents(self) -> Sequence[Document]: ...

    def index(self, documents: Sequence[Document]) -> None: ...

    async def retrieve(self, query: str, top_k: int) -> RetrievalResult: ...

    def save(self, path: str | Path) -> None: ...


# Builds an indexed retriever over a list of documents.
RetrieverFactory = Callable[[Sequence[Document]], Retriever]


@dataclass(frozen=True)
class RetrieverKind:
    """Everything selfrag needs to know about one kind of retriever."""

    name: str
    build: Callable[..., Retriever]  # (documents or None, **options): indexed when documents are given
    load: Callable[..., Retriever]  # (index directory, **load options): what save() wrote there
    files: frozenset[str]  # every file (relative, "/"-separated) save() may write, besides manifest.json
    # Config options it takes (``retrieval.<option>``), each with the value that means "not set":
    # a value that is None or that value is left out, so the retriever's own default applies.
    options: Mapping[str, Any] = field(default_factory=dict)
    # The options load() takes (query-time settings); None: every option given (load() checks them).
    load_options: tuple[str, ...] | None = ()
    # Options build() takes besides the config ones, set by callers (e.g. cache, show_progress).
    build_options: frozenset[str] = frozenset()

    def takes(self, option: str) -> bool:
        """Whether build() takes ``option`` (from the config or from a caller)."""
        return option in self.options or option in self.build_options

    def options_from(self, settings: Any) -> dict[str, Any]:
        """The options this kind takes, read from ``settings`` (the ``retrieval`` config section)."""
        out = {}
        for option, unset in self.options.items():
            value = getattr(settings, option)
            if value is not None and value != unset:
                out[option] = value
        return out

    def open(self, path: Path, options: Mapping[str, Any]) -> Retriever:
        """The retriever saved at ``path``, with the query-time ``options`` it takes applied."""
        wanted = self.load_options
        return self.load(path, **{k: v for k, v in options.items() if wanted is None or k in wanted})
