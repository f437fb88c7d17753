"""Config files: ``inherits:`` chains, ``--set`` overrides, validation with the key's file, paths."""


from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..data.shipped import PREFIX as SAMPLE_PREFIX
from ..errors import ConfigError
from ..redaction import redact
from ..validation import describe_error, load_yaml, parse_model, read_yaml_file
from .sections import DATASETS, ExperimentConfig  # noqa: F401


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _record_sources(data: Mapping[str, Any], source: str, sources: dict[str, str], prefix: str = "") -> None:
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        sources[dotted] = source
        if isinstance(value, Mapping):
            _record_sources(value, source, sources, dotted)


def load_raw(path: str | Path, _chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], dict[str, str]]:
    """Resolve ``inherits:`` chains; return the merged mapping and each key's source file."""
    p = Path(path).expanduser().resolve()
    if p in _chain:
        cycle = " -> ".join(str(c.name) for c in (*_chain, p))
        raise ConfigError(f"config inheritance cycle: {cycle}")
    data = read_yaml_file(p)
    parent = data.pop("inherits", None)
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise ConfigError(f"{p}: 'inherits' must be a file path, got {parent!r}")
        merged, sources = load_raw(p.parent / parent, (*_chain, p))
    _record_sources(data, str(p), sources)
    return deep_merge(merged, data), sources


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], value parsed as YAML)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set needs dotted.key=value, got {item!r}")
    try:
        value = load_yaml(raw, f"--set {key}") if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


# A --set string ("a.b=value", parsed as YAML) or a (dotted key, value[, source]) tuple taken as is.
Override = str | tuple[str, Any] | tuple[str, Any, str]


def apply_overrides(data: dict[str, Any], overrides: Iterable[Override], sources: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for item in overrides:
        if isinstance(item, str):
            path, value = parse_override(item)
            source = "--set"
        else:
            path, value = item[0].split("."), item[1]
            source = item[2] if len(item) > 2 else "--set"
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = value
        sources[".".join(path)] = source
    return out


def _source_for(key: str, sources: Mapping[str, str]) -> str:
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:n]))
        if found:
            return found
    for dotted, found in sources.items():
        if dotted.startswith(key + "."):
            return found
    return ""


def _check_top_level(data: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """Refuse a top-level key that is neither a section nor a method's section, naming its file."""
    from ..methods.factory import available_methods

    fixed = set(ExperimentConfig.model_fields) - {"methods"}
    owners = {cls.section() for cls in available_methods().values()}
    for key, value in data.items():
        if key in fixed or key == "methods":
            continue
        where = _source_for(str(key), sources) or "config"
        if key not in owners:
            raise ConfigError(
                f"unknown config key '{key}' (in {where}); top-level sections are "
                f"{', '.join(sorted(fixed))} or a method section: {', '.join(sorted(owners))}"
            )
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"config section '{key}' (in {where}) must be a mapping of its keys, got {type(value).__name__}"
            )


def validate(data: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> ExperimentConfig:
    """Validate a merged mapping, including every method section present."""
    sources = sources or {}
    _check_top_level(data, sources)
    try:
        cfg = ExperimentConfig.model_validate(dict(data))
    except ValidationError as exc:
        loc = ".".join(str(p) for p in exc.errors()[0].get("loc", ()))
        raise ConfigError(describe_error(exc, source=_source_for(loc, sources))) from None
    _validate_method_sections(cfg, sources)
    return cfg


def _validate_method_sections(cfg: ExperimentConfig, sources: Mapping[str, str]) -> None:
    from ..methods.core.base import retired_message
    from ..methods.factory import available_methods, get_method_class

    owners = {cls.section(): cls for cls in available_methods().values()}
    get_method_class(cfg.architecture.name)  # unknown method -> one-line error
    for section, values in cfg.methods.items():
        cls = owners[section]  # unknown sections and non-mappings were refused by _check_top_level
        for key in values:
            if key in cls.Config.RETIRED:
                src = _source_for(f"{section}.{key}", sources)
                raise ConfigError(retired_message(f"{section}.{key}", cls.Config.RETIRED[key])
                                  + (f" (in {src})" if src else ""))
            if key not in cls.Config.model_fields:
                src = _source_for(f"{section}.{key}", sources)
                raise ConfigError(
                    f"unknown config key '{section}.{key}'{f' (in {src})' if src else ''}; "
                    f"allowed: {', '.join(cls.Config.model_fields) or 'none'}"
                )
        parse_model(cls.Config, values, prefix=section, source=_source_for(section, sources))


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[Override] = (),
    base: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """Load, merge and validate a config file (or only ``base``) with ``--set`` overrides."""
    data: dict[str, Any] = dict(base or {})
    sources: dict[str, str] = {}
    if path is not None:
        loaded, sources = load_raw(path)
        data = deep_merge(data, loaded)
    data = apply_overrides(data, overrides, sources)
    return validate(data, sources)


# Config keys that hold file-system paths, resolved against the working directory (data.path
# may instead name a shipped sample, ``sample:NAME``: selfrag.data.shipped).
PATH_KEYS = (
    ("experiment", "output_dir"),
    ("data", "path"),
    ("data", "corpus"),
    ("cache", "path"),
    ("retrieval", "index"),
)


def with_absolute_paths(cfg: ExperimentConfig, cwd: str | Path | None = None) -> ExperimentConfig:
    """A copy whose path keys are absolute (so a run directory's config works from anywhere)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    out = cfg.model_copy(deep=True)
    for section, key in PATH_KEYS:
        part = getattr(out, section)
        value = getattr(part, key)
        if value and not str(value).startswith(SAMPLE_PREFIX):  # a shipped sample is not a file path
            setattr(part, key, str((base / Path(value).expanduser()).resolve()))
    return out


def dump_yaml(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(redact(cfg.to_dict()), sort_keys=False)
