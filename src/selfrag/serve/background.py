"""Run the server with uvicorn in a background thread on 127.0.0.1 (tests, benchmarks, notebooks).

    with BackgroundServer(create_app(settings, answerer)) as server:
        httpx.get(server.url + "/health")

The server listens on a free port of 127.0.0.1 only; leaving the block stops it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..errors import require
from .connections import server_config
from .settings import Limits
from .sockets import listen


class BackgroundServer:
    def __init__(self, app: Any, *, start_timeout: float = 20.0) -> None:
        uvicorn = require("uvicorn", "serve", "selfrag serve")
        self._sock = listen("127.0.0.1", 0)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # The bounds selfrag serve runs with (the app's own settings, when it has them).
        state = getattr(getattr(app, "state", None), "selfrag", None)
        limits = state.settings.limits if state is not None else Limits()
        config = server_config(app, limits, log_level="warning", access_log=False, timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._start_timeout = start_timeout

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the selfrag server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
