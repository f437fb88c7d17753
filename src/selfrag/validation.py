"""Typed configuration models and one-line validation errors.

Every config section is a pydantic model that forbids unknown keys. A failure
becomes a :class:`~selfrag.errors.ConfigError` naming the dotted key, where it
came from, and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError

M = TypeVar("M", bound=BaseModel)


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
