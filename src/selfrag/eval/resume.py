"""Which config a resumed run uses, and the check that it is the run's own.

``selfrag run --resume RUN_DIR`` reads ``RUN_DIR/config.yaml``. Given a CONFIG
as well, that config must resolve to the same settings (the number of
questions, the concurrency, the error-rate limit and the output folder may
change); otherwise answers from two different set-ups would be mixed in one run.

The stored config holds the method's section as written, so a default changed in
the code since the run started would pass unseen. The run's summary therefore
records every setting the method ran with (``method_settings``, defaults
included); where it is present, the method is compared on those instead of on
the section's text: a changed default is refused, and setting the run's value
explicitly resumes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..config import ExperimentConfig, load_config, redact, with_absolute_paths
from ..errors import ConfigError, DataError
from .results import CONFIG_FILE, SUMMARY_FILE, check_run_dir, read_json

# Settings a resumption may change. None changes an answer; the cache's place is resolved against
# the checkout, so a fresh clone elsewhere (resuming the benchmark's committed runs) differs there.
MAY_CHANGE = {"run.concurrency", "run.max_error_rate", "data.subset_size", "experiment.output_dir", "cache.path"}
REDACTED = "***"
# The summary's key for every setting of the method (method_settings below).
METHOD_SETTINGS = "method_settings"


def config_differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested mappings."""
    out = []
    for key in sorted(set(a) | set(b)):
        dotted = f"{prefix}.{key}" if prefix else str(key)
        va, vb = a.get(key), b.get(key)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out.extend(config_differences(va, vb, dotted))
        elif va != vb:
            out.append(dotted)
    return out


def method_settings(cfg: ExperimentConfig) -> dict[str, Any]:
    """Every setting of ``cfg``'s method, the code's defaults included."""
    from ..methods.factory import get_method_class

    cls = get_method_class(cfg.architecture.name)
    return cls.resolve_config(cfg.methods.get(cls.section()), cfg.inherited()).model_dump(mode="json")


