"""Reading and writing document collections.

``load_corpus(path)`` reads a folder or a single file into passages through
:mod:`selfrag.ingest`: plain text, Markdown and HTML (PDF and Word with
``selfrag[docs]``) cut into passages titled ``file § heading``, and JSONL
files with one ``{"id"?, "title"?, "text"}`` object per line, taken as they
are. Text files must be UTF-8 (a byte-order mark is allowed).

In a folder, hidden entries (any path component starting with ``.``, such as
``.git/``) and symbolic links that resolve outside the folder are skipped
unless ``include_hidden`` / ``follow_external_links`` say otherwise; so are
files selfrag cannot read (not UTF-8, damaged, over the size caps of
``limits``, FIFOs and devices). One warning line names every skipped file and
why.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import DataError
from ..ingest import ChunkSettings, IngestLimits, SkippedEntries, collect, folder_files
from ..ingest.formats import described
from ..ingest.jsonl import read_documents, write_documents
from ..types import Document

log = logging.getLogger(__name__)

__all__ = ["SkippedEntries", "folder_files", "load_corpus", "read_documents", "write_documents"]


def load_corpus(
    path: str | Path,
    *,
    include_hidden: bool = False,
    follow_external_links: bool = False,
    chunks: ChunkSettings | None = None,
    limits: IngestLimits | None = None,
) -> list[Document]:
    """The passages of a folder or file (see the module docstring for the folder rules)."""
    p = Path(path).expanduser()
    found = collect(p, include_hidden=include_hidden, follow_external_links=follow_external_links, chunks=chunks,
                    limits=limits)
    if found.skipped:
        log.warning(found.skipped.summary(p))
    docs = found.documents
    if not docs:
        why = f" ({found.skipped.summary(p).split(': ', 1)[-1]})" if found.skipped else ""
        raise DataError(f"no documents in {p}{why}: add files selfrag reads: {described()}")
    return docs
