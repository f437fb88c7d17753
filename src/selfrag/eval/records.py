"""Reading benchmark files record by record, each with the line it starts on.

Benchmarks come as JSON Lines, as one JSON array, or as one JSON object keyed
by id. All three are read here into ``(line, record)`` pairs so a loader can
say exactly where a bad record is. A loader raises :class:`InvalidRecord` for
a record it cannot use; :class:`RecordErrors` turns that into a
:class:`~selfrag.errors.DataError` naming file and line, or, with
``skip_invalid``, skips and counts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..validation import decode_json, load_json


class InvalidRecord(ValueError):
    """A record is malformed; the message says what is wrong with it."""


@dataclass
class RecordErrors:
    """Fail on the first malformed record, or skip and count them."""

    skip_invalid: bool = False
    skipped: int = 0
    examples: list[str] = field(default_factory=list)

    def invalid(self, path: Path, line: int, message: str) -> None:
        where = f"{path}:{line}: {message}"
        if not self.skip_invalid:
            raise DataError(f"{where} (set data.skip_invalid: true to skip malformed records)")
        self.skipped += 1
        if len(self.examples) < 5:
            self.examples.append(where)


def read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _syntax_error(path: Path, text: str, pos: int, what: str) -> DataError:
    return DataError(f"{path}:{_line_of(text, pos)}: not valid JSON ({what})")


def _decode(path: Path, text: str, pos: int) -> tuple[Any, int]:
    try:
        return decode_json(text, pos)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def iter_json_lines(path: Path, errors: RecordErrors) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` per non-blank line; a line that is not JSON is an invalid record."""
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, load_json(line)
        except json.JSONDecodeError as exc:
            errors.invalid(path, lineno, f"not valid JSON ({exc.msg})")


def iter_json_array(path: Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """``(line, element)`` for each element of a file holding one JSON array."""
    text = read_text(path) if text is None else text
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        raise _syntax_error(path, text, pos, "expected a JSON array")
    pos = _skip_space(text, pos + 1)
    if text.startswith("]", pos):
        return
    while True:
        start = pos
        value, pos = _decode(path, text, pos)
        yield _line_of(text, start), value
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
        elif text.startswith("]", pos):
            return
        else:
            raise _syntax_error(path, text, pos, "expected ',' or ']' between records")


def iter_json_object(path: Path, text: str | None = None) -> Iterator[tuple[int, str, Any]]:
    """``(line, key, value)`` for each member of a file holding one JSON object."""
    text = read_text(path) if text is None else text
    pos = _skip_space(text, 0)
    if not text.startswith("{", pos):
        raise _syntax_error(path, text, pos, "expected a JSON object")
    pos = _skip_space(text, pos + 1)
    if text.startswith("}", pos):
        return
    while True:
        start = pos
        key, pos = _decode(path, text, pos)
        if not isinstance(key, str):
            raise _syntax_error(path, text, start, "expected a string key")
        pos = _skip_space(text, pos)
        if not text.startswith(":", pos):
            raise _syntax_error(path, text, pos, "expected ':' after a key")
        value, pos = _decode(path, text, _skip_space(text, pos + 1))
        yield _line_of(text, start), key, value
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
        elif text.startswith("}", pos):
            return
        else:
            raise _syntax_error(path, text, pos, "expected ',' or '}' between records")


def iter_records(path: Path, errors: RecordErrors) -> Iterator[tuple[int, Any]]:
    """A JSON array file or a JSON Lines file (told apart by the first character)."""
    text = read_text(path)
    if text.lstrip().startswith("["):
        yield from iter_json_array(path, text)
    else:
        yield from iter_json_lines(path, errors)


# -- field helpers for loaders ------------------------------------------------


def need_str(record: dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` present, as a non-empty string."""
    for key in keys:
        if key in record:
            value = record[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str) or not value.strip():
                raise InvalidRecord(f"'{key}' must be a non-empty string, got {value!r:.60}")
            return value.strip()
    raise InvalidRecord(f"missing '{keys[0]}' field")


def need_object(value: Any, what: str = "record") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidRecord(f"expected a JSON object for the {what}, got {type(value).__name__}")
    return value


def str_list(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRecord(f"'{key}' must be a list of strings")
    return value
