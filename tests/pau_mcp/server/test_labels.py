"""Session and run labels (`?session=NAME&run=RUN`, `X-PAU-Session`) name a session; they never pick a budget.

Each test plays a hostile client with its own HTTP client (``RawSession``) or a second official client, against the
app `pau-mcp serve --transport http` serves, run in this process (``memory_http_server``); the evaluation harness's
way of labelling is checked against a real process too.
"""

from __future__ import annotations

import sqlite3

import anyio
import httpx2
import pytest
from conftest import RawSession, http_server, memory_http_server, ran, served, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

B001 = "builtin/b001"
TOKEN = "main-token-0123456789"


def _store_rows(db, sql: str, params: tuple = ()) -> list[tuple]:
    return sqlite3.connect(db).execute(sql, params).fetchall()


def test_changing_the_session_label_on_every_call_never_resets_the_budget(tmp_path):
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "20") as url:
        raw = RawSession(url, query={"session": "label-0"})
        replies = [raw.call(tool, {"arg0": i}, query={"session": f"label-{i}"}) for i in range(30)]
        raw.close()
    assert sum(served(r) for r in replies) <= 20
    refused = [r for r in replies if not served(r)]
    assert refused and "label" in str(refused[0]).lower()


def test_changing_the_run_label_within_a_session_is_refused(tmp_path):
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "2") as url:
        raw = RawSession(url, query={"session": "s", "run": "r1"})
        first = raw.call(tool, {"arg0": 1}, query={"session": "s", "run": "r1"})
        switched = [raw.call(tool, {"arg0": i}, query={"session": "s", "run": f"r{i}"}) for i in range(2, 6)]
        dropped = raw.call(tool, {"arg0": 9})
        raw.close()
    assert served(first)
    assert not any(served(r) for r in switched) and not served(dropped)
    assert "error" in switched[0] and "run" in switched[0]["error"]["message"]


async def _official(url: str, calls: list[tuple[str, dict]], headers: dict | None = None) -> list:
    """One official client session doing ``calls`` in order; each result or the MCPError it raised."""
    out: list = []
    async with httpx2.AsyncClient(headers=headers or {}, timeout=60) as client:
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


def test_a_second_client_cannot_spend_or_submit_under_another_clients_label(tmp_path):
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--budget", "5") as url:
        labelled = f"{url}?session=alice&run=contest"
        owner = anyio.run(_official, labelled, [(tool, {"arg0": i}) for i in range(3)])
        thief = anyio.run(
            _official,
            labelled,
            [(tool, {"arg0": 7}), ("submit", {"method": tool, "description": "planted by someone else"})],
        )
        owner_again = anyio.run(_official, labelled, [(tool, {"arg0": 4})])
    assert all(ran(r) for r in owner)
    assert all(isinstance(r, MCPError) for r in thief), thief
    assert "another" in str(thief[0]) and "alice" in str(thief[0])
    assert isinstance(owner_again[0], MCPError)  # a new MCP session of the same client is another session too
    rows = _store_rows(
        db,
        "SELECT COUNT(*) FROM calls c JOIN sessions s ON c.session_id = s.id JOIN runs r ON s.run_id = r.id"
        " WHERE r.name = 'contest' AND s.key = 'alice'",
    )
    assert rows == [(3,)]
    assert _store_rows(db, "SELECT COUNT(*) FROM submissions") == [(0,)]


def test_the_mcp_session_id_of_another_client_is_not_a_label(tmp_path):
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--budget", "3") as url:
        victim = RawSession(url)
        assert served(victim.call(tool, {"arg0": 1}))
        thief = RawSession(url, query={"session": victim.headers["mcp-session-id"]})
        stolen = thief.call(tool, {"arg0": 2}, query={"session": victim.headers["mcp-session-id"]})
        victim.close()
        thief.close()
    assert not served(stolen)


def test_a_label_bound_again_after_a_restart_keeps_the_budget_it_spent(tmp_path):
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


def test_stateless_labels_never_reset_the_shared_budget(tmp_path):
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--budget", "3", "--stateless") as url:
        raw = RawSession(url)
        replies = [raw.call(tool, {"arg0": i}, **{"x-pau-session": f"fresh-{i}"}) for i in range(8)]
        plain = raw.call(tool, {"arg0": 1})
        raw.close()
    assert sum(served(r) for r in replies) == 3 and not served(plain)


