"""Running the server over stdio (one session per process) or Streamable HTTP (many sessions)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import uvicorn
from mcp.server import Server

from ..guard import guarded_protocol, keep_alive_s
from ..limits import HTTPLimits
from ..listening import is_loopback, listen, serve_app, shown_host, uvicorn_server
from .app import initialization_options, session_owner, verify_bearer
from .http import BUSY_BODY, http_app
from .stdio import stdio_streams

if TYPE_CHECKING:
    # The stream protocols ``Server.run`` takes; the SDK exports them from no public module.
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from ..oauth import SignIn

__all__ = [
    "HTTPLimits",
    "HTTPService",
    "TransportError",
    "bind_http",
    "listen_http",
    "run_http",
    "run_stdio",
    "serve_http",
    "serve_streams",
]

log = logging.getLogger("pau_mcp.server")


class TransportError(RuntimeError):
    """The server cannot start as asked; the message says how to fix the command."""


async def run_stdio(server: Server[Any], max_message_bytes: int = 1 << 20) -> None:
    """Serve one session on stdin/stdout until stdin closes (so a killed client never leaves the server behind).

    Args:
        server: The MCP server.
        max_message_bytes: The longest line read (``message_limit``); longer ones are refused, not held.
    """
    async with stdio_streams(max_message_bytes) as (read_stream, write_stream):
        await serve_streams(server, read_stream, write_stream)


async def serve_streams(
    server: Server[Any], read_stream: ReadStream[SessionMessage | Exception], write_stream: WriteStream[SessionMessage]
) -> None:
    """Serve one session over a pair of message streams until the read stream ends: what ``run_stdio`` does once
    its stdin and stdout are streams, and what the server tests do over the SDK's in-memory streams.

    Args:
        server: The MCP server.
        read_stream: Messages from the client (an exception in place of one it could not read).
        write_stream: Messages to the client.
    """
    await server.run(read_stream, write_stream, initialization_options(server))


@dataclass(frozen=True)
class HTTPService:
    """The Streamable HTTP service of one server, bound to its address and not yet serving (``bind_http``).

    ``serve_http`` runs it as ``pau-mcp serve --transport http`` does; a caller with its own thread and event loop
    runs ``uvicorn_server().serve([sock])`` instead.

    Attributes:
        sock: The listening socket.
        app: The ASGI app (``http_app``: host gate, authentication, body and session limits).
        protocol: uvicorn's HTTP protocol, with the connection guard (``pau_mcp.guard``).
        keep_alive_s: Seconds an idle keep-alive connection stays open.
        url: The MCP endpoint, ``http://HOST:PORT/mcp`` with the bound port.
    """

    sock: socket.socket
    app: Any
    protocol: type[asyncio.Protocol]
    keep_alive_s: int
    url: str

    def uvicorn_server(self) -> uvicorn.Server:
        """The ``uvicorn.Server`` that serves ``app`` (``listening.uvicorn_server``), not yet started."""
        server: uvicorn.Server = uvicorn_server(self.app, http=self.protocol, keep_alive_s=self.keep_alive_s)
        return server


def _unprotected(host: str) -> str:
    return (
        f"refusing to serve on {host} without a token: anyone who can reach it could run the functions. Set one "
        "with --token or PAU_MCP_TOKEN (e.g. PAU_MCP_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe())'))."
    )


def check_exposure(host: str, token: str | None, signed_in: bool = False) -> None:
    """Refuse, before anything is built, to serve a non-loopback address without a token or sign-in (``bind_http``
    refuses too).

    Raises:
        TransportError: the address is not a loopback one and there is neither a token nor sign-in.
    """
    if not is_loopback(host) and not token and not signed_in:
        raise TransportError(_unprotected(host))


def bind_http(
    server: Server[Any], host: str, port: int, token: str | None, stateless: bool, limits: HTTPLimits | None = None,
    tokens: Any = None, on_session_end: Callable[[str], None] | None = None,
    signin: Callable[[str], SignIn] | None = None, handshake_streams: bool = False, sock: socket.socket | None = None,
) -> HTTPService:  # fmt: skip
    """Listen on HOST:PORT and build the Streamable HTTP app of ``server`` (see ``run_http`` for the arguments;
    ``signin`` builds the sign-in of ``--auth oauth`` from the server's URL, ``signin.sign_in``;
    ``handshake_streams``: answer the handshake era on streams, ``http.http_app``; ``sock``: a socket
    ``listen_http`` bound for HOST:PORT already, which several server processes share, ``supervisor``).

    Raises:
        TransportError: a non-loopback address without a token or sign-in, or the port is taken.
    """
    limits = limits or HTTPLimits()
    if sock is None:
        [sock] = listen_http(host, port, token, signed_in=signin is not None)
    bound_port = sock.getsockname()[1]
    url = f"http://{shown_host(host)}:{bound_port}/mcp"
    app = http_app(
        server,
        bound=host,
        stateless=stateless,
        message_bytes=limits.message_bytes,
        max_sessions=limits.max_sessions,
        session_idle_s=limits.session_idle_s,
        allowed_hosts=limits.allowed_hosts,
        token_verifier=verify_bearer(token, tokens) if token and signin is None else None,
        on_session_end=on_session_end,
        sessions_per_credential=limits.sessions_per_credential,
        # Anonymous requests of a loopback server with neither a token nor sign-in have no cap of their own.
        session_owner=session_owner(tokens, cap_anonymous=token is not None or signin is not None),
        signin=signin(url) if signin is not None else None,
        handshake_streams=handshake_streams,
    )
    protocol = guarded_protocol(limits.max_connections, limits.read_timeout_s, BUSY_BODY)
    return HTTPService(
        sock=sock,
        app=app,
        protocol=protocol,
        keep_alive_s=keep_alive_s(limits.read_timeout_s),
        url=url,
    )


def listen_http(
    host: str, port: int, token: str | None, signed_in: bool = False, count: int = 1
) -> list[socket.socket]:
    """The listening sockets of a server at HOST:PORT, ``count`` of them on the one port, one for each process
    serving it (``supervisor``); ``bind_http`` binds its own unless handed one.

    Raises:
        TransportError: a non-loopback address without a token or sign-in, or the port is taken.
    """
    refusal = _unprotected(host)
    return listen(host, port, token or ("(sign-in)" if signed_in else None), refusal, TransportError, count=count)


def serve_http(service: HTTPService, announce: bool = True, exit_with_stdin: bool = False) -> None:
    """Serve a bound ``service`` in this thread until interrupted (see ``run_http`` for the arguments)."""

    def watch_stdin(runner: uvicorn.Server) -> None:
        threading.Thread(target=_stop_at_end_of_stdin, args=(runner,), name="pau-mcp-parent", daemon=True).start()

    serve_app(
        service.app, service.sock, f"pau-mcp: serving at {service.url}" if announce else None,
        http=service.protocol, keep_alive_s=service.keep_alive_s, on_server=watch_stdin if exit_with_stdin else None,
    )  # fmt: skip


def run_http(
    server: Server[Any], host: str, port: int, token: str | None, stateless: bool, announce: bool = True,
    limits: HTTPLimits | None = None, exit_with_stdin: bool = False, tokens: Any = None,
    on_session_end: Callable[[str], None] | None = None,
) -> None:  # fmt: skip
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp`` with JSON responses until interrupted: ``bind_http``,
    then ``serve_http``.

    Args:
        server: The MCP server.
        host: The address to listen on.
        port: The port (0: a free one, announced on stderr).
        token: The bearer token clients must send; None for none (loopback only).
        stateless: No MCP sessions for handshake-era clients either.
        announce: Print the URL on stderr.
        limits: What one client may take (connections, sessions, sizes, timeouts).
        exit_with_stdin: Stop when stdin reaches its end: a parent holding the other end of a pipe (``launch``)
            takes the server with it when it ends, however it ends.
        tokens: With ``token``, the ``TokenSigner`` whose session tokens are accepted as well.
        on_session_end: Called with the id of every MCP session that ends (``Sessions.end_mcp_session``).

    Raises:
        TransportError: a non-loopback address without a token, or the port is taken.
    """
    service = bind_http(server, host, port, token, stateless, limits, tokens, on_session_end)
    serve_http(service, announce, exit_with_stdin)


def _stop_at_end_of_stdin(runner: uvicorn.Server) -> None:
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(1 << 16):
            pass
    log.info("stdin closed: the parent process is gone; stopping")
    runner.should_exit = True
    # A graceful stop takes a few seconds at most (open requests get timeout_graceful_shutdown); past that, a
    # server that cannot stop must not outlive its parent.
    time.sleep(15)
    log.error("the server did not stop within 15 s of its parent; exiting now")
    os._exit(1)
