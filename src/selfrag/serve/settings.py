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
    question's answer, from the first model call to the last.
    """

    max_body_bytes: int = 64 * 1024
    max_question_chars: int = 4000
    timeout_s: float = 300.0
    max_concurrent: int = 4

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_question_chars", "max_concurrent"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout must be a number of seconds > 0, got {self.timeout_s!r}")


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
