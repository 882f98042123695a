"""`pau-mcp serve --transport http`: auth, concurrent sessions with their own budgets, narrowing, refusals.

HTTP semantics are tried against the app the command serves, run in this process (``memory_http_server``); the
load of concurrent sessions, end to end, and the command's refusal to listen beyond loopback without a token are
tried on real processes; its usage errors are the command's, run in this process (``run_pau``).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import ROOT, http_server, memory_http_server, ran, serve_command, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from pau_command import run_pau

from pau_mcp.manifests import ManifestStore
from pau_mcp.tls import shared_context

TOKEN = "test-token-0123456789"
#: One call a session made: the session (its id), the argument, and the result.
Call = tuple[int, int, CallToolResult]


async def _session_calls(url: str, tool: str, calls: int, token: str | None, results: list[Call]) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(verify=shared_context(), headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for i in range(calls):
                    result = await session.call_tool(tool, {"arg0": i})
                    results.append((id(session), i, result))


def _digit_product(n: int) -> int:
    """What builtin/b001 computes (its gold description), for checking answers."""
    if n == 0:
        return 0
    product = 1
    for ch in str(abs(n)):
        if ch != "0":
            product *= int(ch)
    return -product if n < 0 else product


def test_requests_without_the_token_get_401_and_with_it_work(tmp_path: Path) -> None:
    tool = tool_of("builtin/b001")
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", TOKEN) as url:
        anonymous = httpx2.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
            verify=shared_context(),
        )
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = httpx2.post(url, json={}, headers={"authorization": "Bearer nope-nope-nope"}, verify=shared_context())
        assert wrong.status_code == 401
        results: list[Call] = []
        anyio.run(_session_calls, url, tool, 2, TOKEN, results)
        assert [r[2].structured_content["status"] for r in results] == ["ok", "ok"]


def test_eight_concurrent_sessions_of_fifty_calls_are_all_answered_recorded_and_budgeted_apart(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    method = ManifestStore().method("builtin/b001")
    results: list[Call] = []

    async def main() -> None:
        with anyio.fail_after(240):
            async with anyio.create_task_group() as group:
                for n in range(8):  # each agent under a label of its own: its own budget
                    group.start_soon(_session_calls, f"{url}?session=agent-{n}", tool_of(method.id), 50, None, results)

    with http_server("--db", str(db), "--budget", "40", "--run", "http-load") as url:
        anyio.run(main)
    assert len(results) == 400
    by_session: dict[int, list[tuple[int, CallToolResult]]] = {}
    for session, i, result in results:
        by_session.setdefault(session, []).append((i, result))
    assert len(by_session) == 8
    for calls in by_session.values():
        ok = [r for _, r in calls if ran(r)]
        refused = [r for _, r in calls if not ran(r)]
        assert len(ok) == 40 and len(refused) == 10
        assert [r.structured_content["queries_used"] for r in ok] == list(range(1, 41))
        assert all(r.structured_content["status"] == "over_budget" for r in refused)
        for i, r in calls:
            if ran(r):
                assert r.structured_content["value"] == str(_digit_product(i))
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT s.key, SUM(c.counted), COUNT(*) FROM calls c JOIN sessions s ON c.session_id = s.id "
            "JOIN runs r ON s.run_id = r.id WHERE r.name = 'http-load' GROUP BY s.key"
        )
        .fetchall()
    )
    assert len(rows) == 8
    assert all(counted == 40 and total == 50 for _, counted, total in rows)


def test_a_url_parameter_narrows_what_a_session_sees(tmp_path: Path) -> None:
    chosen = ManifestStore().method("builtin/b007")

    async def main() -> list[str]:
        async with streamable_http_client(f"{url}?methods={tool_of(chosen.id)}") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        names = anyio.run(main)
    assert names == ["submit", "open", tool_of(chosen.id)]


def test_stateless_mode_answers_calls(tmp_path: Path) -> None:
    tool = tool_of("builtin/b001")

    async def main() -> dict[str, Any]:
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                structured: dict[str, Any] = (await session.call_tool(tool, {"args": "(-23,)"})).structured_content
                return structured

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--stateless") as url:
        assert anyio.run(main)["value"] == "-6"


def test_serving_beyond_loopback_without_a_token_is_refused_with_advice(tmp_path: Path) -> None:
    result = subprocess.run(
        serve_command("--transport", "http", "--host", "0.0.0.0", "--port", "0", "--db", str(tmp_path / "r.db")),
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--token" in result.stderr and "PAU_MCP_TOKEN" in result.stderr
    assert not (tmp_path / "r.db").exists()  # refused before anything was built: no run store to clean up


def test_dns_rebinding_protection_rejects_a_foreign_host_header(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        response = httpx2.post(
            url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "x", "version": "1"},
                },
            },
            headers={"host": "evil.example.com", "accept": "application/json, text/event-stream"},
            verify=shared_context(),
        )
    assert response.status_code in (403, 421)


@pytest.mark.parametrize("bad", ["--budget=-1", "--token=short"])
def test_bad_settings_are_usage_errors(tmp_path: Path, bad: str) -> None:
    result = run_pau("serve", bad, "--db", str(tmp_path / "r.db"), cwd=ROOT)
    assert result.returncode == 2
    assert bad.split("=")[0] in result.stderr
