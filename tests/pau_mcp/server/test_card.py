"""The Server Card (experimental): the server described before connecting, without a credential, naming no tool."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
from conftest import ROOT, memory_http_server, tool_of

from pau_mcp.tls import shared_context


def test_the_server_card_describes_the_server_without_a_credential_and_names_no_tool(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", "main-token-1234") as url:
        reply = httpx2.get(url.replace("/mcp", "/server-card"), timeout=30, verify=shared_context())
        refused = httpx2.post(url, json={}, timeout=30, verify=shared_context())
    assert reply.status_code == 200 and refused.status_code == 401  # the card is public; the endpoint is not
    card = reply.json()
    registry = json.loads((ROOT / "server.json").read_text())
    assert card["name"] == registry["name"] and card["version"] == registry["version"]
    assert card["$schema"] == registry["$schema"]
    assert card["remotes"] == [{"type": "streamable-http", "url": url}]
    assert card["protocolVersions"][:2] == ["2026-07-28", "2025-11-25"]
    assert card["authentication"] == {"required": True, "schemes": ["bearer"]}
    assert "io.modelcontextprotocol/tasks" in card["capabilities"]["extensions"]
    assert {"tools", "resources", "prompts", "completions"} <= set(card["capabilities"])
    assert tool_of("builtin/b001") not in reply.text and "builtin/" not in reply.text
