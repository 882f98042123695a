"""Hostile tool calls over stdio: oversized, unprintable and unrecordable arguments get one clear line each.

Every call that counts is recorded; every refused call says why in one line and does not count; the store keeps
only a bounded prefix of what a refused call sent. The server is built in the test's process (``memory_session``)
except where the process is the subject: a disk that fills up under it, and a call cancelled on the wire.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ROOT, memory_session, text_of, tool_of
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from test_stdio_wire import Wire

from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.runstore import RunStore
from wasm_runtime import Sandbox


def _hostile_methods() -> list[Method]:
    common: dict[str, Any] = {
        "provenance": Provenance(dataset="test"),
        "tags": Tags(arity=1),
        "header": "def test_func(arg0):",
    }
    return [
        Method(
            id="hostile/shout", params=["arg0"], description="Prints its argument, then raises it as a ValueError.",
            source="def test_func(arg0):\n    print(arg0)\n    raise ValueError(arg0)\n",
            examples=[Case(input="('a',)")], tests=[Case(input="('b',)")], **common,
        ),
        Method(
            id="hostile/spin", params=["arg0"], description="Loops forever on a truthy argument, else returns 0.",
            source="def test_func(arg0):\n    while arg0:\n        pass\n    return 0\n",
            examples=[Case(input="(0,)")], tests=[Case(input="('',)")], **common,
        ),
        Method(
            id="hostile/size", params=["arg0"], description="Returns the length of its argument's repr.",
            source="def test_func(arg0):\n    return len(repr(arg0))\n",
            examples=[Case(input="('a',)")], tests=[Case(input="('b',)")], **common,
        ),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def hostile(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manifests directory with suite `hostile`, frozen in the real sandbox."""
    root = tmp_path_factory.mktemp("hostile")
    suite = Suite.create(root, SuiteInfo(name="hostile"))
    for method in _hostile_methods():
        suite.save(freeze_method(method, sandbox))
    return root


def _tool(hostile: Path, name: str) -> str:
    return tool_of(f"hostile/{name}")


def _calls(db: Path) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return conn.execute("SELECT * FROM calls ORDER BY id").fetchall()


def _serve(db: Path, hostile: Path, *extra: str) -> tuple[str, ...]:
    return ("--db", str(db), "--manifests", str(hostile), "--suite", "hostile", "--budget", "5", *extra)


def _one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


def test_an_argument_over_the_size_cap_is_refused_in_one_line_and_does_not_count(tmp_path: Path, hostile: Path) -> None:
    db = tmp_path / "runs.db"
    tool = _tool(hostile, "size")

    async def main() -> None:
        async with memory_session(*_serve(db, hostile)) as session:
            big = await session.call_tool(tool, {"arg0": "x" * 70_000})
            assert big.is_error and big.structured_content["status"] == "invalid_input"
            assert big.structured_content["queries_used"] == 0
            text = text_of(big.content[0])
            assert _one_line(text) and "64 KiB" in text and "--max-argument-kb" in text
            literal = await session.call_tool(tool, {"args": "('" + "y" * 70_000 + "',)"})
            assert literal.is_error and "64 KiB" in text_of(literal.content[0])
            small = await session.call_tool(tool, {"arg0": "x" * 1000})
            assert small.structured_content["queries_used"] == 1

    anyio.run(main)
    assert [(r["counted"], r["status"]) for r in _calls(db)] == [(0, "invalid_input"), (0, "invalid_input"), (1, "ok")]


def test_a_raised_argument_cap_lets_a_large_argument_through(tmp_path: Path, hostile: Path) -> None:
    tool = _tool(hostile, "size")

    async def main() -> None:
        async with memory_session(*_serve(tmp_path / "runs.db", hostile, "--max-argument-kb", "256")) as session:
            with anyio.fail_after(60):
                result = await session.call_tool(tool, {"arg0": "x" * 200_000})
            assert result.structured_content["value"] == "200002"
            assert text_of(result.content[0]).startswith("test_func('xxxx")

    anyio.run(main)


def test_refused_calls_are_recorded_as_a_bounded_prefix_with_their_size(tmp_path: Path, hostile: Path) -> None:
    db = tmp_path / "runs.db"
    tool = _tool(hostile, "size")

    async def main() -> None:
        async with memory_session(*_serve(db, hostile, "--budget", "1")) as session:
            await session.call_tool(tool, {"arg0": "z" * 300_000})
            await session.call_tool(tool, {"args": "(" + "[1, 2, " * 5000 + ")"})
            await session.call_tool(tool, {"arg0": "1"})
            await session.call_tool(tool, {"arg0": "w" * 60_000})

    anyio.run(main)
    rows = _calls(db)
    assert [(r["counted"], r["status"]) for r in rows] == [
        (0, "invalid_input"),
        (0, "invalid_input"),
        (1, "ok"),
        (0, "over_budget"),
    ]
    for row in (rows[0], rows[1], rows[3]):
        assert len(row["arguments"]) < 2_000
    assert "300,0" in rows[0]["arguments"] and rows[0]["arguments"].startswith('{"arg0": "zzz')
    assert "60,0" in rows[3]["arguments"]
    assert db.stat().st_size < 1_000_000


