"""One credential's calls in flight are bounded (``--max-concurrent-calls``): a session token that floods the server
with calls that each run to the CPU limit cannot queue them all ahead of another agent's call in the sandbox
workers, and past its share its calls are refused at once, without running or counting."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import TEST_KEY, memory_http_server, tool_of

from pau_mcp.config import Settings
from pau_mcp.server import CallSlots, TokenSigner, TooManyCalls
from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
}
#: Trial division up to the square root of a Mersenne prime: runs until the CPU limit stops it.
SLOW = (tool_of("builtin/b017"), {"arg0": 2**61 - 1})
FAST = (tool_of("builtin/b001"), {"arg0": 7})


async def _call(
    client: httpx2.AsyncClient, url: str, token: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """One 2026-07-28 `tools/call` with a bearer token; returns the JSON-RPC reply."""
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
    reply = await client.post(url, json=body, headers=headers)
    assert reply.status_code in (200, 400), reply.text  # a JSON-RPC error comes with 400 in this era
    answer: dict[str, Any] = reply.json()
    return answer


def _recorded(db: Path, key: str) -> int:
    with sqlite3.connect(db) as store:
        query = "SELECT COUNT(*) FROM calls c JOIN sessions s ON s.id = c.session_id WHERE s.key = ?"
        return int(store.execute(query, (key,)).fetchone()[0])


def test_a_flood_of_slow_calls_from_one_token_does_not_queue_ahead_of_another_agents_call(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    signer = TokenSigner(TEST_KEY)
    hog, other = signer.issue("hog"), signer.issue("other")
    replies: list[dict[str, Any]] = []
    mine: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        limits = httpx2.Limits(max_connections=100)
        async with httpx2.AsyncClient(verify=shared_context(), timeout=120, limits=limits) as client:

            async def flood(i: int) -> None:
                replies.append(await _call(client, url, hog, *SLOW))

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for i in range(20):
                        group.start_soon(flood, i)
                    while not _recorded(db, "hog"):  # the flood is in: its first calls ran to the CPU limit
                        await anyio.sleep(0.02)
                    mine.append(await _call(client, url, other, *FAST))

    args = ("--db", str(db), "--token", MAIN, "--budget", "0", "--timeout", "0.25", "--max-concurrent-calls", "2")
    with memory_http_server(*args) as url:
        anyio.run(main, url)

    refused = [r for r in replies if "error" in r]
    assert len(refused) == 20 - 2 * 8  # 2 running and 14 waiting at most: the rest refused at once
    message = refused[0]["error"]["message"]
    assert "--max-concurrent-calls" in message and "did not run or count" in message and "\n" not in message
    assert mine[0]["result"]["structuredContent"]["status"] == "ok"
    with sqlite3.connect(db) as store:
        order = [
            key
            for (key,) in store.execute(
                "SELECT s.key FROM calls c JOIN sessions s ON s.id = c.session_id ORDER BY c.id"
            )
        ]
    assert order.count("hog") == 16  # the refused ones were neither run nor recorded
    # The other agent's call waited behind the hog's calls already running, not behind its whole flood.
    assert order.index("other") <= 4, order


def test_a_credentials_calls_run_a_few_at_a_time_and_the_rest_wait_their_turn(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = TokenSigner(TEST_KEY).issue("eager")
    replies: list[dict[str, Any]] = []

    async def main(url: str) -> None:
        async with httpx2.AsyncClient(verify=shared_context(), timeout=120) as client:

            async def one(i: int) -> None:
                replies.append(await _call(client, url, token, FAST[0], {"arg0": i}))

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for i in range(12):
                        group.start_soon(one, i)

    with memory_http_server("--db", str(db), "--token", MAIN, "--budget", "20") as url:
        anyio.run(main, url)
    assert [r["result"]["structuredContent"]["status"] for r in replies] == ["ok"] * 12


def test_call_slots_let_a_few_run_queue_some_and_refuse_the_rest_and_forget_idle_credentials() -> None:
    async def main() -> None:
        slots = CallSlots(running=2, waiting=3)
        running = 0
        most = 0
        release = anyio.Event()

        async def hold() -> None:
            nonlocal running, most
            async with slots.slot("hog"):
                running += 1
                most = max(most, running)
                await release.wait()
                running -= 1

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(hold)
            await anyio.wait_all_tasks_blocked()
            assert slots.in_flight("hog") == 5 and running == 2
            with pytest.raises(TooManyCalls, match="--max-concurrent-calls"):
                async with slots.slot("hog"):
                    pass
            async with slots.slot("other"):  # another credential has slots of its own
                assert slots.held() == 2
            release.set()
        assert most == 2 and slots.held() == 0 and slots.in_flight("hog") == 0

    anyio.run(main)


def test_the_concurrent_calls_setting_has_a_flag_and_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().max_concurrent_calls == 4
    monkeypatch.setenv("PAU_MCP_MAX_CONCURRENT_CALLS", "0")
    assert Settings.from_env().max_concurrent_calls == 0
    monkeypatch.setenv("PAU_MCP_MAX_CONCURRENT_CALLS", "-1")
    with pytest.raises(ValueError, match="--max-concurrent-calls / PAU_MCP_MAX_CONCURRENT_CALLS"):
        Settings.from_env()
