"""Errors that selfrag raises on purpose.

Every error carries a one-line message that names what is wrong and how to fix
it; the CLI prints that line and exits non-zero, with no traceback.
"""

from __future__ import annotations


class SelfragError(Exception):
    """Base class for errors meant for the user."""


class ConfigError(SelfragError, ValueError):
    """A configuration value is missing, unknown or of the wrong type."""


class DataError(SelfragError, ValueError):
    """Input data (documents, questions) is missing or malformed."""


class MissingDependencyError(SelfragError, ImportError):
    """An optional dependency is not installed."""


class BackendError(SelfragError):
    """An LLM backend call failed.

    ``is_retryable`` says whether trying again may help (rate limits, server
    errors, timeouts); ``retry_after`` is the server's requested wait in seconds;
    ``max_attempts`` caps the attempts below the retry policy's for a fault
    that one more try settles (a refused connection to this machine).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        is_retryable: bool = False,
        retry_after: float | None = None,
        max_attempts: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.is_retryable = is_retryable
        self.retry_after = retry_after
        self.max_attempts = max_attempts


class ScriptExhaustedError(BackendError):
    """The scripted test backend has no response left for a call."""


def require(module: str, extra: str, purpose: str):
    """Import an optional dependency or raise an error naming the pip command."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{purpose} needs the '{module}' package: pip install 'selfrag[{extra}]'"
        ) from exc
