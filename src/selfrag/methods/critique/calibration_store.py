"""The retrieval decision's calibration, kept on disk per model and prompt.

Calibrating the "auto" threshold asks the model about twelve anchor questions
(:class:`~selfrag.methods.critique.decision.Calibration`). The result depends
only on the model, the decision prompt and the anchors, so it is kept in a
small JSON file and every later process with the same model reads it instead
of asking again: a second ``selfrag ask`` makes no calibration call.

The file is ``.selfrag/calibration.json`` (beside the LLM call cache,
``.selfrag/cache.db``), or wherever ``SELFRAG_CALIBRATION_CACHE`` points;
``SELFRAG_CALIBRATION_CACHE=off`` keeps nothing. Entries are keyed by the
sha256 of the backend's spec, its model name, the size and modification time
of a local model file, the prompt and the anchors, so a changed model or
prompt is calibrated afresh. A file that cannot be read or written is ignored
(calibration then runs as if there were no file), with one log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENV_VAR = "SELFRAG_CALIBRATION_CACHE"
DEFAULT_PATH = ".selfrag/calibration.json"
_LOCK = threading.Lock()


def store_path() -> Path | None:
    """The calibration file in use, or None when ``SELFRAG_CALIBRATION_CACHE`` turns it off."""
    value = os.environ.get(ENV_VAR, DEFAULT_PATH).strip()
    if value.lower() in ("", "0", "off", "false", "no", "none"):
        return None
    return Path(value).expanduser()


def model_identity(llm: Any) -> str:
    """What tells one model from another: spec, model name, and a local file's size and mtime."""
    parts = [str(getattr(llm, "spec", "")), str(getattr(llm, "model", ""))]
    path = getattr(llm, "model_path", None)
    if path is not None:
        try:
            stat = Path(path).stat()
            parts += [str(stat.st_size), str(int(stat.st_mtime))]
        except OSError:
            pass
    return "\x1f".join(parts)


def calibration_key(llm: Any, template: str, anchors: Sequence[str]) -> str:
    text = "\x1e".join([model_identity(llm), template, *anchors])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.info("calibration file %s ignored (%s)", path, type(exc).__name__)
        return {}
    return data if isinstance(data, dict) else {}


def load(key: str) -> dict[str, Any] | None:
    """The kept calibration for ``key``, or None."""
    path = store_path()
    if path is None:
        return None
    entry = _read(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("threshold"), int | float):
        return None
    return entry


def save(key: str, entry: dict[str, Any]) -> Path | None:
    """Keep ``entry`` under ``key`` (written atomically); the file's path, or None when nothing was kept."""
    path = store_path()
    if path is None:
        return None
    with _LOCK:
        try:
            data = _read(path)
            data[key] = entry
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".calibration-", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("calibration not kept in %s (%s); the next process calibrates again", path, exc.strerror)
            return None
    return path
