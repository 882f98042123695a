"""Tool names are keyed by a per-deployment secret, and agent-facing inputs take tool names only.

Knowing every method id (they are public, with their gold descriptions, in this repository) must not let an agent
name a tool's method, nor confirm a guess.

The servers run in the test's process (`memory_session`, `memory_http_server`), and so do the operator commands
(`run_pau`); the key file is first created by a real `pau-mcp serve` process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

import anyio
import pytest
from conftest import (
    ROOT,
    TEST_KEY,
    RawSession,
    memory_http_server,
    memory_session,
    served,
    stdio_session,
    text_of,
    tool_of,
)
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from pau_command import Ran, run_pau

from pau_mcp.manifests import ManifestStore

BUILTIN = sorted(ManifestStore().suite("builtin").methods)


def _unkeyed(method_id: str) -> str:
    """How tool names were made before they were keyed: what any agent can compute."""
    return "fn_" + hashlib.sha256(method_id.encode()).hexdigest()[:10]


async def _tool_names(*args: str) -> list[str]:
    async with memory_session(*args) as session:
        return [t.name for t in (await session.list_tools()).tools if t.name.startswith("fn_")]


async def _process_tool_names(*args: str) -> list[str]:
    """The tool names of a `pau-mcp serve` process: a fresh interpreter, with nothing of the test's process."""
    async with stdio_session(*args) as session:
        return [t.name for t in (await session.list_tools()).tools if t.name.startswith("fn_")]


def _pau(*args: str, env: dict[str, str] | None = None) -> Ran:
    """``pau-mcp ARGS``, run in this process."""
    return run_pau(*args, env=env if env is not None else dict(os.environ), cwd=ROOT)


def test_no_tool_name_can_be_reversed_by_hashing_the_public_method_ids(tmp_path: Path) -> None:
    names = anyio.run(_tool_names, "--db", str(tmp_path / "runs.db"))
    assert len(names) == len(BUILTIN)
    guessed = {_unkeyed(method_id) for method_id in BUILTIN}
    assert not guessed & set(names)
    assert all(re.fullmatch(r"fn_[0-9a-f]{10}", name) for name in names)


def test_the_key_is_created_once_in_the_data_directory_private_and_names_survive_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAU_MCP_TOOL_KEY")
    data = tmp_path / "data"
    first = anyio.run(_process_tool_names, "--data-dir", str(data))
    key_file = data / "tool.key"
    assert key_file.exists() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    created = key_file.read_text()
    assert len(created.strip()) >= 32
    second = anyio.run(_tool_names, "--data-dir", str(data))  # a restart: a new server reading the same directory
    assert second == first and key_file.read_text() == created
    elsewhere = anyio.run(_tool_names, "--data-dir", str(tmp_path / "other"))
    assert set(elsewhere).isdisjoint(first)


def test_servers_given_the_same_key_agree_on_every_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAU_MCP_TOOL_KEY")
    by_flag = anyio.run(_tool_names, "--data-dir", str(tmp_path / "a"), "--tool-key", TEST_KEY)
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", TEST_KEY)
    by_variable = anyio.run(_tool_names, "--data-dir", str(tmp_path / "b"))
    assert by_flag == by_variable == sorted(tool_of(method_id) for method_id in BUILTIN)  # listed by tool name
    assert not (tmp_path / "b" / "tool.key").exists()


def test_a_short_tool_key_is_a_usage_error_naming_the_flag_and_variable(tmp_path: Path) -> None:
    result = _pau("methods", "--tool-key", "short")
    assert result.returncode == 2
    assert "--tool-key" in result.stderr and "PAU_MCP_TOOL_KEY" in result.stderr


def test_a_data_directory_where_no_key_can_be_created_says_how_to_give_one(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "PAU_MCP_TOOL_KEY"}
    result = _pau("methods", "--data-dir", str(blocker / "data"), env=env)
    assert result.returncode == 1
    assert "PAU_MCP_TOOL_KEY" in result.stderr and "--tool-key" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_operator_commands_show_the_servers_names_and_still_take_ids(tmp_path: Path) -> None:
    listed = _pau("methods", "--json", "--methods", "builtin/b001,builtin/b002")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["tool"]) for r in rows] == [(m, tool_of(m)) for m in ("builtin/b001", "builtin/b002")]
    manifests = _pau("manifests", "list", "--suite", "builtin", "--json")
    assert {json.loads(line)["tool"] for line in manifests.stdout.splitlines()} == {tool_of(m) for m in BUILTIN}
    shown = _pau("manifests", "show", "builtin/b003", "--json")
    assert json.loads(shown.stdout)["tool"] == tool_of("builtin/b003")
    by_id = _pau("call", "builtin/b001", "(105,)", "--db", str(tmp_path / "runs.db"))
    by_tool = _pau("call", tool_of("builtin/b001"), "(105,)", "--db", str(tmp_path / "runs.db"))
    assert "returned 5" in by_id.stdout and "returned 5" in by_tool.stdout


def _same_error(reply_a: str, name_a: str, reply_b: str, name_b: str) -> bool:
    return reply_a.replace(name_a, "NAME") == reply_b.replace(name_b, "NAME")


