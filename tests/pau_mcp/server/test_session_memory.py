"""A long-lived HTTP server forgets the sessions that ended, and what it forgets cannot be used to cheat."""

from __future__ import annotations

import re
import time

import anyio
import httpx2
import pytest
from conftest import http_server, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pau_mcp.runstore import RunStore
from pau_mcp.server import Identity, SessionRefused, Sessions


def _sessions(tmp_path) -> tuple[RunStore, Sessions]:
    store = RunStore(tmp_path / "runs.db")
    run_id = store.ensure_run("serve-test", kind="serve")
    return store, Sessions(store, run_id, "http", tools={"builtin/b001": "tool_b001"})


def test_ended_mcp_sessions_leave_no_state_behind(tmp_path):
    store, sessions = _sessions(tmp_path)
    for i in range(200):
        sessions.get(Identity("mcp", f"session-{i}"), label=f"label-{i}" if i % 2 else None)
    assert sessions.open_count() == 200
    for i in range(200):
        sessions.end_mcp_session(f"session-{i}")
    assert sessions.open_count() == 0
    store.close()


def test_an_ended_sessions_label_stays_its_own(tmp_path):
    store, sessions = _sessions(tmp_path)
    sessions.get(Identity("mcp", "alice-session"), label="alice")
    sessions.get(Identity("mcp", "bob-session"))
    sessions.end_mcp_session("alice-session")
    sessions.end_mcp_session("bob-session")
    with pytest.raises(SessionRefused, match="another session"):
        sessions.get(Identity("mcp", "thief-session"), label="alice")
    with pytest.raises(SessionRefused, match="another session"):
        sessions.get(Identity("mcp", "thief-session-2"), label="bob-session")
    store.close()


def test_a_session_still_open_keeps_its_budget_when_others_end(tmp_path):
    store, sessions = _sessions(tmp_path)
    state = sessions.get(Identity("mcp", "open"))
    state.used["tool_b001"] = 3
    sessions.get(Identity("mcp", "other"))
    sessions.end_mcp_session("other")
    assert sessions.get(Identity("mcp", "open")) is state
    assert sessions.open_count() == 1
    store.close()


def test_a_served_session_closed_by_its_client_is_forgotten_by_the_server(tmp_path):
    log = tmp_path / "serve.log"
    tool = tool_of("builtin/b001")

    async def one_session(url: str, i: int) -> None:
        async with httpx2.AsyncClient(timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                        await session.call_tool(tool, {"arg0": i})

    with http_server("--db", str(tmp_path / "runs.db"), "--log-file", str(log)) as url:
        for i in range(5):
            anyio.run(one_session, url, i)
            anyio.run(one_session, f"{url}?session=label-{i}", i)
        deadline = time.monotonic() + 30
        while log.read_text().count("session states held") < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
    ended = re.findall(r"ended; (\d+) session states held", log.read_text())
    assert len(ended) == 10 and ended[-1] == "0"
