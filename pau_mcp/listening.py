"""Listening on TCP for the project's HTTP services (the MCP server and the scorer endpoint)."""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["is_loopback", "listening_socket", "shown_host"]


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


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket for uvicorn (``Server.serve(sockets=[...])``), with TCP_NODELAY.

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
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((bare, port))
        # Listening now, before the URL is announced: connections made before uvicorn starts wait in the backlog
        # instead of being refused.
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock
