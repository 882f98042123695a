"""The server's features beside its catalog: the fixture suite served only when named and through the server's own
path (credentials, the run store), the method resources' template and its completion, logging levels per
connection, and ``requestState`` that belongs to one credential."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import anyio
import mcp_types as types
from conftest import TEST_KEY, ModernSession, memory_http_server, memory_session, text_of, tool_of
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPDeprecationWarning

from pau_mcp.server import TokenSigner


def test_the_fixture_suite_is_served_only_when_it_is_named(tmp_path: Path) -> None:
    async def names(*args: str) -> set[str]:
        async with memory_session("--db", str(tmp_path / "runs.db"), *args) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    builtin = anyio.run(names)
    fixtures = anyio.run(names, "--suite", "conformance")
    both = anyio.run(names, "--suite", "builtin", "--suite", "conformance")
    assert "test_simple_text" not in builtin and "greet" not in builtin
    assert "test_simple_text" in fixtures and not any(name.startswith("fn_") for name in fixtures)
    assert both == builtin | fixtures


def test_a_fixture_call_is_recorded_under_its_credential_and_spends_no_budget(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    token = TokenSigner(TEST_KEY).issue("tester")
    args = ("--suite", "conformance", "--db", str(db), "--tool-key", TEST_KEY, "--token", "main-1234", "--budget", "1")
    with memory_http_server(*args) as url:
        client = ModernSession(url, headers={"authorization": f"Bearer {token}"})
        try:
            for _ in range(3):  # over a budget of 1: fixtures spend none
                result = client.request("tools/call", {"name": "greet", "arguments": {"name": "Ada"}})
                assert result["content"][0]["text"] == "Hello, Ada!"
            refused = client.request("tools/call", {"name": "greet", "arguments": {}})
            assert refused["isError"] and "name" in refused["content"][0]["text"]
        finally:
            client.close()
    rows = (
        sqlite3.connect(db)
        .execute("SELECT s.key, c.method_id, c.counted, c.status FROM calls c JOIN sessions s ON s.id = c.session_id")
        .fetchall()
    )
    assert rows == [("tester", "conformance/greet", 0, "ok")] * 3 + [
        ("tester", "conformance/greet", 0, "invalid_input")
    ]


def test_a_request_state_belongs_to_the_credential_it_was_given_to(tmp_path: Path) -> None:
    signer = TokenSigner(TEST_KEY)
    args = ("--suite", "conformance", "--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY, "--token", "main-1234")
    tool = "test_input_required_result_multi_round"
    with memory_http_server(*args) as url:
        alice = ModernSession(url, headers={"authorization": f"Bearer {signer.issue('alice')}"})
        mallory = ModernSession(url, headers={"authorization": f"Bearer {signer.issue('mallory')}"})
        try:
            first = alice.request("tools/call", {"name": tool, "arguments": {}})
            assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["step1"]
            answer = {"step1": {"action": "accept", "content": {"name": "Alice"}}}
            retry = {"name": tool, "arguments": {}, "inputResponses": answer, "requestState": first["requestState"]}
            status, stolen = mallory.send("tools/call", retry)
            assert status == 400 and stolen["error"]["code"] == -32602
            tampered = {**retry, "requestState": first["requestState"][:-4] + "AAAA"}
            status, altered = alice.send("tools/call", tampered)
            assert status == 400 and altered["error"]["code"] == -32602
            second = alice.request("tools/call", retry)
            assert list(second["inputRequests"]) == ["step2"] and second["requestState"] != first["requestState"]
            final = alice.request("tools/call", {
                "name": tool, "arguments": {}, "requestState": second["requestState"],
                "inputResponses": {"step2": {"action": "accept", "content": {"color": "teal"}}},
            })  # fmt: skip
            assert final["content"][0]["text"] == "Multi-round complete for Alice who likes teal"
        finally:
            alice.close()
            mallory.close()


def test_a_connections_log_level_chooses_the_messages_it_gets(tmp_path: Path) -> None:
    async def messages(level: types.LoggingLevel) -> list[str]:
        seen: list[str] = []

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.LoggingMessageNotification):
                seen.append(message.params.data)

        async with memory_session(
            "--suite", "conformance", "--db", str(tmp_path / "runs.db"), message_handler=on_message
        ) as session:
            with warnings.catch_warnings():  # the client warns that the 2026-07-28 revision deprecates it
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.set_logging_level(level)
            await session.call_tool("test_tool_with_logging", {})
            with anyio.move_on_after(2):
                while level == "debug" and len(seen) < 3:
                    await anyio.sleep(0.05)
        return seen

    assert anyio.run(messages, "debug") == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert anyio.run(messages, "warning") == []


def test_the_method_resources_have_a_template_that_completes_the_tools_a_credential_sees(tmp_path: Path) -> None:
    async def main() -> None:
        async with memory_session(
            "--db", str(tmp_path / "runs.db"), "--methods", "builtin/b001,builtin/b002"
        ) as session:
            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["pau://method/{tool}"]
            completed = await session.complete(
                types.ResourceTemplateReference(type="ref/resource", uri="pau://method/{tool}"),
                {"name": "tool", "value": "fn_"},
            )
            assert sorted(completed.completion.values) == sorted([tool_of("builtin/b001"), tool_of("builtin/b002")])
            read = await session.read_resource(f"pau://method/{tool_of('builtin/b001')}")
            assert "header: def test_func" in text_of(read.contents[0])

    anyio.run(main)
