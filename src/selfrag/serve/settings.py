"""What a server is allowed to do: where it listens, who may call it, and its limits."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

# The environment variable read when --api-key is not given.
API_KEY_ENV = "SELFRAG_API_KEY"
# Host names that always mean this machine.
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclass(frozen=True)
class Limits:
    """Bounds on one request and on the work in flight.

    ``max_concurrent`` questions are answered at once; one more is refused at
    once with 429 (nothing waits in a queue). ``timeout_s`` bounds one
    question's answer, from the first model call to the last. A connection's
    request headers must be complete ``header_timeout_s`` after it opens, and
    at most ``max_pending_connections`` may be waiting for theirs
    (:mod:`selfrag.serve.connections`); a request's body must arrive within
    ``body_timeout_s`` of its headers; a client that reads nothing of its reply
    for ``send_timeout_s`` while the reply waits is disconnected. The runs view opens no run file larger
    than ``max_run_file_bytes`` (reading one takes about four times its size
    in memory, once: :mod:`selfrag.serve.run_cache`).
    """

    max_body_bytes: int = 64 * 1024
    max_question_chars: int = 4000
    timeout_s: float = 300.0
    max_concurrent: int = 4
    header_timeout_s: float = 10.0
    max_pending_connections: int = 100
    body_timeout_s: float = 30.0
    send_timeout_s: float = 60.0
    max_run_file_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_question_chars", "max_concurrent", "max_pending_connections",
                     "max_run_file_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        for name in ("timeout_s", "header_timeout_s", "body_timeout_s", "send_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < float("inf"):
                flag = name.removesuffix("_s").replace("_", "-")
                raise ConfigError(f"{flag} must be a number of seconds > 0, got {value!r}")


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    # When set, every API call must carry ``Authorization: Bearer <key>``.
    api_key: str | None = field(default=None, repr=False)
    limits: Limits = field(default_factory=Limits)
    # The folder whose run directories the runs view may read (None: no runs view).
    runs_dir: Path | None = None
    # OpenAI-compatible replies carry the bare answer, without ask's notes and markers (a request's
    # "selfrag": {"plain": ...} decides for itself).
    plain_replies: bool = False

    @property
    def auth_required(self) -> bool:
        return bool(self.api_key)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 in brackets or not) is this machine."""
    name = host.strip().lower().strip("[]")
    if name in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without an API key."""
    if not is_loopback(host) and not api_key:
        raise ConfigError(
            f"--host {host} accepts requests from other machines: give --api-key KEY "
            f"(or set {API_KEY_ENV}), or keep the default --host 127.0.0.1"
        )
