"""Real HTTP servers on 127.0.0.1 for backend tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# handler(path, body, headers) -> (status, response_body_dict, extra_headers)
Handler = Callable[[str, dict[str, Any], dict[str, str]], tuple[int, Any, dict[str, str]]]


class ScriptedHTTPServer:
    """A threaded HTTP server whose POST answers come from a Python function."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append((self.path, body, headers))
                status, payload, extra = outer.handler(self.path, body, headers)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaCppServer:
    """llama_cpp.server (an OpenAI-compatible server) serving a GGUF on 127.0.0.1."""

    def __init__(self, model_path: str, model_alias: str = "smollm2") -> None:
        self.port = free_port()
        self.alias = model_alias
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", model_path, "--model_alias", model_alias,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "2048", "--verbose", "false",
        ]
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> LlamaCppServer:
        env = dict(os.environ)
        self._proc = subprocess.Popen(self._cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                raise RuntimeError(f"llama_cpp.server exited: {err[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError("llama_cpp.server did not start within 120 s")

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
