"""Methods by name: lookup, config merging and construction.

Every module under :mod:`selfrag.methods.catalog` is imported on the first
lookup, so adding a method is adding a module there (its class decorated
with :func:`~selfrag.methods.core.registry.register`); no list names them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from .. import defaults
from ..errors import ConfigError
from . import catalog
from .core.base import Method
from .core.registry import registered
from .critique.augmentations import load_augmentations

# Keys runners pass to every method; ignored by methods that do not use them.
COMMON_KEYS = {"top_k", "max_context_tokens"}
_discovered = False


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    for info in pkgutil.walk_packages(catalog.__path__, prefix=f"{catalog.__name__}."):
        importlib.import_module(info.name)
    _discovered = True


def available_methods() -> dict[str, type[Method]]:
    _discover()
    return registered()


def get_method_class(name: str) -> type[Method]:
    methods = available_methods()
    try:
        return methods[name]
    except KeyError:
        raise ConfigError(f"unknown method {name!r}; use one of: {', '.join(methods)}") from None


def resolve_method_config(cls: type[Method], config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge a method's own section into the top-level keys (the section wins)."""
    config = dict(config or {})
    section = config.pop(cls.section(), None) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"config section '{cls.section()}' must be a mapping")
    fields = cls.Config.model_fields
    merged: dict[str, Any] = {}
    for key, value in config.items():
        if key in fields:
            merged[key] = value
        elif isinstance(value, Mapping) or key in COMMON_KEYS:
            continue  # another method's section, or a common key this method does not use
        else:
            raise ConfigError(
                f"unknown config key '{key}' for method {cls.name}; allowed: {', '.join(fields) or 'none'}"
            )
    merged.update(section)
    return merged


def create_method(
    name: str | None = None,
    llm: Any = None,
    retriever: Any = None,
    config: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Method:
    """Build a method by name (None: :data:`selfrag.defaults.METHOD`, ``self_rag``); ``config``
    may hold its section nested (``{"self_rag": {...}}``).

    ``create_method(llm=llm, retriever=retriever)`` is the default method;
    ``create_method("vanilla_rag", llm, retriever)`` the baseline. An
    ``augmentations`` key of ``config`` becomes the method's augmentation stages.
    """
    if llm is None:
        raise TypeError("create_method() needs an llm (e.g. selfrag.llm.create_backend())")
    cls = get_method_class(name or defaults.METHOD)
    if config is not None and "augmentations" in config:
        config = dict(config)
        kwargs.setdefault("augmentations", load_augmentations({"augmentations": config.pop("augmentations")}))
    return cls(llm, retriever, resolve_method_config(cls, config), **kwargs)


# The seed codebase called this the architecture factory.
create_architecture = create_method
