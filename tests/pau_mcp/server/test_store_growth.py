"""What one credential can make the run store keep is bounded: a session token flooding the server with refused calls
or with the largest submissions allowed cannot fill the operator's disk (it could write about 19 MB a second of
submissions, and 60 KB of every refused call's message, before these limits)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import TEST_KEY, memory_http_server, memory_session, text_of, tool_of
from mcp_types import CallToolResult

from pau_mcp.config import Settings
from pau_mcp.contract import ToolStatus
from pau_mcp.runstore import CallRecord, RunStore
from pau_mcp.server import TokenSigner
from pau_mcp.server import service as service_module
from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"
B001, B002 = tool_of("builtin/b001"), tool_of("builtin/b002")
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
}


def _post(client: httpx2.Client, url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META},
    }
    headers = {
        "authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool,
    }  # fmt: skip
    if tool == "submit" and isinstance(arguments.get("method"), str):
        headers["mcp-param-method"] = arguments["method"]  # submit's method is mirrored in a header (SEP-2243)
    reply = client.post(url, json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()["result"]
    return result


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as store:
        return list(store.execute(sql))


def test_a_refused_megabyte_argument_is_answered_and_recorded_in_a_few_kilobytes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = TokenSigner(TEST_KEY).issue("hostile")
    with memory_http_server("--db", str(db), "--token", MAIN, "--max-argument-kb", "2048") as url:
        with httpx2.Client(verify=shared_context(), timeout=60) as client:
            result = _post(client, url, token, B001, {"arg0": "x" * 1_000_000})  # a string where an int is taken
    assert result["structuredContent"]["status"] == "invalid_input"
    assert len(result["content"][0]["text"]) < 2_000 and '{"args": "(...,)"}' in result["content"][0]["text"]
    [(arguments, message)] = _rows(db, "SELECT arguments, error_message FROM calls")
    assert len(arguments) < 1_200 and len(message) < 2_000


def test_a_flood_of_refused_calls_is_all_answered_and_keeps_a_bounded_record_per_method(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    kept = service_module._KEPT_REFUSALS

    async def main() -> list[CallToolResult]:
        async with memory_session("--db", str(db), "--budget", "1") as session:
            refused = [await session.call_tool(B001, {"arg0": "not a number"}) for _ in range(kept + 30)]
            await session.call_tool(B002, {"arg0": "aab"})
            refused += [await session.call_tool(B002, {"arg0": "aab"}) for _ in range(5)]  # over budget
        return refused

    replies = anyio.run(main)
    statuses = [r.structured_content["status"] for r in replies]
    assert statuses == ["invalid_input"] * (kept + 30) + ["over_budget"] * 5
    kept_rows = dict(_rows(db, "SELECT tool, COUNT(*) FROM calls WHERE counted = 0 GROUP BY tool"))
    assert kept_rows == {B001: kept, B002: 5}


def test_submissions_past_the_limit_are_refused_and_not_recorded(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def main() -> list[CallToolResult]:
        async with memory_session("--db", str(db), "--max-submissions", "3") as session:
            replies = [await session.call_tool("submit", {"method": B001, "description": f"try {i}"}) for i in range(5)]
            replies.append(await session.call_tool("submit", {"method": B002, "description": "another function"}))
        return replies

    replies = anyio.run(main)
    statuses = [r.structured_content["status"] for r in replies]
    assert statuses == ["recorded"] * 3 + ["submissions_used"] * 2 + ["recorded"]
    refusal = replies[3]
    assert refusal.is_error and "--max-submissions" in text_of(refusal.content[0])
    assert _rows(db, "SELECT description FROM submissions ORDER BY id") == [
        ("try 0",),
        ("try 1",),
        ("try 2",),
        ("another function",),
    ]
    assert Settings().max_submissions == 10


def test_concurrent_submissions_never_record_more_than_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = TokenSigner(TEST_KEY).issue("eager")
    submission = {"method": B001, "description": "d" * 20_000, "code": "c" * 100_000}
    args = ("--db", str(db), "--token", MAIN, "--max-submissions", "5", "--max-concurrent-calls", "0")
    with (
        memory_http_server(*args) as url,
        httpx2.Client(verify=shared_context(), timeout=60, limits=httpx2.Limits(max_connections=30)) as client,
    ):
        with ThreadPoolExecutor(24) as pool:
            results = list(pool.map(lambda _: _post(client, url, token, "submit", submission), range(24)))
    statuses = sorted(r["structuredContent"]["status"] for r in results)
    assert statuses == ["recorded"] * 5 + ["submissions_used"] * 19
    assert _rows(db, "SELECT COUNT(*) FROM submissions") == [(5,)]


def test_the_stores_kept_refusals_and_submissions_hold_under_concurrent_writers(
    store_at: Callable[[str], Path | str],
) -> None:
    store = RunStore(store_at("runs"))
    session = store.ensure_session(store.ensure_run("r", kind="serve"), "agent", "http")
    refusal = CallRecord("builtin/b001", "fn_x", "(1,)", False, ToolStatus.INVALID_INPUT, error_message="no")

    def write(i: int) -> tuple[int | None, int | None]:
        return (
            store.record_refusal(session, refusal, keep=7),
            store.record_submission_within(session, "builtin/b001", f"d{i}", None, limit=4),
        )

    with ThreadPoolExecutor(12) as pool:
        written = list(pool.map(write, range(30)))
    assert sum(r is not None for r, _ in written) == 7 and sum(s is not None for _, s in written) == 4
    assert store.submissions_made(session, "builtin/b001") == 4
    assert len([c for c in store.calls(store.run_id("r")) if not c.counted]) == 7
    store.close()


@pytest.mark.parametrize("value", ["0", "25"])
def test_the_submissions_setting_has_a_flag_and_a_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PAU_MCP_MAX_SUBMISSIONS", value)
    assert Settings.from_env().max_submissions == int(value)
