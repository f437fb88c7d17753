"""Typed configuration models, one-line validation errors, and checked JSON and text from outside.

Every config section is a pydantic model that forbids unknown keys. A failure
becomes a :class:`~selfrag.errors.ConfigError` naming the dotted key, where it
came from, and what was expected. :func:`read_yaml_file` reads a config
file's mapping (a file that is not UTF-8, not YAML or empty is one line
naming it) through :func:`load_yaml`, which refuses aliases that expand
beyond a bound. :func:`load_json` / :func:`decode_json`
parse JSON a user, a client or a server wrote with bounded nesting and no
lone surrogates; :func:`lone_surrogate` says why a string is not text.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError

M = TypeVar("M", bound=BaseModel)
_DECODER = json.JSONDecoder()


class StrictModel(BaseModel):
    """A config section: unknown keys are errors; values can be read like a dict."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in type(self).model_fields else default


def describe_error(exc: ValidationError, prefix: str = "", source: str = "") -> str:
    """The first validation problem as one line: dotted key, problem, expectation."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    key = ".".join(p for p in (prefix, loc) if p)
    where = f" (in {source})" if source else ""
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        model = exc.title
        return f"unknown config key '{key}'{where}; check the spelling (section {model})"
    value = err.get("input")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    msg = err.get("msg", "invalid value")
    return f"config key '{key}'{where}: {msg} (got {shown})"


def parse_model(model: type[M], data: Mapping[str, Any] | M | None, prefix: str = "", source: str = "") -> M:
    """Validate ``data`` into ``model`` or raise a one-line :class:`ConfigError`."""
    if isinstance(data, model):
        return data
    if data is None:
        data = {}
    if isinstance(data, BaseModel):
        data = data.model_dump()
    if not isinstance(data, Mapping):
        label = prefix or model.__name__
        raise ConfigError(f"config section '{label}' must be a mapping, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(describe_error(exc, prefix, source)) from None


def off_when_false(value: Any) -> Any:
    """YAML reads a bare ``off`` as False: a setting whose modes include ``off`` takes it back."""
    return "off" if value is False else value


def read_yaml_file(path: Path) -> dict[str, Any]:
    """A config file's top-level mapping; one-line ConfigError for a file that is missing, not UTF-8,
    not YAML, empty (or comments only) or not a mapping, naming the file."""
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder; give a YAML file (see configs/)")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"config file {path}:{line} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc.strerror or exc})") from None
    try:
        data = load_yaml(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML (nested too deeply)") from None
    if data is None:
        # An empty or comment-only file would run the default experiment, which nobody means.
        raise ConfigError(f"config file {path} is empty; give it at least one section (e.g. 'inherits: base.yaml')")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


# -- YAML aliases ----------------------------------------------------------------------
#
# A YAML alias (*a) repeats the node its anchor (&a) names without copying it, so a
# few hundred bytes of nested aliases ("billion laughs") stand for billions of values.
# PyYAML builds them as shared objects; whatever walks them later (pydantic validating a
# free-form mapping such as retrieval.index_params, a deep copy, a dump) expands them
# and runs out of memory. load_yaml counts the values a document expands to before
# anything is built and refuses one beyond the bound, and an alias inside itself.

MAX_YAML_VALUES = 100_000  # values a config expands to, aliases counted at each use; real configs hold hundreds


def load_yaml(text: str, source: str, *, max_values: int = MAX_YAML_VALUES) -> Any:
    """``yaml.safe_load(text)``, refusing a document that aliases expand beyond ``max_values`` values.

    Raises yaml.YAMLError for text that is not YAML and a one-line ConfigError
    naming ``source`` (a file, or ``--set KEY``) and the line for an alias bomb
    or an alias used inside the node it names.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, source, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, source: str, max_values: int) -> None:
    """Count the values under ``root`` as constructing it would produce them (each alias use in full)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(c)] for c in children)
            if size > max_values:
                raise ConfigError(
                    f"{_where(source, node)}: this YAML value holds more than {max_values:,} values, aliases "
                    "(*name) counted each time they are used; a config never needs that many: remove the aliases"
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise ConfigError(
                f"{_where(source, node)}: a YAML alias (*name) is used inside the value its anchor names; "
                "a config value cannot contain itself"
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)


def _where(source: str, node: yaml.Node) -> str:
    """``source:line``; a ``--set`` value is one line, named by its key alone."""
    return source if source.startswith("--set") else f"{source}:{node.start_mark.line + 1}"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


# -- JSON and text from outside --------------------------------------------------------
#
# Python's json module recurses once per level of nesting: a line of a few thousand
# "[" raises RecursionError (a traceback in the CLI, a 500 from the server), and a
# string may hold a lone UTF-16 surrogate ("\ud800") that no UTF-8 writer, SQLite or
# HTTP client can encode later. Every reader of JSON that a user, a client or another
# server wrote parses it with load_json / decode_json, which turn both into a
# json.JSONDecodeError (so callers' existing "not valid JSON" handling names the
# file and line) or, with surrogates="replace", put U+FFFD in place of the surrogate.
# An integer longer than Python converts (4,300 digits by default) is a
# JSONDecodeError too, where json itself raises a bare ValueError.

MAX_JSON_DEPTH = 100  # arrays and objects inside each other; real data stays far below
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _too_deep(text: str, start: int, max_depth: int) -> json.JSONDecodeError:
    """The error for nesting over ``max_depth``, at the bracket that goes too deep."""
    depth, pos = 0, start
    for match in _BRACKETS.finditer(text, start):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                pos = match.start()
                break
        elif token in "]}":
            depth -= 1
            if depth <= 0:
                break
    return json.JSONDecodeError(f"nested more than {max_depth} levels deep", text, pos)


def _too_long_integer(text: str, start: int) -> json.JSONDecodeError:
    """The error for an integer of more digits than Python converts, at its first digit."""
    limit = sys.get_int_max_str_digits() or 4300
    match = re.compile(rf"-?\d{{{limit + 1},}}").search(text, start)
    pos = match.start() if match else start
    return json.JSONDecodeError(f"an integer has more than {limit} digits; write it as a string", text, pos)


def _depth_exceeded(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``max_depth`` deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def _first_surrogate(value: Any) -> str | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if match := _SURROGATE.search(item):
                return match.group()
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def decode_json(
    text: str, pos: int = 0, *, max_depth: int = MAX_JSON_DEPTH, surrogates: str = "error"
) -> tuple[Any, int]:
    """One JSON value from ``text`` at ``pos`` (as ``JSONDecoder.raw_decode``), checked.

    Raises json.JSONDecodeError for bad JSON, nesting deeper than ``max_depth``,
    and (``surrogates="error"``) a string holding a lone surrogate; with
    ``surrogates="replace"`` such a surrogate becomes U+FFFD instead.
    """
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise _too_deep(text, pos, max_depth) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits())
        raise _too_long_integer(text, pos) from None
    segment_brackets = text.count("[", pos, end) + text.count("{", pos, end)
    if segment_brackets > max_depth and isinstance(value, (dict, list)) and _depth_exceeded(value, max_depth):
        raise _too_deep(text, pos, max_depth)
    if _SURROGATE_ESCAPE.search(text, pos, end) or _SURROGATE.search(text, pos, end):
        if surrogates == "replace":
            value = _replace_surrogates(value)
        elif (found := _first_surrogate(value)) is not None:
            where = text.find(f"\\u{ord(found):04x}", pos, end)
            where = text.lower().find(f"\\u{ord(found):04x}", pos, end) if where < 0 else where
            raise json.JSONDecodeError(
                f"a string holds the lone surrogate \\u{ord(found):04x}, which is not a character; "
                "write valid Unicode text", text, max(where, pos))
    return value, end


def load_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, surrogates: str = "error") -> Any:
    """``json.loads`` with the checks of :func:`decode_json` (bytes must be UTF-8: UnicodeDecodeError otherwise)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    start = len(text) - len(text.lstrip(" \t\n\r"))
    value, end = decode_json(text, start, max_depth=max_depth, surrogates=surrogates)
    if text[end:].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def lone_surrogate(text: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8, or None when it can.

    A command-line argument holding a byte that is not UTF-8 reaches Python as a
    surrogate (U+DC80..U+DCFF, "surrogateescape"); JSON can carry any other lone one.
    """
    match = _SURROGATE.search(text)
    if match is None:
        return None
    code = ord(match.group())
    at = match.start() + 1
    if 0xDC80 <= code <= 0xDCFF:
        return f"byte 0x{code - 0xDC00:02x} at character {at} is not UTF-8"
    return f"character {at} is the lone surrogate \\u{code:04x}, which is not a character"
