"""The listening socket every selfrag server uses (the command, tests, benchmarks)."""

from __future__ import annotations

import socket

from ..errors import DataError


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: a free one), or a one-line error.

    TCP_NODELAY is set here, and accepted connections inherit it: without it a
    response written in two parts (headers, then body) waits about 40 ms for
    the client's delayed ACK, on every request.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise DataError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port or --host") from None
    # Listen now, not when the server starts: the address is printed before that, and a
    # client that connects in between must wait in the backlog, not be refused.
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
