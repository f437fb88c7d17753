"""Methods by name.

Every module in :mod:`selfrag.methods` that defines a method decorates it with
:func:`register`; :func:`available_methods` imports them all, so adding a
method means adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .base import Method

_REGISTRY: dict[str, type[Method]] = {}
# Modules of this package that define no method (the rest are imported to register theirs).
_INFRA = {
    "answer_format", "answer_shape", "augmentations", "base", "concurrency", "context", "critique",
    "registry", "self_rag_decision", "self_rag_modes", "text", "trace",
}
_discovered = False

# Keys runners pass to every method; ignored by methods that do not use them.
COMMON_KEYS = {"top_k", "max_context_tokens"}


def register(cls: type[Method]) -> type[Method]:
    name = getattr(cls, "name", None)
    if not name:
        raise TypeError(f"{cls.__name__} has no 'name'")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not cls:
        raise TypeError(f"method name {name!r} is used by both {existing.__name__} and {cls.__name__}")
    _REGISTRY[name] = cls
    return cls


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    package = importlib.import_module(__package__)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in _INFRA and not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")
    _discovered = True


def available_methods() -> dict[str, type[Method]]:
    _discover()
    return dict(sorted(_REGISTRY.items()))


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
    name: str,
    llm: Any,
    retriever: Any = None,
    config: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Method:
    """Build a method by name; ``config`` may hold its section nested (``{"self_rag": {...}}``).

    An ``augmentations`` key of ``config`` becomes the method's augmentation stages.
    """
    cls = get_method_class(name)
    if config is not None and "augmentations" in config:
        from .augmentations import load_augmentations

        config = dict(config)
        kwargs.setdefault("augmentations", load_augmentations({"augmentations": config.pop("augmentations")}))
    return cls(llm, retriever, resolve_method_config(cls, config), **kwargs)


# The seed codebase called this the architecture factory.
create_architecture = create_method
