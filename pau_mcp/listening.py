"""Serving the project's HTTP services (the MCP server and the scorer endpoint): one way to listen and run uvicorn."""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["is_loopback", "listen", "listening_socket", "serve_app", "shown_host", "uvicorn_server"]


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def shown_host(host: str) -> str:
    """The host as it appears in a URL (IPv6 in brackets)."""
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A bound, listening TCP socket for uvicorn (``Server.serve(sockets=[...])``), with TCP_NODELAY.

    With ``reuse_port`` (``SO_REUSEPORT``, Linux) several sockets of this user may listen on one port, each of its
    own process: the kernel spreads the connections over them (``pau_mcp.server.supervisor``), where processes
    sharing one socket would let whichever woke first take a whole burst.

    Raises:
        OSError: the address cannot be bound (in use, or not this machine's).
    """
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    # proto must be IPPROTO_TCP: asyncio only sets TCP_NODELAY on accepted sockets whose proto says TCP, and
    # without it every response waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((bare, port))
        # Listening now, before the URL is announced: connections made before uvicorn starts wait in the backlog
        # instead of being refused.
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def listen(
    host: str, port: int, token: str | None, refusal: str, error: type[Exception], count: int = 1
) -> list[socket.socket]:
    """The listening sockets of a service, refusing a non-loopback address without a token.

    Args:
        host: The address to listen on.
        port: The port (0: a free one).
        token: The bearer token clients must send; None for none.
        refusal: Why a non-loopback address needs a token, and how to set one.
        error: The service's error type, raised with ``refusal`` or with why the address cannot be bound.
        count: How many sockets on the one port (``reuse_port``), one for each process serving it.
    """
    if not is_loopback(host) and not token:
        raise error(refusal)
    socks: list[socket.socket] = []
    try:
        socks.append(listening_socket(host, port, reuse_port=count > 1))
        socks.extend(listening_socket(host, socks[0].getsockname()[1], reuse_port=True) for _ in range(count - 1))
        return socks
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise error(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port or --host") from None


def uvicorn_server(app: Any, *, http: Any = "auto", keep_alive_s: int = 5) -> Any:
    """The ``uvicorn.Server`` every service of the project runs ``app`` with, not yet started.

    ``serve_app`` runs it in the calling thread until interrupted; a caller with its own thread and event loop
    (the server tests) runs ``server.serve([sock])`` there and stops it with ``server.should_exit = True``.

    Args:
        app: The ASGI application.
        http: uvicorn's HTTP protocol (a class, or ``auto``).
        keep_alive_s: Seconds an idle keep-alive connection stays open.
    """
    import uvicorn

    config = uvicorn.Config(
        app, http=http, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=2,
        timeout_keep_alive=keep_alive_s,
    )  # fmt: skip
    return uvicorn.Server(config)


def serve_app(
    app: Any, sock: socket.socket, announce: str | None, *, http: Any = "auto", keep_alive_s: int = 5,
    on_server: Callable[[Any], None] | None = None,
) -> None:  # fmt: skip
    """Run ``app`` under uvicorn (``uvicorn_server``) on ``sock`` until interrupted, in the project's event loop.

    Args:
        app: The ASGI application.
        sock: From ``listen``.
        announce: A line printed on stderr once listening (None: nothing).
        http: uvicorn's HTTP protocol (a class, or ``auto``).
        keep_alive_s: Seconds an idle keep-alive connection stays open.
        on_server: Called with the ``uvicorn.Server`` before it starts (to stop it from another thread).
    """
    from . import eventloop

    server = uvicorn_server(app, http=http, keep_alive_s=keep_alive_s)
    if on_server is not None:
        on_server(server)
    if announce:
        print(announce, file=sys.stderr, flush=True)
    eventloop.run(server.serve, [sock])
