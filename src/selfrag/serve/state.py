"""What one server process holds: its settings, its answerer (if it answers), its gate and its runs folder."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from .answering import Answerer
from .limits import Gate
from .runs import RunsRoot
from .settings import ServeSettings


@dataclass
class ServerState:
    settings: ServeSettings
    answerer: Answerer | None
    gate: Gate
    # The runs under --runs, with what was read of them (None: no runs view).
    runs: RunsRoot | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.settings.runs_dir is not None:
            self.runs = RunsRoot(self.settings.runs_dir, max_file_bytes=self.settings.limits.max_run_file_bytes)


def server_state(request: Request) -> ServerState:
    return request.app.state.selfrag
