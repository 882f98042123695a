"""`pau-mcp serve` over stdio, driven by the official MCP client as Claude Desktop would.

The budget test runs a real server process end to end; the others build the same server in the test's process
and speak to it in memory (``memory_session``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from conftest import ROOT, memory_session, stdio_session, text_of, tool_of
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError

from pau_mcp.manifests import ManifestStore, Method, call_text


def _builtin(method_id: str) -> Method:
    return ManifestStore().method(method_id)


def test_tools_are_opaque_and_carry_header_examples_schema_and_annotations(tmp_path: Path) -> None:
    async def main() -> None:
        async with memory_session("--db", str(tmp_path / "runs.db")) as session:
            listed = await session.list_tools()
            methods = [t for t in listed.tools if t.name.startswith("fn_")]
            assert len(methods) == len(ManifestStore().suite("builtin").methods)
            assert {t.name for t in listed.tools} >= {"submit", "open"}
            b001 = _builtin("builtin/b001")
            tool = next(t for t in methods if t.name == tool_of(b001.id))
            assert tool.description is not None and tool.output_schema is not None and tool.annotations is not None
            assert b001.header in tool.description
            assert "20 times" in tool.description
            for case in b001.examples:
                assert f"{call_text('test_func', case.input)} -> {case.frozen_outcome().shown()}" in tool.description
            assert set(tool.input_schema["properties"]) == {"arg0", "args"}
            assert tool.output_schema["required"] == ["status", "queries_used", "queries_left"]
            assert (
                tool.annotations.read_only_hint
                and tool.annotations.idempotent_hint
                and not tool.annotations.open_world_hint
            )
            by_tool = {tool_of(m.id): m for m in ManifestStore().suite("builtin").methods.values()}
            for t in methods:
                assert t.name.startswith("fn_") and len(t.name) == 13
                assert by_tool[t.name].name not in t.name and "builtin" not in t.name

    anyio.run(main)


def test_calls_in_both_argument_forms_count_against_the_budget_until_it_is_spent(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    b005 = _builtin("builtin/b001")

    async def main() -> None:
        async with stdio_session("--db", str(db), "--budget", "3", "--run", "stdio-test") as session:
            tool = tool_of(b005.id)
            first = await session.call_tool(tool, {"arg0": 4})
            assert not first.is_error
            assert first.structured_content["status"] == "ok"
            assert first.structured_content["queries_used"] == 1
            assert first.structured_content["queries_left"] == 2
            literal = await session.call_tool(tool, {"args": "(-2,)"})
            assert literal.structured_content["queries_used"] == 2
            malformed = await session.call_tool(tool, {"args": "(len('x'),)"})
            assert malformed.is_error and "literal" in text_of(malformed.content[0])
            unknown = await session.call_tool(tool, {"arg0": 1, "argument": "(1,)"})
            assert unknown.is_error and "unknown argument argument" in text_of(unknown.content[0])
            arity = await session.call_tool(tool, {"args": "(1, 2)"})
            assert arity.is_error and "takes 1 argument" in text_of(arity.content[0])
            third = await session.call_tool(tool, {"arg0": 0})
            assert third.structured_content["queries_left"] == 0
            over = await session.call_tool(tool, {"arg0": 5})
            assert not over.is_error and "budget" in text_of(over.content[0])
            assert over.structured_content["status"] == "over_budget" and over.structured_content["queries_left"] == 0
            submitted = await session.call_tool(
                "submit",
                {
                    "method": tool,
                    "description": "doubles; negatives differ",
                    "code": "def test_func(arg0):\n    return arg0 * 2",
                },
            )
            assert not submitted.is_error and submitted.structured_content["recorded"] is True
            assert "score" not in text_of(submitted.content[0]).lower()

    anyio.run(main)
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT c.arguments, c.counted, c.status FROM calls c JOIN sessions s ON c.session_id = s.id "
            "JOIN runs r ON s.run_id = r.id WHERE r.name = 'stdio-test' ORDER BY c.id"
        )
        .fetchall()
    )
    assert [(r[1], r[2]) for r in rows] == [
        (1, "ok"),
        (1, "ok"),
        (0, "invalid_input"),
        (0, "invalid_input"),
        (0, "invalid_input"),
        (1, "ok"),
        (0, "over_budget"),
    ]
    assert rows[1][0] == "(-2,)"
    submission = sqlite3.connect(db).execute("SELECT method_id, description, code FROM submissions").fetchone()
    assert (
        submission[0] == "builtin/b001" and submission[1] == "doubles; negatives differ" and "arg0 * 2" in submission[2]
    )


def test_a_raising_function_is_an_observation_not_a_tool_error(tmp_path: Path, secret_manifests: Path) -> None:
    async def main() -> None:
        async with memory_session(
            "--db", str(tmp_path / "r.db"), "--manifests", str(secret_manifests), "--suite", "secret"
        ) as session:
            tools = {t.name for t in (await session.list_tools()).tools if t.name.startswith("fn_")}
            method = ManifestStore([secret_manifests]).method("secret/m1")
            assert tool_of(method.id) in tools
            raised = await session.call_tool(tool_of(method.id), {"arg0": "boom"})
            assert not raised.is_error
            assert raised.structured_content["status"] == "error"
            assert raised.structured_content["error_type"] == "ValueError"
            assert "raised ValueError" in text_of(raised.content[0])
            loop = ManifestStore([secret_manifests]).method("secret/m2")
            timed = await session.call_tool(tool_of(loop.id), {"arg0": 1})
            assert timed.structured_content["status"] == "timeout"

    anyio.run(main)


def test_open_narrows_the_session_and_announces_the_change(tmp_path: Path) -> None:
    notes: list[IncomingMessage] = []

    async def on_message(message: IncomingMessage) -> None:
        notes.append(message)

    b010 = _builtin("builtin/b010")

    async def main() -> None:
        async with memory_session("--db", str(tmp_path / "runs.db"), message_handler=on_message) as session:
            opened = await session.call_tool("open", {"methods": [tool_of(b010.id)]})
            assert not opened.is_error
            names = [t.name for t in (await session.list_tools()).tools]
            assert names == ["submit", "open", tool_of(b010.id)]
            hidden = tool_of("builtin/b011")
            with pytest.raises(MCPError, match="Unknown tool"):
                await session.call_tool(hidden, {"args": "(1,)"})
            with anyio.fail_after(10):
                while not any(isinstance(n, types.ToolListChangedNotification) for n in notes):
                    await anyio.sleep(0.05)

    anyio.run(main)


def test_tools_list_is_paginated(tmp_path: Path) -> None:
    async def main() -> None:
        async with memory_session("--db", str(tmp_path / "runs.db"), "--page-size", "10") as session:
            seen: list[str] = []
            cursor = None
            pages = 0
            while True:
                result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
                seen += [t.name for t in result.tools]
                pages += 1
                cursor = result.next_cursor
                if cursor is None:
                    break
            assert pages == 7
            assert len(seen) == len(set(seen)) == len(ManifestStore().suite("builtin").methods) + 2

    anyio.run(main)


def test_resources_and_prompts_show_only_what_an_agent_may_see(tmp_path: Path) -> None:
    b001 = _builtin("builtin/b001")

    async def main() -> None:
        async with memory_session("--db", str(tmp_path / "runs.db"), "--methods", "builtin/b001") as session:
            resources = (await session.list_resources()).resources
            assert [str(r.uri) for r in resources] == [f"pau://method/{tool_of(b001.id)}"]
            text = text_of((await session.read_resource(resources[0].uri)).contents[0])
            assert b001.header in text and "budget: 20" in text
            prompts = (await session.list_prompts()).prompts
            assert [p.name for p in prompts] == [tool_of(b001.id)]
            prompt = await session.get_prompt(tool_of(b001.id))
            body = text_of(prompt.messages[0].content)
            assert tool_of(b001.id) in body and "submit" in body
            for hidden in (b001.description, b001.source.splitlines()[1]):
                assert hidden not in text and hidden not in body

    anyio.run(main)


def test_the_server_exits_when_its_stdin_closes(tmp_path: Path) -> None:
    # ROOT comes from this directory's conftest at import time: a later `from conftest import` inside a test gets
    # whichever conftest module pytest loaded last (tests/wasm_runtime's, in a full run).
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "serve", "--db", str(tmp_path / "r.db")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=60) == 0