@pytest.mark.parametrize(
    "literal", ["(0x" + "f" * 4000 + ",)", "(" + "9" * 4400 + ",)", "([1, 0x" + "f" * 4000 + "],)"]
)
def test_an_integer_too_long_to_print_is_refused_in_one_line_and_recorded(
    tmp_path: Path, hostile: Path, literal: str
) -> None:
    db = tmp_path / "runs.db"
    tool = _tool(hostile, "size")

    async def main() -> None:
        async with memory_session(*_serve(db, hostile)) as session:
            refused = await session.call_tool(tool, {"args": literal})
            assert refused.is_error
            text = text_of(refused.content[0])
            assert _one_line(text) and re.search(r"4,?300 digits", text) and "set_int_max_str_digits" not in text
            after = await session.call_tool(tool, {"arg0": "7"})
            assert after.structured_content["queries_used"] == 1

    anyio.run(main)
    assert [(r["counted"], r["status"]) for r in _calls(db)] == [(0, "invalid_input"), (1, "ok")]


def test_a_lone_surrogate_a_function_prints_and_raises_is_answered_counted_and_recorded(
    tmp_path: Path, hostile: Path
) -> None:
    db = tmp_path / "runs.db"
    tool = _tool(hostile, "shout")

    async def main() -> None:
        async with memory_session(*_serve(db, hostile)) as session:
            with anyio.fail_after(30):
                result = await session.call_tool(tool, {"args": "('a\\ud800b',)"})
            assert not result.is_error
            assert result.structured_content["status"] == "error"
            assert result.structured_content["error_message"] == "a\\ud800b"
            assert result.structured_content["printed"] == "a\\ud800b\n"
            assert "raised ValueError: a\\ud800b" in text_of(result.content[0])
            again = await session.call_tool(tool, {"arg0": "fine"})
            assert again.structured_content["queries_used"] == 2

    anyio.run(main)
    rows = _calls(db)
    assert [(r["counted"], r["status"]) for r in rows] == [(1, "error"), (1, "error")]
    assert rows[0]["error_message"] == "a\\ud800b"


def _limited_serve(db: Path, hostile: Path, max_bytes: int) -> StdioServerParameters:
    """`pau-mcp serve` whose files may not grow past ``max_bytes`` (RLIMIT_FSIZE): a disk that fills up."""
    serve = [sys.executable, "-m", "pau_mcp", "serve", *_serve(db, hostile, "--budget", "0")]
    launcher = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({max_bytes}, {max_bytes})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return StdioServerParameters(
        command=sys.executable, args=["-c", launcher, *serve], cwd=str(ROOT), env=dict(os.environ)
    )


def test_a_call_that_cannot_be_recorded_does_not_count_and_says_why(tmp_path: Path, hostile: Path) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    tool = _tool(hostile, "size")
    replies: list[CallToolResult] = []

    async def main() -> None:
        params = _limited_serve(db, hostile, db.stat().st_size + 400_000)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                for i in range(30):
                    replies.append(await session.call_tool(tool, {"arg0": str(i) * 30_000}))
                    if replies[-1].is_error:
                        break
                await session.send_ping()
                replies.append(await session.call_tool(tool, {"arg0": "tiny"}))

    anyio.run(main)
    failed = [r for r in replies if r.is_error]
    assert failed, "the store never filled up"
    text = text_of(failed[0].content[0])
    assert _one_line(text) and "not recorded" in text and "did not count" in text
    counted = [r.structured_content["queries_used"] for r in replies if not r.is_error]
    assert counted == list(range(1, len(counted) + 1))
    assert len([r for r in _calls(db) if r["counted"]]) == len(counted)


def test_a_call_cancelled_while_it_runs_is_counted_and_recorded_and_the_next_call_gets_its_own_result(
    tmp_path: Path, hostile: Path
) -> None:
    db = tmp_path / "runs.db"
    server = Wire(db, "--manifests", str(hostile), "--suite", "hostile", "--workers", "1", "--timeout", "1")
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        assert server.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, timeout=120)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        spin, size = _tool(hostile, "spin"), _tool(hostile, "size")
        server.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": spin, "arguments": {"arg0": 1}}}
        )
        time.sleep(0.3)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        call = {"name": size, "arguments": {"arg0": "abc"}}
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        # The cancelled call runs to its end; a late reply to it (id 1) may come first and is ignored.
        reply = server.receive(timeout=60)
        while reply is not None and reply.get("id") == 1:
            reply = server.receive(timeout=60)
        assert reply is not None and reply["id"] == 2, reply
        assert reply["result"]["structuredContent"]["value"] == "5", reply
    finally:
        server.close()
    rows = [(r["tool"], r["counted"], r["status"]) for r in _calls(db)]
    assert rows == [(spin, 1, "timeout"), (size, 1, "ok")]
