"""One HTTP serving helper for the MCP server and the scorer endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from pau_mcp.listening import listen

ROOT = Path(__file__).resolve().parents[2]


class Refused(RuntimeError):
    pass


def test_a_service_on_a_non_loopback_address_needs_a_token_and_a_taken_port_is_named() -> None:
    with pytest.raises(Refused, match="needs a token"):
        listen("0.0.0.0", 0, None, "needs a token", Refused)
    taken = listen("127.0.0.1", 0, None, "unused", Refused)
    try:
        with pytest.raises(Refused, match="choose another --port"):
            listen("127.0.0.1", taken.getsockname()[1], None, "unused", Refused)
    finally:
        taken.close()


def test_the_server_and_the_scorer_serve_http_through_the_one_helper() -> None:
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "pau_mcp").rglob("*.py")
        if "uvicorn.Config(" in path.read_text()
    )
    assert users == ["pau_mcp/listening.py"]
