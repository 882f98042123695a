"""A long-lived server holds bounded state: what it forgets is in the run store, and forgetting it cannot be used to
cheat."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import http_server, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pau_mcp.runstore import RunStore
from pau_mcp.server import Credential, SessionRefused, Sessions
from pau_mcp.server import sessions as sessions_module
from pau_mcp.tls import shared_context


def _sessions(tmp_path: Path) -> tuple[RunStore, Sessions]:
    store = RunStore(tmp_path / "runs.db")
    run_id = store.ensure_run("serve-test", kind="serve")
    return store, Sessions(store, run_id, "http")


def test_ended_mcp_sessions_leave_no_narrowing_behind(tmp_path: Path) -> None:
    store, sessions = _sessions(tmp_path)
    for i in range(200):
        sessions.narrow(f"session-{i}", {"tool_b001"})
    assert sessions.held()[1] == 200
    for i in range(200):
        sessions.end_mcp_session(f"session-{i}")
    assert sessions.held()[1] == 0
    store.close()


def test_claimed_sessions_are_cached_up_to_a_bound_and_a_forgotten_one_keeps_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_module, "_CACHED", 5)
    store, sessions = _sessions(tmp_path)
    first = sessions.get(Credential("label", "label-0"))
    assert store.reserve_call(first.store_id, "builtin/b001", 3) == 1
    for i in range(1, 20):
        sessions.get(Credential("label", f"label-{i}"))
    assert sessions.held()[0] == 5
    again = sessions.get(Credential("label", "label-0"))
    assert again.store_id == first.store_id
    assert store.reserve_call(again.store_id, "builtin/b001", 3) == 2
    store.close()


def test_thousands_of_new_labels_and_runs_leave_the_servers_state_bounded(tmp_path: Path) -> None:
    store, sessions = _sessions(tmp_path)
    first = sessions.get(Credential("label", "agent", "run-0"))
    assert store.reserve_call(first.store_id, "builtin/b001", 3) == 1
    for i in range(sessions_module._CACHED + 1_000):
        sessions.get(Credential("label", f"label-{i}"))
    for i in range(1, sessions_module._RUNS + 1_000):
        sessions.get(Credential("label", "agent", f"run-{i}"))
    claimed, narrowed, runs = sessions.held()
    assert claimed == sessions_module._CACHED and runs == sessions_module._RUNS and narrowed == 0
    # Forgotten here, kept in the store: the run and its label come back with their budget spent so far.
    again = sessions.get(Credential("label", "agent", "run-0"))
    assert again.store_id == first.store_id
    assert store.reserve_call(again.store_id, "builtin/b001", 3) == 2
    assert len([r for r in store.runs() if r.name == "run-0"]) == 1
    store.close()


def test_a_label_a_session_token_owns_stays_refused_to_the_main_token_after_a_restart(tmp_path: Path) -> None:
    store, sessions = _sessions(tmp_path)
    sessions.get(Credential("token", "alice", "contest"))
    store.close()
    store, restarted = _sessions(tmp_path)
    with pytest.raises(SessionRefused, match="belongs to another credential"):
        restarted.get(Credential("label", "alice", "contest"))
    assert restarted.get(Credential("label", "alice", "another-run")).key == "alice"
    store.close()


def test_a_served_session_closed_by_its_client_is_forgotten_by_the_server(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    tool = tool_of("builtin/b001")

    async def one_session(url: str, i: int) -> None:
        async with httpx2.AsyncClient(verify=shared_context(), timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                        await session.call_tool("open", {"methods": [tool]})
                        await session.call_tool(tool, {"arg0": i})

    with http_server("--db", str(tmp_path / "runs.db"), "--log-file", str(log)) as url:
        for i in range(5):
            anyio.run(one_session, url, i)
            anyio.run(one_session, f"{url}?session=label-{i}", i)
        deadline = time.monotonic() + 30
        while log.read_text().count("narrowed sessions held") < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
    ended = re.findall(r"ended; (\d+) narrowed sessions held", log.read_text())
    assert len(ended) == 10 and ended[-1] == "0"
