"""Prompt templates shipped as ``.txt`` files, loaded by name.

Templates use ``{name}`` placeholders filled with :func:`render`. Values are
inserted verbatim (braces inside passages are safe), except the values that
come from the person asking (:data:`UNTRUSTED`: the question and the
conversation before it), which are neutralised like passages
(:func:`selfrag.reflection.tokens.neutralize`: ``[IsSup]`` becomes ``(IsSup)``),
so a question cannot plant a verdict that a model echoes into its critique.
Ordinary text comes out unchanged.

Set ``SELFRAG_PROMPT_DIR`` to a directory to override templates by name: a
file ``<dir>/<name>.txt`` replaces the packaged one; others stay packaged.
"""

from __future__ import annotations

import os
import string
from functools import cache
from importlib import resources
from pathlib import Path

from ..errors import ConfigError
from ..reflection.tokens import neutralize

PROMPT_DIR_ENV = "SELFRAG_PROMPT_DIR"
# Placeholders whose values are untrusted text from the person asking (passages are
# neutralised where they are formatted: methods/core/context.py, reflection.tokens.paragraph).
UNTRUSTED = frozenset({"question", "conversation"})


def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt``: from ``$SELFRAG_PROMPT_DIR`` if it has one, else packaged."""
    return _load_prompt(name, os.environ.get(PROMPT_DIR_ENV, ""))


@cache
def _load_prompt(name: str, override_dir: str) -> str:
    if override_dir:
        folder = Path(override_dir)
        if not folder.is_dir():
            raise ConfigError(
                f"{PROMPT_DIR_ENV}={override_dir} is not a directory; point it at a folder of "
                "<name>.txt templates or unset it"
            )
        custom = folder / f"{name}.txt"
        if custom.is_file():
            return custom.read_text(encoding="utf-8")
    try:
        return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no prompt template named {name!r} in selfrag/prompts") from None


def load_prompt_file(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"prompt file not found: {p}")
    return p.read_text(encoding="utf-8")


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def render(template: str, **values: str) -> str:
    """Fill ``{name}`` placeholders; a placeholder without a value is an error.

    The values of :data:`UNTRUSTED` placeholders are neutralised first.
    """
    missing = placeholders(template) - set(values)
    if missing:
        raise ConfigError(f"prompt template needs value(s) for {sorted(missing)}")
    safe = {k: neutralize(v) if k in UNTRUSTED and isinstance(v, str) else v for k, v in values.items()}
    return template.format_map(safe)