@pytest.mark.parametrize("bad", ["has space", "x" * 200, "semi;colon", "\x1b[2J"])
def test_a_malformed_label_is_refused_with_a_clear_error(tmp_path, bad):
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db")) as url:
        raw = RawSession(url, query={"session": bad})
        reply = raw.call(tool, {"arg0": 1}, query={"session": bad})
        raw.close()
    assert "error" in reply and "letters" in reply["error"]["message"]


def test_the_evaluation_harness_way_of_labelling_still_records_each_episode_under_its_run(tmp_path):
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with http_server("--db", str(db), "--budget", "3", "--token", TOKEN) as url:
        for attempt in (1, 2):
            labelled = f"{url}?methods={tool}&run=eval-run&session=eval-run/{B001}/{attempt}"
            results = anyio.run(
                _official,
                labelled,
                [(tool, {"arg0": i}) for i in range(4)] + [("submit", {"method": tool, "description": "d"})],
                {"Authorization": f"Bearer {TOKEN}"},
            )
            assert [ran(r) for r in results[:4]] == [True, True, True, False] and not results[4].is_error
    rows = _store_rows(
        db,
        "SELECT s.key, SUM(c.counted) FROM calls c JOIN sessions s ON c.session_id = s.id JOIN runs r"
        " ON s.run_id = r.id WHERE r.name = 'eval-run' GROUP BY s.key ORDER BY s.key",
    )
    assert rows == [(f"eval-run/{B001}/1", 3), (f"eval-run/{B001}/2", 3)]


def test_concurrent_calls_of_one_session_never_exceed_the_budget(tmp_path):
    tool = tool_of(B001)

    async def main(url: str) -> list:
        async with httpx2.AsyncClient(timeout=60) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    results: list = []

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


def test_the_same_label_in_two_runs_names_two_sessions(tmp_path):
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--budget", "2") as url:
        first = anyio.run(_official, f"{url}?session=team&run=day-1", [(tool, {"arg0": i}) for i in range(2)])
        second = anyio.run(_official, f"{url}?session=team&run=day-2", [(tool, {"arg0": i}) for i in range(2)])
    assert all(ran(r) for r in first + second)
    rows = _store_rows(
        db, "SELECT r.name, s.key FROM sessions s JOIN runs r ON s.run_id = r.id WHERE s.key = 'team' ORDER BY r.name"
    )
    assert rows == [("day-1", "team"), ("day-2", "team")]


def test_stateless_requests_naming_two_labels_at_once_are_refused(tmp_path):
    tool = tool_of(B001)
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--stateless") as url:
        raw = RawSession(url)
        both = raw.call(tool, {"arg0": 1}, query={"session": "a"}, **{"x-pau-session": "b"})
        labelled = raw.call(tool, {"arg0": 1}, query={"session": "a"}, **{"x-pau-session": "a"})
        raw.close()
    assert not served(both) and "X-PAU-Session" in both["error"]["message"]
    assert served(labelled)


def test_a_stateless_label_records_the_calls_under_it_but_spends_the_shared_budget(tmp_path):
    db = tmp_path / "runs.db"
    tool = tool_of(B001)
    with memory_http_server("--db", str(db), "--stateless", "--budget", "3", "--run", "stateless-run") as url:
        raw = RawSession(url)
        replies = [raw.call(tool, {"arg0": i}, **{"x-pau-session": name}) for i, name in enumerate("aabbc")]
        raw.close()
    with memory_http_server("--db", str(db), "--stateless", "--budget", "3", "--run", "stateless-run") as url:
        raw = RawSession(url)
        after_restart = raw.call(tool, {"arg0": 1}, **{"x-pau-session": "d"})
        raw.close()
    assert [served(r) for r in replies] == [True, True, True, False, False]
    assert not served(after_restart)
    rows = _store_rows(
        db,
        "SELECT s.key, s.transport, SUM(c.counted) FROM calls c JOIN sessions s ON c.session_id = s.id"
        " GROUP BY s.id ORDER BY s.key",
    )
    assert rows == [
        ("a", "http-stateless", 2),
        ("b", "http-stateless", 1),
        ("c", "http-stateless", 0),
        ("d", "http-stateless", 0),
    ]
