"""Where a model's fitted critic is found: by the SHA-256 of its model file.

``selfrag critic fit`` writes ``<cache>/critics/<sha256>.json`` (the user's
cache: ``$XDG_CACHE_HOME/selfrag``, else ``~/.cache/selfrag``;
``SELFRAG_CRITIC_DIR`` names another folder). A model with no fit there uses a
fit shipped in the package for that file (the embedded model's), else the
packaged defaults, and says so once per process with the command that fits
one. A fit file that cannot be read is the same: one warning, the defaults.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...llm.model_files import cache_dir, file_sha256
from ...reflection.critic_fit import DEFAULT_FIT, CriticFit, packaged

log = logging.getLogger("selfrag")


def critic_dir() -> Path:
    return Path(os.environ["SELFRAG_CRITIC_DIR"]) if os.environ.get("SELFRAG_CRITIC_DIR") else cache_dir() / "critics"


def model_sha256(llm: Any) -> str | None:
    """The SHA-256 of the backend's model file (None: a backend without one, an API model)."""
    path = getattr(llm, "model_path", None)
    return file_sha256(path) if path is not None else None


def fit_path(sha256: str) -> Path:
    return critic_dir() / f"{sha256}.json"


@cache
def _found(spec: str, sha256: str | None) -> tuple[CriticFit, str]:
    """The fit and where it came from, once per model per process."""
    if sha256 is not None:
        path = fit_path(sha256)
        if path.is_file():
            try:
                return CriticFit.read(path), str(path)
            except ConfigError as exc:
                log.warning("%s; using the packaged defaults: fit it again with `selfrag critic fit --llm %s`",
                            exc, spec)
                return _defaults(), "packaged defaults"
        shipped = packaged(f"{sha256}.json")
        if shipped is not None:
            return shipped, "packaged fit"
    else:  # no model file to fit for (a scripted backend): the defaults, nothing to tell the user
        return _defaults(), "packaged defaults"
    log.warning("no fitted critic for %s; using the packaged defaults: fit one with `selfrag critic fit --llm %s`",
                spec, spec)
    return _defaults(), "packaged defaults"


def _defaults() -> CriticFit:
    fit = packaged(DEFAULT_FIT)
    if fit is None:
        raise ConfigError(f"the packaged critic fit {DEFAULT_FIT} is missing; reinstall selfrag")
    return fit


_installed: list[tuple[CriticFit, str]] = []


def load_fit(llm: Any) -> tuple[CriticFit, str]:
    """The critic fit for ``llm``'s model, and where it came from (a file, the packaged fit, the defaults)."""
    if _installed:
        return _installed[-1]
    return _found(str(llm.spec), model_sha256(llm))


@contextmanager
def installed(fit: CriticFit, origin: str) -> Iterator[None]:
    """Every fitted critic made inside reads ``fit`` (``selfrag critic fit`` reads its questions with a fit
    that has no heads yet, only the hidden layers to record)."""
    _installed.append((fit, origin))
    try:
        yield
    finally:
        _installed.remove((fit, origin))


def where(model_path: Path) -> str:
    """Which fit a model file gets, in words, without reading it or warning (``selfrag doctor``)."""
    sha256 = file_sha256(model_path)
    if fit_path(sha256).is_file():
        try:
            CriticFit.read(fit_path(sha256))
        except ConfigError as exc:
            return f"the packaged defaults: {exc}"
        return f"its own fit, {fit_path(sha256)}"
    if packaged(f"{sha256}.json") is not None:
        return "the fit shipped for it"
    return "the packaged defaults (fit one with `selfrag critic fit`)"


def forget() -> None:
    """Look again on the next :func:`load_fit` (after a fit was written)."""
    _found.cache_clear()
