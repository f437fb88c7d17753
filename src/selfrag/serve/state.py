"""What one server process holds: its settings, its answerer (if it answers) and its gate."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from .answering import Answerer
from .limits import Gate
from .settings import ServeSettings


@dataclass
class ServerState:
    settings: ServeSettings
    answerer: Answerer | None
    gate: Gate


def server_state(request: Request) -> ServerState:
    return request.app.state.selfrag
