"""Labels (`?session=NAME&run=RUN`, `X-PAU-Session`, `X-PAU-Run`, `_meta`) of the main token's holder: a label in a run
is a credential of its own, with one budget and one record whichever request, connection or era names it.

Each test plays a client with its own HTTP client (``RawSession``) or the official client, against the app
`pau-mcp serve --transport http` serves, run in this process (``memory_http_server``); the evaluation harness's way
of labelling is checked against a real process too. Session tokens, whose label no request can change, are
``test_tokens``'s.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import Outcome, RawSession, completed, http_server, memory_http_server, ran, served, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from pau_mcp.tls import shared_context

B001 = "builtin/b001"
TOKEN = "main-token-0123456789"


def _store_rows(db: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    return sqlite3.connect(db).execute(sql, params).fetchall()


def test_the_label_a_request_names_is_the_budget_it_spends(tmp_path: Path) -> None:
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "2") as url:
        raw = RawSession(url, query={"session": "a"})
        replies = [raw.call(tool, {"arg0": i}, query={"session": name}) for i, name in enumerate("aaabba")]
        unlabelled = [raw.call(tool, {"arg0": i}) for i in range(3)]
        raw.close()
    assert [served(r) for r in replies] == [True, True, False, True, True, False]
    assert [r["result"]["structuredContent"]["queries_used"] for r in replies] == [1, 2, 2, 1, 2, 2]
    assert [served(r) for r in unlabelled] == [True, True, False]


async def _official(
    url: str, calls: list[tuple[str, dict[str, Any]]], headers: dict[str, str] | None = None
) -> list[Outcome]:
    """One official client session doing ``calls`` in order; each result or the MCPError it raised."""
    out: list[Outcome] = []
    async with httpx2.AsyncClient(verify=shared_context(), headers=headers or {}, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(60):
                    await session.initialize()
                    for name, arguments in calls:
                        try:
                            out.append(await session.call_tool(name, arguments))
                        except MCPError as exc:
                            out.append(exc)
    return out


def test_two_clients_naming_one_label_share_its_one_budget_and_its_record(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--budget", "5") as url:
        labelled = f"{url}?session=alice&run=contest"
        first = completed(anyio.run(_official, labelled, [(tool, {"arg0": i}) for i in range(3)]))
        second = completed(
            anyio.run(
                _official,
                labelled,
                [(tool, {"arg0": i}) for i in range(3)] + [("submit", {"method": tool, "description": "d"})],
            )
        )
    assert [ran(r) for r in first + second[:3]] == [True] * 5 + [False]
    rows = _store_rows(
        db,
        "SELECT s.key, SUM(c.counted), COUNT(DISTINCT u.id) FROM sessions s JOIN runs r ON s.run_id = r.id"
        " JOIN calls c ON c.session_id = s.id LEFT JOIN submissions u ON u.session_id = s.id WHERE r.name = 'contest'"
        " GROUP BY s.id",
    )
    assert rows == [("alice", 5, 1)]


def test_a_label_bound_again_after_a_restart_keeps_the_budget_it_spent(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    query = {"session": "long-lived", "run": "restarts"}
    with memory_http_server("--db", str(db), "--budget", "4") as url:
        raw = RawSession(url, query=query)
        before = [raw.call(tool, {"arg0": i}, query=query) for i in range(3)]
        raw.close()
    with memory_http_server("--db", str(db), "--budget", "4") as url:
        raw = RawSession(url, query=query)
        after = [raw.call(tool, {"arg0": i}, query=query) for i in range(3)]
        raw.close()
    assert all(served(r) for r in before)
    assert [served(r) for r in after] == [True, False, False]
    assert after[0]["result"]["structuredContent"]["queries_used"] == 4


def test_stateless_requests_that_name_no_label_share_one_budget(tmp_path: Path) -> None:
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "3", "--stateless") as url:
        replies = []
        for i in range(5):  # a new client (and connection) for every request
            raw = RawSession(url)
            replies.append(raw.call(tool, {"arg0": i}))
            raw.close()
    assert [served(r) for r in replies] == [True, True, True, False, False]


@pytest.mark.parametrize("bad", ["has space", "x" * 200, "semi;colon", "\x1b[2J"])
def test_a_malformed_label_is_refused_with_a_clear_error(tmp_path: Path, bad: str) -> None:
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        raw = RawSession(url, query={"session": bad})
        reply = raw.call(tool, {"arg0": 1}, query={"session": bad})
        raw.close()
    assert "error" in reply and "letters" in reply["error"]["message"]


def test_the_evaluation_harness_way_of_labelling_still_records_each_episode_under_its_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with http_server("--db", str(db), "--budget", "3", "--token", TOKEN) as url:
        for attempt in (1, 2):
            labelled = f"{url}?methods={tool}&run=eval-run&session=eval-run/{B001}/{attempt}"
            results = completed(
                anyio.run(
                    _official,
                    labelled,
                    [(tool, {"arg0": i}) for i in range(4)] + [("submit", {"method": tool, "description": "d"})],
                    {"Authorization": f"Bearer {TOKEN}"},
                )
            )
            assert [ran(r) for r in results[:4]] == [True, True, True, False] and not results[4].is_error
    rows = _store_rows(
        db,
        "SELECT s.key, SUM(c.counted) FROM calls c JOIN sessions s ON c.session_id = s.id JOIN runs r"
        " ON s.run_id = r.id WHERE r.name = 'eval-run' GROUP BY s.key ORDER BY s.key",
    )
    assert rows == [(f"eval-run/{B001}/1", 3), (f"eval-run/{B001}/2", 3)]


def test_concurrent_calls_of_one_session_never_exceed_the_budget(tmp_path: Path) -> None:
    tool = tool_of(B001)

    async def main(url: str) -> list[CallToolResult]:
        async with httpx2.AsyncClient(verify=shared_context(), timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    results: list[CallToolResult] = []

                    async def one(i: int) -> None:
                        results.append(await session.call_tool(tool, {"arg0": i}))

                    with anyio.fail_after(120):
                        async with anyio.create_task_group() as group:
                            for i in range(12):
                                group.start_soon(one, i)
                    return results

    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "3") as url:
        results = anyio.run(main, url)
    assert len(results) == 12 and sum(ran(r) for r in results) == 3


def test_the_same_label_in_two_runs_names_two_sessions(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--budget", "2") as url:
        first = completed(
            anyio.run(_official, f"{url}?session=team&run=day-1", [(tool, {"arg0": i}) for i in range(2)])
        )
        second = completed(
            anyio.run(_official, f"{url}?session=team&run=day-2", [(tool, {"arg0": i}) for i in range(2)])
        )
    assert all(ran(r) for r in first + second)
    rows = _store_rows(
        db, "SELECT r.name, s.key FROM sessions s JOIN runs r ON s.run_id = r.id WHERE s.key = 'team' ORDER BY r.name"
    )
    assert rows == [("day-1", "team"), ("day-2", "team")]


def test_stateless_requests_naming_two_labels_at_once_are_refused(tmp_path: Path) -> None:
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--stateless") as url:
        raw = RawSession(url)
        both = raw.call(tool, {"arg0": 1}, query={"session": "a"}, **{"x-pau-session": "b"})
        labelled = raw.call(tool, {"arg0": 1}, query={"session": "a"}, **{"x-pau-session": "a"})
        raw.close()
    assert not served(both) and "X-PAU-Session" in both["error"]["message"]
    assert served(labelled)


def test_a_stateless_label_is_a_budget_of_its_own_that_a_restart_does_not_give_back(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--stateless", "--budget", "2", "--run", "stateless-run") as url:
        raw = RawSession(url)
        replies = [raw.call(tool, {"arg0": i}, query=None, **{"x-pau-session": name}) for i, name in enumerate("aaab")]
        raw.close()
    with memory_http_server("--db", str(db), "--stateless", "--budget", "2", "--run", "stateless-run") as url:
        raw = RawSession(url)
        after_restart = [
            raw.call(tool, {"arg0": i}, query=None, **{"x-pau-session": name}) for i, name in enumerate("abb")
        ]
        raw.close()
    assert [served(r) for r in replies] == [True, True, False, True]
    assert [served(r) for r in after_restart] == [False, True, False]
    rows = _store_rows(
        db,
        "SELECT s.key, s.transport, SUM(c.counted) FROM calls c JOIN sessions s ON c.session_id = s.id"
        " GROUP BY s.id ORDER BY s.key",
    )
    assert rows == [("a", "http", 2), ("b", "http", 2)]


@pytest.mark.parametrize("label", ["a" * (1 << 20), {"nested": "object"}, ["a", "b"]])
def test_a_meta_label_that_is_huge_or_not_text_is_refused_in_one_line_at_once(tmp_path: Path, label: object) -> None:
    tool = tool_of(B001)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "dev.pau-mcp/session": label,
    }
    headers = {
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": tool,
    }  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}, "_meta": meta}}
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--max-argument-kb", "2048") as url:
        reply = httpx2.post(
            url, json=body, headers=headers, timeout=10, verify=shared_context()
        ).json()  # the timeout: it answers at once
    message = reply["error"]["message"]
    assert "\n" not in message and len(message) < 300
    assert ("letters" in message) if isinstance(label, str) else ("must be text" in message)