def _recorded_settings(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        return None
    recorded = read_json(path).get(METHOD_SETTINGS)
    return recorded if isinstance(recorded, dict) else None


def _has_redacted(data: Any) -> bool:
    if isinstance(data, Mapping):
        return any(_has_redacted(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_redacted(v) for v in data)
    return isinstance(data, str) and REDACTED in data


def stored_config_missing(run_dir: Path) -> str | None:
    """``"missing"``, ``"empty"`` or ``"damaged (why)"`` when the run's config.yaml cannot tell its
    settings (a run stopped while an older selfrag wrote it in place, before the file was written
    through a rename); else None."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        return "missing"
    try:
        if not path.read_bytes().strip():
            return "empty"
    except OSError:
        return None  # reading it fails again, with its own one-line error, where it is loaded
    try:
        load_config(path)
    except ConfigError as exc:
        why = str(exc).replace(str(path.resolve()), "").replace(str(path), "").strip(" :")
        return "damaged (" + re.sub(r"^(\d+):", r"line \1:", why) + ")"
    return None


def _what_it_ran(run_dir: Path) -> str:
    """`` (it ran METHOD on DATASET)`` from the run's summary, to help find its config; or nothing."""
    summary = _summary(run_dir)
    if not summary.get("method"):
        return ""
    on = f" on {summary['dataset']}" + (f" ({summary['data_path']})" if summary.get("data_path") else "")
    return f" (it ran {summary['method']}{on if summary.get('dataset') else ''})"


def _summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        return {}
    try:
        summary = read_json(path)
    except DataError:
        return {}
    return summary if isinstance(summary, dict) else {}


def resume_config(
    run_dir: str | Path, config_path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ExperimentConfig:
    run_dir = check_run_dir(Path(run_dir), config_optional=True)
    stored_path = run_dir / CONFIG_FILE
    if config_path is None and (state := stored_config_missing(run_dir)) is not None:
        when = "before" if state == "missing" else "while"  # a damaged file: torn by a kill mid-write
        raise ConfigError(
            f"{stored_path} is {state} (the run was stopped {when} it was written){_what_it_ran(run_dir)}; "
            f"resume with the config the run was started with: selfrag run CONFIG --resume {run_dir}"
        )
    if config_path is None:
        stored = load_config(stored_path)
        if _has_redacted(stored.to_dict()):
            raise ConfigError(
                f"{stored_path} has redacted secrets; resume with the original config: "
                f"selfrag run CONFIG --resume {run_dir}"
            )
        return load_config(stored_path, overrides)
    # Whether it resolves to the run's own settings is checked where every resume passes: the runner.
    return load_config(config_path, overrides)


def check_same_settings(cfg: ExperimentConfig, run_dir: Path) -> None:
    """Refuse to resume ``run_dir`` with settings other than those its answers were written with.

    The runner calls it for every resume (the command line and the Python API alike), so answers
    from two set-ups are never mixed in one run. A run directory without a stored config (written
    before configs were stored) is not checked.
    """
    if stored_config_missing(run_dir) is not None:
        _check_summary(cfg, Path(run_dir))
    diffs = setting_differences(cfg, run_dir)
    if diffs:
        raise ConfigError(
            f"the config differs from the run's {Path(run_dir) / CONFIG_FILE} at {', '.join(diffs[:4])}; "
            f"resume with the same settings, or give only --resume {run_dir}"
        )
    changed = default_changes(cfg, run_dir)
    if changed:
        raise ConfigError(
            f"the method's settings differ from those {run_dir}'s answers were written with at "
            f"{'; '.join(changed[:4])} (a default changed since the run started); set the run's value "
            "in the config (or with --set KEY=VALUE) to resume, or start a new run"
        )


def _check_summary(cfg: ExperimentConfig, run_dir: Path) -> None:
    """Without a stored config, the method and dataset the summary records must be the config's."""
    summary = _summary(run_dir)
    pairs = (("method", "architecture.name", cfg.architecture.name), ("dataset", "data.dataset", cfg.data.dataset))
    for key, dotted, mine in pairs:
        theirs = summary.get(key)
        if theirs and theirs != mine:
            raise ConfigError(
                f"{run_dir} ran {key} {theirs!r}, and the config gives {dotted} {mine!r}; resume it with the "
                f"config it was started with: selfrag run CONFIG --resume {run_dir}"
            )


def setting_differences(cfg: ExperimentConfig, run_dir: Path) -> list[str]:
    """Dotted keys where ``cfg`` differs from ``run_dir``'s stored config, those a resume may change
    aside (none when the directory stores no config, or an empty one)."""
    stored_path = Path(run_dir) / CONFIG_FILE
    if stored_config_missing(run_dir) is not None:
        return []
    mine = redact(with_absolute_paths(cfg).to_dict())
    stored = load_config(stored_path)
    theirs = redact(stored.to_dict())
    diffs = [k for k in config_differences(mine, theirs) if k not in MAY_CHANGE]
    if _recorded_settings(run_dir) is not None and cfg.architecture.name == stored.architecture.name:
        # The method is compared on every setting it ran with (default_changes), not on its text.
        section = _section(cfg)
        diffs = [k for k in diffs if k != section and not k.startswith(section + ".")]
    return diffs


def default_changes(cfg: ExperimentConfig, run_dir: Path) -> list[str]:
    """``key (then, now)`` for each setting of the method that differs from the one the run's summary
    records (none when it records none: runs from before the record)."""
    recorded = _recorded_settings(run_dir)
    if recorded is None:
        return []
    now = method_settings(cfg)
    section = _section(cfg)
    recorded = _method_class(cfg).Config.upgrade(recorded)
    return [
        f"{section}.{key} ({_at(recorded, key)!r} then, {_at(now, key)!r} now)"
        for key in config_differences(now, recorded)
    ]


def _method_class(cfg: ExperimentConfig) -> Any:
    from ..methods.factory import get_method_class

    return get_method_class(cfg.architecture.name)


def _section(cfg: ExperimentConfig) -> str:
    return _method_class(cfg).section()


def _at(data: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)  # type: ignore[assignment]
    return data
