"""Which config a resumed run uses, and the check that it is the run's own.

``selfrag run --resume RUN_DIR`` reads ``RUN_DIR/config.yaml``. Given a CONFIG
as well, that config must resolve to the same settings (the number of
questions, the concurrency, the error-rate limit and the output folder may
change); otherwise answers from two different set-ups would be mixed in one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..config import ExperimentConfig, load_config, redact, with_absolute_paths
from ..errors import ConfigError
from .results import CONFIG_FILE, check_run_dir

# Settings a resumption may change. None changes an answer; the cache's place is resolved against
# the checkout, so a fresh clone elsewhere (resuming the benchmark's committed runs) differs there.
MAY_CHANGE = {"run.concurrency", "run.max_error_rate", "data.subset_size", "experiment.output_dir", "cache.path"}
REDACTED = "***"


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


def _has_redacted(data: Any) -> bool:
    if isinstance(data, Mapping):
        return any(_has_redacted(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_redacted(v) for v in data)
    return isinstance(data, str) and REDACTED in data


def resume_config(
    run_dir: str | Path, config_path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ExperimentConfig:
    run_dir = check_run_dir(Path(run_dir))
    stored_path = run_dir / CONFIG_FILE
    stored = load_config(stored_path)
    if config_path is None:
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
    diffs = setting_differences(cfg, run_dir)
    if diffs:
        raise ConfigError(
            f"the config differs from the run's {Path(run_dir) / CONFIG_FILE} at {', '.join(diffs[:4])}; "
            f"resume with the same settings, or give only --resume {run_dir}"
        )


def setting_differences(cfg: ExperimentConfig, run_dir: Path) -> list[str]:
    """Dotted keys where ``cfg`` differs from ``run_dir``'s stored config, those a resume may change
    aside (none when the directory stores no config)."""
    stored_path = Path(run_dir) / CONFIG_FILE
    if not stored_path.is_file():
        return []
    mine = redact(with_absolute_paths(cfg).to_dict())
    theirs = redact(load_config(stored_path).to_dict())
    return [k for k in config_differences(mine, theirs) if k not in MAY_CHANGE]
