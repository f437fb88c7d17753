"""How much one document file may cost to read: caps with documented defaults.

Reading a file costs many times its size in memory by the time its passages
are indexed (its text, its sections, its passages, the index's terms), and a
Word file can unpack to hundreds of times its size. So a file over a cap is
not read further: it is skipped, and the warning line names its size, the
cap and the setting that raises it (docs/documents.md, "Size limits").

- ``max_text_mb`` (config ``data.max_text_mb``, default 10): the most text
  one file may give. A text, Markdown or HTML file larger than this is not
  read at all; a PDF or Word file whose text comes to more is skipped before
  its text is cut into passages.
- ``max_file_mb`` (``data.max_file_mb``, default 100): the largest PDF or
  Word file read, and the most a Word file's parts may unpack to together.
- ``max_unpacked_mb`` (``data.max_unpacked_mb``, default 16): the most the
  parts of a Word file that python-docx parses (all but its images) may
  unpack to, checked on the zip's directory before anything is decompressed.
- ``max_passages`` (``data.max_passages``, default 50,000): the most
  passages one file may be cut into. Each passage costs about 600 bytes
  besides its text, so a file of a million one-word sections (9 MB of
  ``# h`` and ``x`` lines) would take a gigabyte; an ordinary file under the
  text cap gives about 15,000 at most.

JSONL files are passages already (a benchmark corpus is one) and are not
capped. The defaults keep one file's reading and indexing within about
10 s and 500 MB on a small machine (measured in docs/documents.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

DEFAULT_MAX_TEXT_MB = 10
DEFAULT_MAX_FILE_MB = 100
DEFAULT_MAX_UNPACKED_MB = 16
DEFAULT_MAX_PASSAGES = 50_000
MB = 1024 * 1024
_SETTINGS = ("max_text_mb", "max_file_mb", "max_unpacked_mb", "max_passages")


class TooLarge(Exception):
    """A file over one of the caps; the message names the size, the cap and the setting."""


@dataclass(frozen=True)
class IngestLimits:
    max_text_mb: float = DEFAULT_MAX_TEXT_MB
    max_file_mb: float = DEFAULT_MAX_FILE_MB
    max_unpacked_mb: float = DEFAULT_MAX_UNPACKED_MB
    max_passages: int = DEFAULT_MAX_PASSAGES

    def __post_init__(self) -> None:
        for name in _SETTINGS[:3]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"data.{name} must be a number of megabytes above 0, got {value!r}")
        if isinstance(self.max_passages, bool) or not isinstance(self.max_passages, int) or self.max_passages < 1:
            raise ConfigError(f"data.max_passages must be a whole number above 0, got {self.max_passages!r}")

    @classmethod
    def of(cls, data: Any) -> IngestLimits:
        """The limits a config's ``data`` section sets (the defaults for what it leaves out, or for None)."""
        defaults = cls()
        return cls(*(getattr(data, name, getattr(defaults, name)) for name in _SETTINGS))

    @property
    def text_bytes(self) -> int:
        return int(self.max_text_mb * MB)

    @property
    def file_bytes(self) -> int:
        return int(self.max_file_mb * MB)

    @property
    def unpacked_bytes(self) -> int:
        return int(self.max_unpacked_mb * MB)

    def check_text(self, size: int) -> None:
        """A text file's size on disk, or the text a PDF or Word file gave."""
        if size > self.text_bytes:
            raise TooLarge(f"{_mb(size)} of text, over the {_mb(self.text_bytes)} limit (data.max_text_mb)")

    def check_file(self, size: int) -> None:
        if size > self.file_bytes:
            raise TooLarge(f"{_mb(size)}, over the {_mb(self.file_bytes)} limit (data.max_file_mb)")

    def check_package(self, size: int) -> None:
        """What a Word file's parts unpack to together."""
        if size > self.file_bytes:
            raise TooLarge(f"unpacks to {_mb(size)}, over the {_mb(self.file_bytes)} limit (data.max_file_mb)")

    def check_passages(self, count: int) -> None:
        if count > self.max_passages:
            raise TooLarge(f"cut into more than {self.max_passages:,} passages (data.max_passages)")

    def check_unpacked(self, size: int, what: str = "its XML unpacks") -> None:
        """What the parts of a Word file that are parsed unpack to; or (``what``) a PDF's page content."""
        if size > self.unpacked_bytes:
            raise TooLarge(
                f"{what} to {_mb(size)}, over the {_mb(self.unpacked_bytes)} limit (data.max_unpacked_mb)"
            )


def _mb(size: int) -> str:
    if size < MB:
        return f"{size / 1024:.0f} KB"
    return f"{size / MB:.1f} MB" if size < 100 * MB else f"{size / MB:.0f} MB"
