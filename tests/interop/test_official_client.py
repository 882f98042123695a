"""The official MCP Python SDK's ``Client`` as a user sets it up, in its default mode (``auto``: it asks the server
with ``server/discover`` and speaks the 2026-07-28 revision) and in the handshake era (``legacy``): over stdio,
launched as Claude Desktop launches a server (the configuration docs/clients.md gives, with a minimal environment),
and over HTTP with the main token and a label, and with a session token. Each connects, lists, calls, meets its
budget as an ordinary ``over_budget`` result and submits."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from interop_support import B001, ROOT, TOOL, clients, counted_calls, http_server, issue_token, submissions
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from pau_mcp.tls import shared_context

pytestmark = pytest.mark.interop

MAIN = "main-token-0123456789"
#: The protocol revision each mode speaks with this server.
SPOKEN = {"auto": "MCP 2026-07-28", "legacy": "MCP 2025-11-25"}


def _claude_desktop_config() -> dict[str, Any]:
    """The ``claude_desktop_config.json`` docs/clients.md gives."""
    text = (ROOT / "docs" / "clients.md").read_text()
    block = re.search(r"## Claude Desktop \(stdio\).*?```json\n(.*?)```", text, re.DOTALL)
    assert block, "docs/clients.md has no Claude Desktop configuration"
    config: dict[str, Any] = json.loads(block.group(1))
    return config


def _claude_desktop_launch(data_dir: Path) -> StdioServerParameters:
    """The server as Claude Desktop starts it: the configured command and arguments, with only a minimal
    environment and the configuration's ``env``."""
    server = _claude_desktop_config()["mcpServers"]["pau-mcp"]
    command = server["command"].replace("/path/to/pau-mcp/.venv/bin", str(Path(sys.executable).parent))
    environment = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    environment |= {
        **server.get("env", {}),
        "PAU_MCP_TOOL_KEY": os.environ["PAU_MCP_TOOL_KEY"],
        "PAU_MCP_DATA_DIR": str(data_dir),
    }
    if os.environ.get("PAU_MCP_CACHE_DIR"):
        environment["PAU_MCP_CACHE_DIR"] = os.environ["PAU_MCP_CACHE_DIR"]
    args = [*server["args"], "--budget", "2", "--methods", B001]  # the recipe's way to give one function
    return StdioServerParameters(command=command, args=args, env=environment, cwd=str(data_dir))


async def _explore(target: object, mode: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """List, call until the budget is spent, submit."""
    seen: dict[str, Any] = {}

    async def drive(client: Client) -> None:
        seen["tools"] = {t.name for t in (await client.list_tools()).tools}
        seen["results"] = [await client.call_tool(TOOL, {"arg0": value}) for value in (234, 57, 105)]
        seen["submit"] = await client.call_tool("submit", {"method": TOOL, "description": "the product of the digits"})

    with anyio.fail_after(120):
        if isinstance(target, StdioServerParameters):
            async with Client(target, mode=mode) as client:
                await drive(client)
        else:
            async with httpx2.AsyncClient(verify=shared_context(), headers=headers or {}, timeout=60) as http:
                async with Client(streamable_http_client(str(target), http_client=http), mode=mode) as client:
                    await drive(client)
    return seen


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("where", ["stdio", "http-main-token", "http-session-token"])
def test_the_official_client_connects_lists_calls_meets_its_budget_and_submits(
    data_dir: Path, mode: str, where: str
) -> None:
    if where == "stdio":
        seen = anyio.run(_explore, _claude_desktop_launch(data_dir), mode)
        label = None
    else:
        with http_server(data_dir, "--token", MAIN, "--budget", "2") as url:
            if where == "http-main-token":
                label, bearer, target = "official-main", MAIN, f"{url}?session=official-main"
            else:
                label, bearer, target = "official-agent", issue_token(data_dir, "official-agent"), url
            seen = anyio.run(_explore, target, mode, {"Authorization": f"Bearer {bearer}"})
    assert {TOOL, "submit"} <= seen["tools"] and ("open" in seen["tools"]) == (mode == "legacy")
    statuses = [r.structured_content["status"] for r in seen["results"]]
    assert statuses == ["ok", "ok", "over_budget"] and not seen["results"][2].is_error
    assert "spent" in seen["results"][2].content[0].text
    assert seen["submit"].structured_content["status"] == "recorded"
    assert [(counted, total) for _, counted, total in counted_calls(data_dir)] == [(2, 3)]
    if label:
        assert counted_calls(data_dir)[0][0] == label
    assert submissions(data_dir) == [("builtin/b001", "the product of the digits")]
    assert [c.split("; ")[-1] for c in clients(data_dir)] == [SPOKEN[mode]]
