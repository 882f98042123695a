"""A handshake-era request to a ``--stateless`` server is answered as one exchange, and reads as the SDK's own
session would have answered it; what is not a plain request is left to the SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from conftest import memory_http_server, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from pau_mcp.server import exchange
from pau_mcp.tls import shared_context


async def _session_answers(url: str) -> list[Any]:
    """What the official client reads, in the handshake era, for a run of requests of every kind a server answers."""
    tool = tool_of("builtin/b001")
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        answers: list[Any] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            answers.append([t.model_dump(by_alias=True, exclude_none=True) for t in page.tools])
            cursor = page.next_cursor
            if cursor is None:
                break
        for arguments in ({"args": "(-23,)"}, {"args": "(("}, {"arg0": "not a number"}):
            answers.append((await session.call_tool(tool, arguments)).model_dump(by_alias=True, exclude_none=True))
        try:
            await session.call_tool("no_such_tool", {})
        except MCPError as refused:  # a JSON-RPC error: its code and words
            answers.append((refused.error.code, refused.error.message))
        answers.append((await session.list_prompts()).model_dump(by_alias=True, exclude_none=True))
        answers.append((await session.list_resources()).model_dump(by_alias=True, exclude_none=True))
        answers.append(await session.send_ping())
        return answers


def test_a_stateless_request_answered_as_one_exchange_reads_as_the_sdks_own_stateless_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered: list[bool] = []
    real = exchange.one_exchange

    async def counted(*args: Any) -> bytes | None:
        body = await real(*args)
        answered.append(body is None)
        return body

    async def left_to_the_sdk(app: Any, state: Any, version: Any, scope: Any, receive: Any, send: Any) -> bytes:
        return await Request(scope, receive).body()

    settings = ("--stateless", "--suite", "builtin", "--page-size", "4", "--budget", "5")
    monkeypatch.setattr("pau_mcp.server.http.one_exchange", left_to_the_sdk)
    with memory_http_server("--db", str(tmp_path / "a.db"), *settings) as url:
        by_the_sdk = anyio.run(_session_answers, url)
    monkeypatch.setattr("pau_mcp.server.http.one_exchange", counted)
    with memory_http_server("--db", str(tmp_path / "b.db"), *settings) as url:
        as_exchanges = anyio.run(_session_answers, url)
    assert as_exchanges == by_the_sdk
    assert by_the_sdk[-7]["structuredContent"]["value"] == "-6" and by_the_sdk[-5]["isError"]
    assert "Unknown tool" in by_the_sdk[-4][1]
    # Each answer read is one request, and each was one exchange; the opening and the notification after it (and
    # any GET the client tries for a stream) went to the SDK.
    assert answered.count(True) == len(as_exchanges) and answered.count(False) >= 2


def test_a_server_with_sessions_never_answers_as_one_exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[object] = []

    async def noted(*args: Any) -> bytes | None:
        taken.append(args)
        return await exchange.one_exchange(*args)

    monkeypatch.setattr("pau_mcp.server.http.one_exchange", noted)
    with memory_http_server("--db", str(tmp_path / "a.db"), "--suite", "builtin") as url:
        answers = anyio.run(_session_answers, url)
    assert answers[-7]["structuredContent"]["value"] == "-6" and taken == []


@pytest.mark.parametrize(
    ("headers", "message", "status"),
    [
        ({"accept": "text/event-stream"}, {"id": 1, "method": "ping"}, 406),
        ({"content-type": "text/plain"}, {"id": 1, "method": "ping"}, 400),  # the SDK: "Invalid Content-Type header"
        ({}, {"method": "notifications/initialized"}, 202),
        ({}, {"id": 1, "method": "ping"}, 200),
    ],
    ids=["no-json-accepted", "not-json", "notification", "plain"],
)
def test_what_is_not_a_plain_request_is_answered_by_the_sdk_as_before(
    tmp_path: Path, headers: dict[str, str], message: dict[str, Any], status: int
) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--stateless") as url:
        reply = httpx2.post(
            url,
            content=httpx2.Request("POST", url, json={"jsonrpc": "2.0", **message}).content,
            headers={"accept": "application/json", "content-type": "application/json", **headers},
            verify=shared_context(),
        )
    assert reply.status_code == status, reply.text
    if status == 200:
        assert reply.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
