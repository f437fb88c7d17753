"""Prompt templates shipped as ``.txt`` files, loaded by name.

Templates use ``{name}`` placeholders filled with :func:`render`. Values are
inserted verbatim (braces inside passages are safe).
"""

from __future__ import annotations

import string
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import ConfigError


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt`` shipped in the package."""
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
    """Fill ``{name}`` placeholders; a placeholder without a value is an error."""
    missing = placeholders(template) - set(values)
    if missing:
        raise ConfigError(f"prompt template needs value(s) for {sorted(missing)}")
    return template.format_map(values)
