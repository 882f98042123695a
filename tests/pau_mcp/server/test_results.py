"""Tool results a program can act on: a machine-readable status on every result, refusals included, and whose
budget a call spent."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import jsonschema
import pytest
from conftest import http_server, memory_session, text_of, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult

from pau_mcp.contract import OUTPUT_SCHEMA
from pau_mcp.tls import shared_context

B001 = "builtin/b001"


def test_a_call_over_the_budget_is_an_observation_with_status_over_budget(tmp_path: Path) -> None:
    """Not a tool error: clients that retry tool errors (pydantic-ai) or stop on them must still let the agent
    submit; the status says what happened."""
    tool = tool_of(B001)

    async def main() -> list[CallToolResult]:
        async with memory_session("--db", str(tmp_path / "r.db"), "--budget", "2", "--methods", B001) as session:
            return [await session.call_tool(tool, {"arg0": i}) for i in range(4)]

    results = anyio.run(main)
    for result in results:
        jsonschema.validate(result.structured_content, OUTPUT_SCHEMA)
    assert [r.structured_content["status"] for r in results] == ["ok", "ok", "over_budget", "over_budget"]
    over = results[2]
    assert not over.is_error
    assert over.structured_content["queries_used"] == 2 and over.structured_content["queries_left"] == 0
    assert over.structured_content["value"] is None
    assert "spent" in text_of(over.content[0]) and "submit" in text_of(over.content[0])


def test_refused_arguments_are_tool_errors_with_a_status_and_unknown_tools_are_protocol_errors(tmp_path: Path) -> None:
    tool = tool_of(B001)

    async def main() -> tuple[dict[str, CallToolResult], MCPError]:
        async with memory_session("--db", str(tmp_path / "r.db"), "--methods", B001) as session:
            out = {"first": await session.call_tool(tool, {"arg0": 1})}
            out["malformed"] = await session.call_tool(tool, {"args": "(len('x'),)"})
            out["missing"] = await session.call_tool(tool, {})
            out["extra"] = await session.call_tool(tool, {"arg0": 1, "arg9": 2})
            # An unknown tool (here one narrowed away by --methods) is the specification's protocol error, -32602.
            with pytest.raises(MCPError) as unknown:
                await session.call_tool(tool_of("builtin/b002"), {"arg0": 1})
            out["submit_unknown"] = await session.call_tool("submit", {"method": "fn_0", "description": "d"})
            out["submit_empty"] = await session.call_tool("submit", {"method": tool, "description": " "})
            out["submitted"] = await session.call_tool("submit", {"method": tool, "description": "d", "code": None})
            out["open_unknown"] = await session.call_tool("open", {"methods": ["fn_0"]})
            out["after"] = await session.call_tool(tool, {"arg0": 2})
            return out, unknown.value

    got, unknown_tool = anyio.run(main)
    for key in ("malformed", "missing", "extra"):
        assert got[key].is_error, key
        assert got[key].structured_content["status"] == "invalid_input", key
        jsonschema.validate(got[key].structured_content, OUTPUT_SCHEMA)
        assert got[key].structured_content["queries_used"] == 1
        assert got[key].structured_content["error_message"] in text_of(got[key].content[0])
    assert "arg9" in text_of(got["extra"].content[0])
    assert unknown_tool.error.code == INVALID_PARAMS and "list the tools" in unknown_tool.error.message
    assert got["submit_unknown"].is_error and got["submit_unknown"].structured_content["status"] == "unknown_tool"
    assert got["submit_empty"].is_error and got["submit_empty"].structured_content["status"] == "invalid_input"
    assert got["open_unknown"].is_error and got["open_unknown"].structured_content["status"] == "unknown_tool"
    assert not got["submitted"].is_error and got["submitted"].structured_content["status"] == "recorded"
    assert got["after"].structured_content["queries_used"] == 2


def test_a_stdio_server_says_its_budget_lasts_as_long_as_its_process(tmp_path: Path) -> None:
    """A client that starts a new server for every call (langchain-mcp-adapters' default) sees it at once."""
    tool = tool_of(B001)
    db = str(tmp_path / "r.db")

    async def one_process(calls: int) -> tuple[str | None, list[CallToolResult]]:
        async with memory_session("--db", db, "--budget", "5", "--methods", B001) as session:
            assert session.initialize_result is not None
            instructions = session.initialize_result.instructions
            return instructions, [await session.call_tool(tool, {"arg0": i}) for i in range(calls)]

    async def main() -> list[tuple[str | None, list[CallToolResult]]]:
        return [await one_process(2), await one_process(1)]

    (instructions, first), (_, again) = anyio.run(main)
    note = "new server"
    assert first[0].structured_content["budget_scope"] == "process"
    assert "1 of 5" in text_of(first[0].content[0]) and "server process" in text_of(first[0].content[0])
    assert note in text_of(first[0].content[0])
    assert note not in text_of(first[1].content[0]) and "2 of 5" in text_of(first[1].content[0])
    assert "1 of 5" in text_of(again[0].content[0]) and note in text_of(again[0].content[0])
    assert instructions is not None
    assert "server process" in instructions and "keep one server running" in instructions


def test_the_budget_a_call_spent_is_named_for_labels_and_session_tokens(tmp_path: Path) -> None:
    from test_tokens import _token

    tool = tool_of(B001)
    token = _token("--label", "scoped-agent")

    async def call(url: str, headers: dict[str, str]) -> CallToolResult:
        async with httpx2.AsyncClient(verify=shared_context(), headers=headers, timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                        return await session.call_tool(tool, {"arg0": 3})

    with http_server("--db", str(tmp_path / "r.db"), "--budget", "4") as url:
        plain = anyio.run(call, url, {})
        labelled = anyio.run(call, f"{url}?session=team-b", {})
        scoped = anyio.run(call, url, {"Authorization": f"Bearer {token}"})
    assert plain.structured_content["budget_scope"] == "label"
    assert "by the requests that name no label" in text_of(plain.content[0])
    assert labelled.structured_content["budget_scope"] == "label"
    assert "under the label 'team-b'" in text_of(labelled.content[0])
    assert scoped.structured_content["budget_scope"] == "token"
    assert "scoped-agent" in text_of(scoped.content[0])
    assert "new server" not in text_of(plain.content[0]) + text_of(labelled.content[0]) + text_of(scoped.content[0])