def test_submit_answers_a_method_id_exactly_as_an_unknown_name_and_records_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def main() -> list[CallToolResult]:
        async with memory_session("--db", str(db)) as session:
            return [
                await session.call_tool("submit", {"method": name, "description": "a guess"})
                for name in ("builtin/b001", "fn_0123456789", tool_of("builtin/b001").upper())
            ]

    by_id, unknown, near = anyio.run(main)
    assert by_id.is_error and unknown.is_error and near.is_error
    assert _same_error(text_of(by_id.content[0]), "builtin/b001", text_of(unknown.content[0]), "fn_0123456789")
    assert by_id.structured_content["status"] == unknown.structured_content["status"] == "unknown_tool"
    assert _same_error(
        by_id.structured_content["error_message"], "builtin/b001", unknown.structured_content["error_message"],
        "fn_0123456789",
    )  # fmt: skip
    import sqlite3

    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM submissions").fetchone() == (0,)


def test_open_answers_a_method_id_exactly_as_an_unknown_name(tmp_path: Path) -> None:
    async def main() -> tuple[CallToolResult, CallToolResult, list[str]]:
        async with memory_session("--db", str(tmp_path / "runs.db")) as session:
            by_id = await session.call_tool("open", {"methods": ["builtin/b007"]})
            unknown = await session.call_tool("open", {"methods": ["fn_0123456789"]})
            names = [t.name for t in (await session.list_tools()).tools]
            return by_id, unknown, names

    by_id, unknown, names = anyio.run(main)
    assert by_id.is_error and unknown.is_error
    assert _same_error(text_of(by_id.content[0]), "builtin/b007", text_of(unknown.content[0]), "fn_0123456789")
    assert len(names) == len(BUILTIN) + 2  # nothing was narrowed


def test_calling_a_method_id_as_a_tool_is_answered_exactly_as_an_unknown_name(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def main() -> list[MCPError]:
        errors = []
        async with memory_session("--db", str(db)) as session:
            for name in ("builtin/b001", "fn_0123456789"):
                try:
                    await session.call_tool(name, {"arg0": 105})
                except MCPError as exc:
                    errors.append(exc)
        return errors

    by_id, unknown = anyio.run(main)
    assert by_id.error.code == unknown.error.code == INVALID_PARAMS
    assert _same_error(by_id.error.message, "builtin/b001", unknown.error.message, "fn_0123456789")
    import sqlite3

    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM calls").fetchone() == (0,)


def test_the_methods_url_parameter_treats_a_method_id_as_an_unknown_name(tmp_path: Path) -> None:
    async def listed(url: str) -> list[str]:
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        by_id = anyio.run(listed, f"{url}?methods=builtin/b007")
        unknown = anyio.run(listed, f"{url}?methods=fn_0123456789")
        by_tool = anyio.run(listed, f"{url}?methods={tool_of('builtin/b007')}")
    assert by_id == unknown
    assert tool_of("builtin/b007") not in by_id
    assert by_tool == ["submit", "open", tool_of("builtin/b007")]


def test_tools_resources_and_prompts_refuse_method_ids_as_they_refuse_any_unknown_name(tmp_path: Path) -> None:
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        raw = RawSession(url)
        answers = {}
        for name in ("builtin/b001", "fn_0123456789"):
            answers[name] = [
                raw.call(name, {"arg0": 1}),
                raw.request("resources/read", {"uri": f"pau://method/{name}"}),
                raw.request("prompts/get", {"name": name}),
            ]
        raw.close()
    for by_id, unknown in zip(answers["builtin/b001"], answers["fn_0123456789"], strict=True):
        assert not served(by_id)
        by_id_text = json.dumps({k: v for k, v in by_id.items() if k != "id"})
        unknown_text = json.dumps({k: v for k, v in unknown.items() if k != "id"})
        assert _same_error(by_id_text, "builtin/b001", unknown_text, "fn_0123456789")


def test_no_reply_of_an_ordinary_session_names_a_method_or_its_unkeyed_hash(tmp_path: Path) -> None:
    chosen = ["builtin/b001", "builtin/b002"]

    async def main() -> str:
        transcript = []
        async with memory_session("--db", str(tmp_path / "runs.db"), "--methods", ",".join(chosen)) as session:
            transcript.append((await session.list_tools()).model_dump_json())
            transcript.append((await session.list_resources()).model_dump_json())
            transcript.append((await session.list_prompts()).model_dump_json())
            for method_id in chosen:
                tool = tool_of(method_id)
                transcript.append((await session.read_resource(f"pau://method/{tool}")).model_dump_json())
                transcript.append((await session.get_prompt(tool)).model_dump_json())
                for arguments in ({"arg0": 5}, {"args": "('ab',)"}, {"args": "oops("}, {"x": 1}):
                    transcript.append((await session.call_tool(tool, arguments)).model_dump_json())
                transcript.append(
                    (await session.call_tool("submit", {"method": tool, "description": "d"})).model_dump_json()
                )
            transcript.append((await session.call_tool("open", {"methods": [tool_of(chosen[0])]})).model_dump_json())
        return "\n".join(transcript)

    text = anyio.run(main)
    for method_id in chosen:
        assert method_id not in text and method_id.split("/")[1] not in text
        assert _unkeyed(method_id) not in text
    assert "builtin" not in text
