"""One HTTP serving helper for the MCP server and the scorer endpoint."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest

from pau_mcp.listening import listen

ROOT = Path(__file__).resolve().parents[2]


class Refused(RuntimeError):
    pass


def test_a_service_on_a_non_loopback_address_needs_a_token_and_a_taken_port_is_named() -> None:
    with pytest.raises(Refused, match="needs a token"):
        listen("0.0.0.0", 0, None, "needs a token", Refused)
    [taken] = listen("127.0.0.1", 0, None, "unused", Refused)
    try:
        with pytest.raises(Refused, match="choose another --port"):
            listen("127.0.0.1", taken.getsockname()[1], None, "unused", Refused)
        # Sockets for several processes share their own port, never one another service holds.
        with pytest.raises(Refused, match="choose another --port"):
            listen("127.0.0.1", taken.getsockname()[1], None, "unused", Refused, count=2)
    finally:
        taken.close()


def test_sockets_for_several_processes_listen_on_one_port_and_each_gets_connections() -> None:
    socks = listen("127.0.0.1", 0, None, "unused", Refused, count=2)
    clients: list[socket.socket] = []
    try:
        assert len({sock.getsockname() for sock in socks}) == 1
        for _ in range(64):  # the kernel spreads them by address: all 64 on one socket would be 2 in 2**64
            clients.append(socket.create_connection(socks[0].getsockname(), timeout=10))
        accepted = []
        for sock in socks:
            sock.setblocking(False)
            count = 0
            with contextlib.suppress(BlockingIOError):
                while True:
                    sock.accept()[0].close()
                    count += 1
            accepted.append(count)
        assert sum(accepted) == 64 and min(accepted) > 0, accepted
    finally:
        for item in [*clients, *socks]:
            item.close()


def test_the_server_and_the_scorer_serve_http_through_the_one_helper() -> None:
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "pau_mcp").rglob("*.py")
        if "uvicorn.Config(" in path.read_text()
    )
    assert users == ["pau_mcp/listening.py"]
