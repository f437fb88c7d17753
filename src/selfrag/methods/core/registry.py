"""The table of methods by name, filled by :func:`register`.

Built-in methods are the modules of :mod:`selfrag.methods.catalog`, which
:mod:`selfrag.methods.factory` imports on first lookup; a method defined
anywhere else joins the table by decorating its class with :func:`register`.
"""

from __future__ import annotations

from .base import Method

_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    name = getattr(cls, "name", None)
    if not name:
        raise TypeError(f"{cls.__name__} has no 'name'")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not cls:
        raise TypeError(f"method name {name!r} is used by both {existing.__name__} and {cls.__name__}")
    _REGISTRY[name] = cls
    return cls


def registered() -> dict[str, type[Method]]:
    """Every method registered so far, by name, sorted."""
    return dict(sorted(_REGISTRY.items()))
