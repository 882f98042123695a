"""Running the server over stdio (one session per process) or Streamable HTTP (many sessions)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import uvicorn
from mcp.server import Server
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

from .. import eventloop
from ..listening import is_loopback, listening_socket, shown_host
from .app import initialization_options, verify_bearer
from .stdio import stdio_streams

__all__ = ["TransportError", "run_http", "run_stdio"]

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
        await server.run(read_stream, write_stream, initialization_options(server))


def run_http(
    server: Server[Any], host: str, port: int, token: str | None, stateless: bool, announce: bool = True
) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp`` with JSON responses until interrupted.

    Raises:
        TransportError: a non-loopback address without a token, or the port is taken.
    """
    if not is_loopback(host) and not token:
        raise TransportError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run the functions. "
            "Set one with --token or PAU_MCP_TOKEN (e.g. PAU_MCP_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe())'))."
        )
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        raise TransportError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port or --host"
        ) from None
    bound_port = sock.getsockname()[1]
    security = None
    if not is_loopback(host):
        shown = shown_host(host)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{shown}:*", "127.0.0.1:*", "localhost:*"],
            allowed_origins=[f"http://{shown}:*", "http://127.0.0.1:*", "http://localhost:*"],
        )
    auth = verifier = None
    if token:
        auth = AuthSettings(
            issuer_url=f"http://{'127.0.0.1' if not is_loopback(host) else host}:{bound_port}",
            resource_server_url=None,
            required_scopes=["pau"],
        )
        verifier = verify_bearer(token)
    app = server.streamable_http_app(
        json_response=True,
        stateless_http=stateless,
        host=host if is_loopback(host) else "0.0.0.0",
        transport_security=security,
        auth=auth,
        token_verifier=verifier,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=2)
    runner = uvicorn.Server(config)
    if announce:
        print(f"pau-mcp: serving at http://{shown_host(host)}:{bound_port}/mcp", file=sys.stderr, flush=True)
    eventloop.run(runner.serve, [sock])
