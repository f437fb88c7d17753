"""Walking a documents folder: which files to read, and what was left out and why.

Hidden entries (any path component starting with ``.``, such as ``.git/``)
and symbolic links that resolve outside the folder are skipped unless
``include_hidden`` / ``follow_external_links`` say otherwise. Files in a
format selfrag does not read, files whose format needs an extra that is not
installed, files that cannot be turned into text or are over a size cap, and
entries that are not regular files (a FIFO would block the reader forever, a
device never ends) are skipped too. All of them are named in one warning
line (:meth:`SkippedEntries.summary`) with the reason and what would read
them.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import DataError
from .files import kind_of


@dataclass
class SkippedEntries:
    """Entries of a documents folder left out, by reason (relative paths; folders end in "/")."""

    hidden: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    # extra -> files in a format that extra reads (e.g. "docs" -> ["paper.pdf"])
    needs_extra: dict[str, list[str]] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)  # a format selfrag does not read
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    empty: list[str] = field(default_factory=list)  # no text in it
    too_large: list[tuple[str, str]] = field(default_factory=list)  # (file, its size and the cap)
    special: list[tuple[str, str]] = field(default_factory=list)  # (entry, what it is: "a FIFO")

    def __len__(self) -> int:
        return (len(self.hidden) + len(self.external) + len(self.broken) + len(self.unsupported)
                + len(self.unreadable) + len(self.empty) + len(self.too_large) + len(self.special)
                + sum(len(v) for v in self.needs_extra.values()))

    def summary(self, folder: Path) -> str:
        """One line: how many entries were skipped, why, a few of them, and how to read them."""

        def part(items: list[str], one: str, many: str) -> str:
            shown = ", ".join(items[:3]) + (", ..." if len(items) > 3 else "")
            return f"{len(items)} {one if len(items) == 1 else many} ({shown})"

        def why(items: list[tuple[str, str]], one: str, many: str) -> str:
            return part([f"{f}: {reason}" for f, reason in items], one, many)

        parts, hints = [], []
        if self.hidden:
            parts.append(part(self.hidden, "hidden entry", "hidden entries"))
            hints.append("--include-hidden (data.include_hidden)")
        if self.external:
            parts.append(part(self.external, "symbolic link to outside the folder", "symbolic links to outside the folder"))
            hints.append("--follow-external-links (data.follow_external_links)")
        if self.broken:
            parts.append(part(self.broken, "broken symbolic link", "broken symbolic links"))
        for extra, files in sorted(self.needs_extra.items()):
            parts.append(part(files, "file", "files") + f" that need pip install 'selfrag[{extra}]'")
        if self.unreadable:
            parts.append(why(self.unreadable, "unreadable file", "unreadable files"))
        if self.too_large:
            parts.append(why(self.too_large, "file too large to read", "files too large to read"))
        if self.special:
            parts.append(why(self.special, "entry that is not a regular file", "entries that are not regular files"))
        if self.empty:
            parts.append(part(self.empty, "file with no text", "files with no text"))
        if self.unsupported:
            parts.append(part(self.unsupported, "file in a format selfrag does not read",
                              "files in formats selfrag does not read"))
        hint = f"; to read them use {' / '.join(hints)}" if hints else ""
        return f"{folder}: skipped {'; '.join(parts)}{hint}"


def folder_files(
    folder: Path, *, include_hidden: bool = False, follow_external_links: bool = False,
    readable: Callable[[str], bool] = lambda suffix: True,
) -> tuple[list[tuple[Path, PurePosixPath]], SkippedEntries]:
    """The regular files of ``folder`` as (path, path relative to the folder), sorted, and what was skipped.

    ``readable(suffix)`` says whether a file's suffix is a format selfrag knows; only entries
    that could hold documents (folders, links to folders, files in a known format) count as
    skipped when hidden or linked out. A link to a folder inside ``folder`` is not descended
    into (its files are read under their own path); a linked folder is entered once, so link
    cycles end.
    """
    root = folder.resolve()
    found: list[tuple[Path, PurePosixPath]] = []
    skipped = SkippedEntries()
    entered = {root}

    def relevant(entry: Path, is_dir: bool) -> bool:
        return is_dir or readable(entry.suffix.lower())

    def listing(directory: Path) -> Iterator[Path]:
        try:
            return iter(sorted(directory.iterdir(), key=lambda e: e.name))
        except OSError as exc:
            raise DataError(f"cannot read the folder {directory} ({exc.strerror or exc})") from None

    def visit(entry: Path, rel: PurePosixPath, real: Path) -> Path | None:
        """Note one entry (``real``: its path with the links above it resolved); the real path of a
        folder to walk into, else None."""
        if entry.name.startswith(".") and not include_hidden:
            is_dir = entry.is_dir()
            if relevant(entry, is_dir):
                skipped.hidden.append(f"{rel}/" if is_dir else str(rel))
            return None
        if entry.is_symlink():
            try:
                target = entry.resolve()
                exists = target.exists()
            except (OSError, RuntimeError):  # a link cycle
                exists = False
            if not exists:
                if relevant(entry, False):
                    skipped.broken.append(str(rel))
                return None
            outside = not target.is_relative_to(root)
            if outside and not follow_external_links:
                if relevant(entry, target.is_dir()):
                    skipped.external.append(f"{rel}/" if target.is_dir() else str(rel))
                return None
            if not outside and not include_hidden and _hidden(target.relative_to(root)):
                # a visible link to a hidden entry of the folder (notes.md -> .private/notes.md)
                if relevant(entry, target.is_dir()):
                    skipped.hidden.append(f"{rel}/" if target.is_dir() else str(rel))
                return None
            if target.is_dir():
                if outside and target not in entered:
                    entered.add(target)
                    return target
                return None
            real = target
        try:
            mode = entry.stat().st_mode
        except OSError:  # gone since the folder was listed
            return None
        if stat.S_ISDIR(mode):
            # a folder that is no link: its real path is its parent's and its name (no resolve(),
            # which costs a system call per level of a deep folder)
            if real not in entered:
                entered.add(real)
                return real
        elif stat.S_ISREG(mode):
            found.append((entry, rel))
        else:  # a FIFO, device or socket: never opened
            skipped.special.append((str(rel), kind_of(mode)))
        return None

    # Depth first in name order, as a recursive walk would go, with a stack of the folders being
    # listed instead of recursion: a folder nested thousands deep is no RecursionError.
    walking: list[tuple[Iterator[Path], PurePosixPath, Path]] = [(listing(folder), PurePosixPath(), root)]
    while walking:
        entries, rel_dir, real_dir = walking[-1]
        entry = next(entries, None)
        if entry is None:
            walking.pop()
        elif (real := visit(entry, rel := rel_dir / entry.name, real_dir / entry.name)) is not None:
            walking.append((listing(entry), rel, real))
    found.sort(key=lambda item: item[1].parts)
    return found, skipped


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)
