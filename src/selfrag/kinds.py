"""Registries of kinds (retrievers, LLM backends): one entry per kind, by name.

An entry maps a name to the dotted path of the module that declares that
kind as its module-level ``KIND``. The module is imported the first time the
name is looked up, so listing the names imports nothing, and a kind's
description lives next to its code.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Kinds(Generic[T]):
    """Names -> modules declaring ``KIND``; ``find(name)`` returns that ``KIND``."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self.modules = dict(modules)

    def names(self) -> list[str]:
        """The registered names, in the order they were registered."""
        return list(self.modules)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.modules

    def find(self, name: Any) -> T | None:
        """The ``KIND`` registered as ``name``, or None for a name (or non-string) not registered."""
        if name not in self:
            return None
        kind = importlib.import_module(self.modules[name]).KIND
        if getattr(kind, "name", None) != name:
            raise TypeError(f"{self.modules[name]}.KIND is named {getattr(kind, 'name', None)!r}, registered as {name!r}")
        return kind

    def all(self) -> list[T]:
        """Every registered kind, in the order they were registered."""
        return [k for k in map(self.find, self.names()) if k is not None]
