"""Reading documents into passages: formats, chunking, and what a folder holds.

``collect(path)`` reads a file or folder (plain text, Markdown, HTML, JSONL;
PDF and Word through ``selfrag[docs]``) into passages of about
``ChunkSettings.size`` tokens titled ``file § heading``, per file with its
content hash, so an index can re-read only the files that changed; a file
over the caps of ``IngestLimits`` is skipped, never read.
"""

from .chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    ChunkSettings,
    chunk_section,
    count_tokens,
)
from .folder import SkippedEntries, folder_files
from .formats import FORMATS, Format, described, format_for
from .limits import (
    DEFAULT_MAX_FILE_MB,
    DEFAULT_MAX_PASSAGES,
    DEFAULT_MAX_TEXT_MB,
    DEFAULT_MAX_UNPACKED_MB,
    IngestLimits,
)
from .loading import Collection, FileDocs, collect, read_from
from .sections import Section, Unreadable

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_FILE_MB",
    "DEFAULT_MAX_PASSAGES",
    "DEFAULT_MAX_TEXT_MB",
    "DEFAULT_MAX_UNPACKED_MB",
    "FORMATS",
    "ChunkSettings",
    "Collection",
    "FileDocs",
    "Format",
    "IngestLimits",
    "Section",
    "SkippedEntries",
    "Unreadable",
    "chunk_section",
    "collect",
    "count_tokens",
    "described",
    "read_from",
    "folder_files",
    "format_for",
]
