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
from pau_mcp.server.launch import LaunchError, http_server, stdio_server
from pau_mcp.tls import shared_context

TOKEN = "launched-token-0123456789"
KEY = "launched-key-0123456789abcdef"
TEST_KEY = "launched-test-key-0123456789abcdef"


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


async def _tools(url: str, token: str | None = TOKEN) -> set[str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(verify=shared_context(), headers=headers) as client:
        async with mcp_session(client, url) as session:
            with anyio.fail_after(60):
                return {tool.name for tool in (await session.list_tools()).tools}


def test_a_server_that_cannot_start_is_reported_with_the_end_of_its_error_output(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, db=tmp_path / "runs.db", workers=0)
    with pytest.raises(LaunchError, match="no suite named 'nope'"), http_server(["--suite", "nope"], settings=settings):
        pass


def test_a_server_a_process_starts_for_itself_is_one_process_whatever_processes_the_operator_set(
    tmp_path: Path,
) -> None:
    # PAU_MCP_PROCESSES set for the operator's own servers must not reach a run's own server (which would refuse to
    # start: several processes need --stateless), the demo's or the Inspect task's.
    settings = Settings(data_dir=tmp_path, db=tmp_path / "runs.db", workers=0, processes=2, tool_key=TEST_KEY)
    with stdio_server(settings) as params:
        written = Path(params.args[params.args.index("--settings-file") + 1]).read_text()
        assert Settings.from_json(written).processes == 1
    for given, env in (
        (settings, None),
        (None, {"PAU_MCP_PROCESSES": "2", "PAU_MCP_DB": str(tmp_path / "env.db"), "PAU_MCP_TOOL_KEY": TEST_KEY}),
    ):
        run = f"launched-{uuid.uuid4().hex}"
        with http_server(["--run", run, "--methods", "builtin/b001"], env=env, settings=given) as url:
            served = [line for line in _command_lines() if " serve " in line and run in line]
            assert len(served) == 1, served  # no supervisor, no forked servers
            assert tool_name(TEST_KEY, "builtin/b001") in anyio.run(_tools, url, None)
