"""Both protocol eras, every transport: the handshake of 2025-11-25 and the sessionless requests of 2026-07-28.

The official SDK's ``Client`` is used in each of its modes (``auto`` probes ``server/discover`` and goes modern when
the server can; ``legacy`` forces the handshake; ``"2026-07-28"`` pins the new revision) against the HTTP app
`pau-mcp serve --transport http` serves (run in this process, ``memory_http_server``) and the stdio server (built
in this process and spoken to in memory, ``memory_streams``, or a real process where the process is the subject).
Budgets belong to credentials: whichever era a request comes in, and whatever per-request field it changes, one
credential never gets more than its budget.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import pytest
from conftest import ROOT, Outcome, completed, memory_http_server, memory_streams, ran, tool_of
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, RequestParamsMeta
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from pau_command import run_pau

from pau_mcp.tls import shared_context

B001, B002, B003 = "builtin/b001", "builtin/b002", "builtin/b003"
MAIN = "main-token-0123456789"
MODES = ["auto", "legacy", LATEST_MODERN_VERSION]
#: The version each mode settles on with this server: the newest both sides know.
SETTLES = {
    "auto": LATEST_MODERN_VERSION,
    "legacy": LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION: LATEST_MODERN_VERSION,
}


def _token(*args: str) -> str:
    issued = run_pau("token", "issue", *args, env=dict(os.environ), cwd=ROOT)
    assert issued.returncode == 0, issued.stderr
    return issued.stdout.strip()


@contextlib.asynccontextmanager
async def http_client(url: str, mode: str, bearer: str | None = None, **headers: str) -> AsyncIterator[Client]:
    """The official client over Streamable HTTP in ``mode``, with a bearer token and extra headers."""
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    async with httpx2.AsyncClient(verify=shared_context(), headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            yield client


async def _calls(client: Client, tool: str, count: int, meta: dict[str, Any] | None = None) -> list[Outcome]:
    """``count`` calls of ``tool``; each result, or the MCPError it raised."""
    out: list[Outcome] = []
    # The SDK's _meta is an open map (a TypedDict with extra_items=Any), which mypy reads as closed: any other key
    # (these tests' dev.pau-mcp/*) would be refused.
    request_meta = cast(RequestParamsMeta | None, meta)
    for i in range(count):
        try:
            out.append(await client.call_tool(tool, {"arg0": i + 10}, meta=request_meta))
        except MCPError as exc:
            out.append(exc)
    return out


def _ran(results: Sequence[Outcome]) -> int:
    return sum(1 for r in results if not isinstance(r, MCPError) and ran(r))


async def _names(client: Client, **kwargs: Any) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        listed = await client.list_tools(cursor=cursor, **kwargs)
        names += [t.name for t in listed.tools]
        cursor = listed.next_cursor
        if cursor is None:
            return names


async def _explore_and_submit(client: Client) -> tuple[str, list[str], dict[str, Any], dict[str, Any]]:
    tool = tool_of(B001)
    names = await _names(client)
    called = await client.call_tool(tool, {"arg0": 105})
    submitted = await client.call_tool("submit", {"method": tool, "description": "the product of the digits"})
    return client.protocol_version, names, called.structured_content, submitted.structured_content


# -- item 1: both eras on every transport ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("credential", ["main", "session-token", "none"])
def test_the_official_client_lists_calls_and_submits_in_every_mode_over_http(
    tmp_path: Path, mode: str, credential: str
) -> None:
    args = ["--db", str(tmp_path / "runs.db"), "--methods", f"{B001},{B002}"]
    if credential != "none":
        args += ["--token", MAIN]
    bearer = {"main": MAIN, "session-token": _token("--label", "agent-1"), "none": None}[credential]

    async def main(url: str) -> tuple[str, list[str], dict[str, Any], dict[str, Any]]:
        with anyio.fail_after(60):
            async with http_client(url, mode, bearer) as client:
                return await _explore_and_submit(client)

    with memory_http_server(*args) as url:
        version, names, called, submitted = anyio.run(main, url)
    assert version == SETTLES[mode]
    assert {tool_of(B001), tool_of(B002), "submit"} <= set(names)
    assert called["status"] == "ok" and called["value"] == "5" and called["queries_used"] == 1
    assert called["budget_scope"] == ("token" if credential == "session-token" else "label")
    assert submitted["status"] == "recorded"


@pytest.mark.parametrize("mode", MODES)
def test_the_official_client_lists_calls_and_submits_in_every_mode_over_stdio(tmp_path: Path, mode: str) -> None:
    async def main() -> tuple[str, list[str], dict[str, Any], dict[str, Any]]:
        with anyio.fail_after(60):
            streams = memory_streams("--db", str(tmp_path / "runs.db"), "--methods", B001)
            async with Client(streams, mode=mode, cache=None) as client:
                return await _explore_and_submit(client)

    version, names, called, submitted = anyio.run(main)
    assert version == SETTLES[mode]
    assert tool_of(B001) in names and "submit" in names
    assert called["status"] == "ok" and called["budget_scope"] == "process"
    assert submitted["status"] == "recorded"


def test_a_stdio_server_process_speaks_the_new_revision_to_a_client_in_auto_mode(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pau_mcp", "serve", "--db", str(tmp_path / "runs.db"), "--methods", B001, "--budget", "2"],
        cwd=str(ROOT),
        env=dict(os.environ),
    )

    async def main() -> tuple[str, list[Outcome]]:
        with anyio.fail_after(90):
            async with Client(params, cache=None) as client:
                results = await _calls(client, tool_of(B001), 3)
                return client.protocol_version, results

    version, outcomes = anyio.run(main)
    results = completed(outcomes)
    assert version == LATEST_MODERN_VERSION
    assert [ran(r) for r in results] == [True, True, False]
    assert results[2].structured_content["status"] == "over_budget" and not results[2].is_error


def test_discover_offers_the_new_revision_and_initialize_the_newest_handshake_version_asked_for(tmp_path: Path) -> None:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    discover = {
        "jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        }},
    }  # fmt: skip

    def initialize(version: str) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0", "id": 2, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }  # fmt: skip

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--methods", B001) as url:
        modern = {"mcp-protocol-version": LATEST_MODERN_VERSION, "mcp-method": "server/discover"}
        found = httpx2.post(url, json=discover, headers={**headers, **modern}, verify=shared_context())
        newest = httpx2.post(url, json=initialize(LATEST_HANDSHAKE_VERSION), headers=headers, verify=shared_context())
        older = httpx2.post(url, json=initialize("2025-03-26"), headers=headers, verify=shared_context())
    assert found.status_code == 200, found.text
    assert found.json()["result"]["supportedVersions"] == [LATEST_MODERN_VERSION]
    assert "tools" in found.json()["result"]["capabilities"]
    assert newest.json()["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
    assert older.json()["result"]["protocolVersion"] == "2025-03-26"


# -- item 2: budgets belong to credentials ---------------------------------------------------------------------------


def test_a_session_tokens_budget_holds_across_eras_and_every_per_request_field(tmp_path: Path) -> None:
    token = _token("--label", "agent-7", "--run", "contest")
    tool = tool_of(B001)

    async def main(url: str) -> list[Outcome]:
        results: list[Outcome] = []
        with anyio.fail_after(120):
            async with http_client(url, "legacy", token) as client:
                results += await _calls(client, tool, 2)
            async with http_client(url, "auto", token) as client:
                results += await _calls(client, tool, 1, meta={"dev.pau-mcp/session": "someone-else"})
                results += await _calls(client, tool, 1, meta={"dev.pau-mcp/run": "another-run"})
            async with http_client(f"{url}?run=fresh-run", "auto", token) as client:
                results += await _calls(client, tool, 1)
            async with http_client(url, "auto", token, **{"X-PAU-Session": "fresh-label"}) as client:
                results += await _calls(client, tool, 1)
            async with http_client(url, LATEST_MODERN_VERSION, token) as client:
                results += await _calls(client, tool, 3)
            async with http_client(f"{url}?session=agent-7&run=contest", "legacy", token) as client:
                results += await _calls(client, tool, 2)
        return results

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--budget", "3") as url:
        results = anyio.run(main, url)
    assert _ran(results) == 3
    refused = [r for r in results[2:6]]
    assert all(isinstance(r, MCPError) and "session token" in str(r) for r in refused), refused
    over = [r for r in results if not isinstance(r, MCPError) and not ran(r)]
    assert over and all(r.structured_content["status"] == "over_budget" for r in over)


@pytest.mark.parametrize("named_by", ["query", "header", "meta"])
def test_a_label_of_the_main_token_keeps_one_budget_whichever_era_and_way_names_it(
    tmp_path: Path, named_by: str
) -> None:
    tool = tool_of(B001)

    async def main(url: str) -> list[Outcome]:
        results: list[Outcome] = []
        with anyio.fail_after(120):
            async with http_client(f"{url}?session=alice", "legacy", MAIN) as client:
                results += await _calls(client, tool, 2)
            if named_by == "query":
                async with http_client(f"{url}?session=alice", "auto", MAIN) as client:
                    results += await _calls(client, tool, 3)
            elif named_by == "header":
                async with http_client(url, "auto", MAIN, **{"X-PAU-Session": "alice"}) as client:
                    results += await _calls(client, tool, 3)
            else:
                async with http_client(url, "auto", MAIN) as client:
                    results += await _calls(client, tool, 3, meta={"dev.pau-mcp/session": "alice"})
        return results

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--budget", "3") as url:
        results = completed(anyio.run(main, url))
    assert [ran(r) for r in results] == [True, True, True, False, False]
    assert results[2].structured_content["queries_used"] == 3


def test_requests_of_the_main_token_without_a_label_share_its_default_budget_in_both_eras(tmp_path: Path) -> None:
    tool = tool_of(B001)

    async def main(url: str) -> list[Outcome]:
        results: list[Outcome] = []
        with anyio.fail_after(120):
            for mode in ("legacy", "legacy", "auto", LATEST_MODERN_VERSION):
                async with http_client(url, mode, MAIN) as client:
                    results += await _calls(client, tool, 2)
        return results

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--budget", "5") as url:
        results = completed(anyio.run(main, url))
    assert [ran(r) for r in results] == [True] * 5 + [False] * 3


def test_concurrent_modern_calls_of_one_credential_never_exceed_its_budget(tmp_path: Path) -> None:
    token = _token("--label", "eager")
    tool = tool_of(B001)

    async def main(url: str) -> list[CallToolResult]:
        results: list[CallToolResult] = []
        async with http_client(url, LATEST_MODERN_VERSION, token) as client:

            async def one(i: int) -> None:
                results.append(await client.call_tool(tool, {"arg0": i}))

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for i in range(12):
                        group.start_soon(one, i)
        return results

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--token", MAIN, "--budget", "3") as url:
        results = anyio.run(main, url)
    assert len(results) == 12 and _ran(results) == 3
    assert sorted(r.structured_content["queries_used"] for r in results if ran(r)) == [1, 2, 3]


def test_over_stdio_the_server_process_is_the_budget_whatever_a_request_names(tmp_path: Path) -> None:
    tool = tool_of(B001)

    async def main() -> list[Outcome]:
        results: list[Outcome] = []
        with anyio.fail_after(60):
            streams = memory_streams("--db", str(tmp_path / "runs.db"), "--methods", B001, "--budget", "3")
            async with Client(streams, mode=LATEST_MODERN_VERSION, cache=None) as client:
                for i in range(5):
                    results += await _calls(client, tool, 1, meta={"dev.pau-mcp/session": f"label-{i}"})
        return results

    results = completed(anyio.run(main))
    assert [ran(r) for r in results] == [True, True, True, False, False]
    assert all(r.structured_content["budget_scope"] == "process" for r in results)


# -- item 3: tool lists ----------------------------------------------------------------------------------------------


def test_a_modern_tool_list_depends_only_on_the_credential_never_on_an_earlier_request(tmp_path: Path) -> None:
    narrow = _token("--label", "narrow", "--methods", f"{B001},{B002}")

    async def main(url: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with anyio.fail_after(120):
            async with http_client(url, LATEST_MODERN_VERSION, MAIN) as client:
                seen["main-before"] = await _names(client)
                opened = await client.call_tool("open", {"methods": [tool_of(B003)]})
                seen["open-result"] = opened.structured_content
                seen["main-after"] = await _names(client)
            async with http_client(url, "legacy", MAIN) as other:
                await other.call_tool("open", {"methods": [tool_of(B002)]})
                seen["legacy-opened"] = await _names(other)
            async with http_client(url, LATEST_MODERN_VERSION, MAIN) as client:
                seen["main-later"] = await _names(client)
            async with http_client(url, LATEST_MODERN_VERSION, narrow) as client:
                seen["narrow"] = await _names(client)
        return seen

    with memory_http_server(
        "--db", str(tmp_path / "runs.db"), "--token", MAIN, "--methods", f"{B001},{B002},{B003}"
    ) as url:
        seen = anyio.run(main, url)
    everything = {tool_of(B001), tool_of(B002), tool_of(B003), "submit"}
    assert set(seen["main-before"]) == everything
    assert seen["main-after"] == seen["main-before"] == seen["main-later"]
    assert seen["open-result"]["status"] == "unknown_tool"
    assert set(seen["legacy-opened"]) == {tool_of(B002), "submit", "open"}
    assert set(seen["narrow"]) == {tool_of(B001), tool_of(B002), "submit"}


def test_the_methods_parameter_narrows_each_request_that_carries_it_and_no_other(tmp_path: Path) -> None:
    async def main(url: str) -> tuple[list[str], list[str]]:
        with anyio.fail_after(60):
            async with http_client(f"{url}?methods={tool_of(B002)}", "auto") as client:
                narrowed = await _names(client)
            async with http_client(url, "auto") as client:
                whole = await _names(client)
        return narrowed, whole

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--methods", f"{B001},{B002}") as url:
        narrowed, whole = anyio.run(main, url)
    assert narrowed == ["submit", tool_of(B002)]
    assert set(whole) == {"submit", tool_of(B001), tool_of(B002)}


def test_stateless_requests_follow_the_credential_rules_a_fresh_run_label_gets_no_fresh_budget(tmp_path: Path) -> None:
    token = _token("--label", "agent-s", "--run", "contest")
    tool = tool_of(B001)

    async def main(url: str) -> tuple[list[Outcome], list[Outcome], tuple[CallToolResult, list[str]]]:
        with anyio.fail_after(120):
            token_results: list[Outcome] = []
            for i in range(5):
                async with http_client(f"{url}?run=run-{i}" if i else url, "legacy", token) as client:
                    token_results += await _calls(client, tool, 2)
            main_results: list[Outcome] = []
            for mode in ("legacy", "auto", "legacy"):
                async with http_client(url, mode, MAIN) as client:
                    main_results += await _calls(client, tool, 2)
            async with http_client(url, "legacy", MAIN) as client:
                opened = await client.call_tool("open", {"methods": [tool_of(B001)]})
                names = await _names(client)
        return token_results, main_results, (opened, names)

    args = [
        "--db",
        str(tmp_path / "runs.db"),
        "--token",
        MAIN,
        "--stateless",
        "--budget",
        "3",
        "--methods",
        f"{B001},{B002}",
    ]
    with memory_http_server(*args) as url:
        token_results, main_results, (opened, names) = anyio.run(main, url)
    assert _ran(token_results) == 2 and all(isinstance(r, MCPError) for r in token_results[2:])
    assert [ran(r) for r in completed(main_results)] == [True, True, True, False, False, False]
    assert opened.structured_content["status"] == "unknown_tool"
    assert set(names) == {tool_of(B001), tool_of(B002), "submit"}
