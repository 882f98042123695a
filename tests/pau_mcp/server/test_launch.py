"""A server a parent starts (`pau_mcp.server.launch`) runs with the parent's whole settings and tells it when it
listens; its secrets are never on a command line."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest

from pau_mcp.config import Settings
from pau_mcp.harness import mcp_session
from pau_mcp.manifests import tool_name
from pau_mcp.server.launch import LaunchError, http_server
from pau_mcp.tls import shared_context

TOKEN = "launched-token-0123456789"
KEY = "launched-key-0123456789abcdef"


def _command_lines() -> list[str]:
    lines = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    lines.append(cmdline.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return lines


def test_a_launched_server_takes_the_parents_settings_with_no_secret_on_its_command_line(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, db=tmp_path / "runs.db", token=TOKEN, tool_key=KEY, budget=3, workers=0)
    run = f"launched-{uuid.uuid4().hex}"  # this server's own: other tests launch servers at the same time
    with http_server(["--run", run, "--methods", "builtin/b001"], settings=settings) as url:
        served = [line for line in _command_lines() if " serve " in line and run in line]
        assert served and not any(TOKEN in line or KEY in line for line in served)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx2.post(url, json=ping, headers=headers, timeout=30, verify=shared_context()).status_code == 401
        assert tool_name(KEY, "builtin/b001") in anyio.run(_tools, url)
        assert all("--launched" in line and "--settings-file " in line for line in served)
        settings_files = [line.split("--settings-file ")[1].split()[0] for line in served]
    assert not any(os.path.exists(path) for path in settings_files)  # gone with the server


async def _tools(url: str) -> set[str]:
    async with httpx2.AsyncClient(verify=shared_context(), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        async with mcp_session(client, url) as session:
            with anyio.fail_after(60):
                return {tool.name for tool in (await session.list_tools()).tools}


def test_a_server_that_cannot_start_is_reported_with_the_end_of_its_error_output(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, db=tmp_path / "runs.db", workers=0)
    with pytest.raises(LaunchError, match="no suite named 'nope'"), http_server(["--suite", "nope"], settings=settings):
        pass
