"""Nothing waits on the run store's lock on the event loop: while another process holds the store's write lock,
every other agent's requests that do not need the store are answered at once (issue 32: a lock held for 15 s made
another agent's ping take 14 s, on SQLite and on PostgreSQL, because ``StoreBudget.reserve`` ran on the loop)."""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import ModernSession, http_server, memory_http_server, memory_session, text_of, tool_of
from keyserver import RESOURCE, key_server
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pau_mcp import _databases
from pau_mcp.runstore import RunStore, StoreBusy
from pau_mcp.server.loopstore import LoopStore
from pau_mcp.tls import shared_context

B001 = tool_of("builtin/b001")
MAIN = "main-token-0123456789"
#: How long the test holds the lock: the pings before this fix each waited for (about) all of it.
HELD_S = 6.0


def _assert_not_held_up(pings: list[float], usual: float) -> None:
    """The pings answered while the lock was held, compared with the same pings before it (``usual``, their median)
    and with the hold, not with seconds: a busy machine stretches every ping alike, while a ping held up by the lock
    waits (about) all of it, a thousand times the usual."""
    assert len(pings) >= 5, pings
    assert statistics.median(pings) < 20 * usual, (usual, sorted(pings))
    assert max(pings) < HELD_S / 3, (usual, sorted(pings))


def _usual(request: Callable[[], object]) -> float:
    """The median time of five of these requests, a tenth of a second apart."""
    times = []
    for _ in range(5):
        began = time.perf_counter()
        request()
        times.append(time.perf_counter() - began)
        time.sleep(0.1)
    return statistics.median(times)


async def _ausual(ping: Callable[[], Awaitable[object]]) -> float:
    """``_usual`` for an async request."""
    times = []
    for _ in range(5):
        began = time.perf_counter()
        await ping()
        times.append(time.perf_counter() - began)
        await anyio.sleep(0.1)
    return statistics.median(times)


@contextlib.contextmanager
def store_write_lock(store: Path | str) -> Iterator[None]:
    """Hold the run store's write lock from this process, as another replica or a stuck writer would."""
    if isinstance(store, Path):
        holder = sqlite3.connect(store, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    import psycopg

    with psycopg.connect(store, autocommit=True) as pg_holder:
        pg_holder.execute(f"BEGIN; SELECT pg_advisory_xact_lock({_databases._WRITE_LOCK})")
        try:
            yield
        finally:
            pg_holder.execute("ROLLBACK")


def _client(label: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        verify=shared_context(), headers={"Authorization": f"Bearer {MAIN}", "X-PAU-Session": label}, timeout=120
    )


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_held_store_lock_does_not_hold_up_another_agents_ping(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store: Path | str = tmp_path / "runs.db" if database == "sqlite" else str(request.getfixturevalue("postgres_url"))
    pings: list[float] = []
    answered: list[bool] = []
    usual = 0.0

    async def main(url: str) -> None:
        nonlocal pings, answered, usual
        pings, answered, usual = await _pings_held_then_released(url, store)

    with http_server("--db", str(store), "--token", MAIN, "--budget", "0", "--run", "locked") as url:
        anyio.run(main, url)
    # Before: each ping waited behind the calls blocked on the lock (about the whole hold, 5-6 s).
    _assert_not_held_up(pings, usual)
    # And the calls that waited for the store ran once it was let go, none lost.
    assert answered == [True] * 5, answered


async def _pings_held_then_released(url: str, store: Path | str) -> tuple[list[float], list[bool], float]:
    pings: list[float] = []
    answered: list[bool] = []
    async with (
        _client("pinger") as pinger_http,
        streamable_http_client(url, http_client=pinger_http) as (read, write, *_),
        ClientSession(read, write) as pinger,
        _client("busy") as busy_http,
        streamable_http_client(url, http_client=busy_http) as (busy_read, busy_write, *_),
        ClientSession(busy_read, busy_write) as busy,
        _client("newcomer") as new_http,
        streamable_http_client(url, http_client=new_http) as (new_read, new_write, *_),
        ClientSession(new_read, new_write) as newcomer,
    ):
        for session in (pinger, busy, newcomer):
            await session.initialize()
        usual = await _ausual(pinger.send_ping)
        await busy.call_tool(B001, {"arg0": 11})  # its session is claimed: its calls now need only their budget

        async def call(session: ClientSession, value: int) -> None:
            with anyio.fail_after(120):
                result = await session.call_tool(B001, {"arg0": value})
            answered.append((result.structured_content or {}).get("status") == "ok")

        async with anyio.create_task_group() as group:
            with store_write_lock(store):
                for value in range(4):
                    group.start_soon(call, busy, 20 + value)
                group.start_soon(call, newcomer, 30)  # a first call: its session must be claimed in the store too
                await anyio.sleep(0.5)  # every call waits for the lock now
                started = time.monotonic()
                while time.monotonic() - started < HELD_S - 1:
                    began = time.perf_counter()
                    with anyio.fail_after(HELD_S + 30):
                        await pinger.send_ping()
                    pings.append(time.perf_counter() - began)
                    await anyio.sleep(0.1)
            # Let go: the waiting calls go on, and the task group waits for their answers.
    return pings, answered, usual


#: How long the ticker test holds the lock.
TICKER_HOLD_S = 3.0


def test_a_store_operation_that_finds_the_lock_held_waits_in_a_thread_and_the_loop_runs_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = RunStore(db)
    run = store.ensure_run("r", kind="serve")
    session = store.claim_session(run, "agent", "label", "http", None)
    assert session is not None
    loop_store = LoopStore(store)
    ticks: list[float] = []

    async def main() -> int | None:
        async def tick() -> None:
            while True:
                ticks.append(time.perf_counter())
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            reserved: list[int | None] = []

            async def reserve() -> None:
                reserved.append(await loop_store.run(store.reserve_call, session, "builtin/b001", 5))

            with store_write_lock(db):
                group.start_soon(reserve)  # it waits for the lock in a thread while the ticker runs on
                await anyio.sleep(TICKER_HOLD_S)
                assert not reserved  # still waiting for the lock
            with anyio.fail_after(30):
                while not reserved:
                    await anyio.sleep(0.01)
            group.cancel_scope.cancel()
        return reserved[0]

    assert anyio.run(main) == 1
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    # The loop never stopped for the lock: a ratio to the hold, not seconds (a busy machine delays a tick, not by half
    # of three seconds; a loop waiting for the lock would stop for all of it).
    assert max(gaps) < TICKER_HOLD_S / 2, max(gaps)
    store.close()


def test_a_store_locked_past_its_busy_timeout_answers_a_call_with_a_retryable_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The busy timeout is 30 s; here 0.5 s, so the lock outlasts it.
    monkeypatch.setattr(_databases, "_BUSY_S", 0.5)
    db = tmp_path / "runs.db"

    async def main() -> tuple[str, bool, str]:
        async with memory_session("--db", str(db), "--budget", "3") as session:
            await session.call_tool(B001, {"arg0": 11})
            with store_write_lock(db):
                locked = await session.call_tool(B001, {"arg0": 12})
            after = await session.call_tool(B001, {"arg0": 13})
            text = text_of(locked.content[0])
            return text, bool(locked.is_error), after.structured_content["status"]

    text, is_error, after = anyio.run(main)
    assert is_error and "busy" in text and "send it again" in text and str(db) not in text
    assert after == "ok"
    store = RunStore(db)
    try:
        with pytest.raises(StoreBusy), store_write_lock(db):
            store.reserve_call(1, "builtin/b001", 3)
    finally:
        store.close()


def test_an_over_budget_flood_on_a_store_other_writers_keep_locking_leaves_another_agents_ping_fast(
    tmp_path: Path,
) -> None:
    # Issue 32: three replicas flooding one SQLite file with over-budget calls raised another agent's ping from 2 ms
    # to a median of 398 ms: each refused call reserved and recorded on the event loop, and slept there in SQLite's
    # busy handler while another replica held the file's lock. Here the other writer takes the lock over and over
    # (0.4 s held, 20 ms free), so what is measured is the waiting, not three servers' CPU: before, one ping in 4 s
    # got through (9.8 s); now a median of about 20 ms.
    db = tmp_path / "runs.db"
    stop = threading.Event()
    refused: list[str] = []
    usual: list[float] = []

    def other_writer() -> None:
        holder = sqlite3.connect(db, isolation_level=None, timeout=60)
        while not stop.is_set():
            holder.execute("BEGIN IMMEDIATE")
            stop.wait(0.4)
            holder.execute("ROLLBACK")
            stop.wait(0.02)
        holder.close()

    async def flood(client: httpx2.AsyncClient, url: str, done: anyio.Event) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "flood", "version": "1"},
        }  # fmt: skip
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": B001, "arguments": {"arg0": 12}, "_meta": meta}}  # fmt: skip
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                   "mcp-method": "tools/call", "mcp-name": B001}  # fmt: skip
        while not done.is_set():
            reply = await client.post(url, json=body, headers=headers)
            refused.append(reply.json()["result"]["structuredContent"]["status"])

    async def main(url: str) -> list[float]:
        async with (
            _client("pinger") as http,
            streamable_http_client(url, http_client=http) as (read, write, *_),
            ClientSession(read, write) as pinger,
            _client("flood") as flood_http,
        ):
            await pinger.initialize()
            usual.append(await _ausual(pinger.send_ping))
            # The flood's first call spends its budget of 1: every later one is refused, and recorded.
            await flood_http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": B001, "arguments": {"arg0": 11}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "flood", "version": "1"}}}},
                headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                         "mcp-method": "tools/call", "mcp-name": B001})  # fmt: skip
            writer = threading.Thread(target=other_writer, daemon=True)
            writer.start()
            done = anyio.Event()
            pings: list[float] = []
            try:
                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        group.start_soon(flood, flood_http, url, done)
                    await anyio.sleep(1.5)
                    ends = time.monotonic() + 4
                    while time.monotonic() < ends:
                        began = time.perf_counter()
                        with anyio.fail_after(60):
                            await pinger.send_ping()
                        pings.append(time.perf_counter() - began)
                        await anyio.sleep(0.1)
                    done.set()
            finally:
                stop.set()
                writer.join(timeout=30)
            return pings

    with http_server("--db", str(db), "--token", MAIN, "--budget", "1", "--run", "flooded") as url:
        pings = anyio.run(main, url)
    assert refused and set(refused) == {"over_budget"}  # the flood's calls were answered, between the locks
    # A ratio to the same pings before the flood, not seconds, which a busy machine stretches: the flood costs the
    # loop some of its time (a median ten times an idle server's ping), the lock cost it all (one ping in 4 s).
    assert len(pings) >= 5, pings
    assert statistics.median(pings) < 50 * usual[0], (usual, sorted(pings))


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_held_store_lock_does_not_hold_up_a_ping_beside_fixture_calls_and_tasks(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The Tasks board and the fixture calls wrote and read the run store on the event loop: a fixture call's record
    # waited there for another writer's lock (on SQLite one ping took 29.6 s: the record waited out the busy timeout),
    # as did a new task, and a running task's watcher read the store every half second behind a reservation waiting
    # for the lock in a thread.
    db: Path | str = tmp_path / "runs.db" if database == "sqlite" else str(request.getfixturevalue("postgres_url"))
    args = ("--suite", "conformance", "--db", str(db), "--token", MAIN, "--run", "locked")
    with memory_http_server(*args) as url:
        sessions = {
            label: ModernSession(url, tasks=True, headers={"authorization": f"Bearer {MAIN}", "x-pau-session": label})
            for label in ("pinger", "recorder", "owner")
        }
        pinger, recorder, owner = sessions.values()
        try:
            pinger.request("server/discover", {})  # the 2026-07-28 era has no ping
            recorder.request("tools/call", {"name": "test_simple_text", "arguments": {}})
            running = owner.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
            assert running["resultType"] == "task"
            answered: list[str] = []

            def recorded_call() -> None:
                result = recorder.request("tools/call", {"name": "test_simple_text", "arguments": {}})
                answered.append(result["content"][0]["type"])

            def task_work() -> None:
                answered.append(owner.request("tasks/get", {"taskId": running["taskId"]})["status"])
                answered.append(owner.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})[
                    "resultType"])  # fmt: skip

            usual = _usual(lambda: pinger.request("server/discover", {}))
            pings: list[float] = []
            with store_write_lock(db):
                workers = [threading.Thread(target=work, daemon=True) for work in (recorded_call, task_work)]
                for worker in workers:
                    worker.start()
                time.sleep(0.5)  # each of them waits for the lock now
                started = time.monotonic()
                while time.monotonic() - started < HELD_S - 1:
                    began = time.perf_counter()
                    pinger.request("server/discover", {})
                    pings.append(time.perf_counter() - began)
                    time.sleep(0.1)
            for worker in workers:
                worker.join(timeout=60)
        finally:
            for session in sessions.values():
                session.close()
    _assert_not_held_up(pings, usual)
    # Once the lock was let go, each request that needed the store was answered.
    assert sorted(answered) == ["task", "text", "working"], answered


def test_a_held_store_lock_does_not_hold_up_a_signed_in_subjects_requests_beside_new_subjects(tmp_path: Path) -> None:
    # `serve --auth oauth`: each subject's first request claims its session in the store, and its calls reserve its
    # budget there. While another writer holds the lock, newcomers and calls wait off the loop; a subject already
    # signed in is answered at once.
    db = tmp_path / "runs.db"
    with key_server() as issuer:
        args = ("--auth", "oauth", "--issuer", issuer.issuer, "--resource", RESOURCE, "--db", str(db),
                "--methods", "builtin/b001", "--budget", "0", "--run", "locked")  # fmt: skip

        def client(subject: str) -> ModernSession:
            return ModernSession(url, headers={"authorization": f"Bearer {issuer.token(sub=subject)}"})

        with memory_http_server(*args) as url:
            pinger, caller = client("pinger"), client("caller")
            newcomers = [client(f"newcomer-{n}") for n in range(3)]
            answered: list[bool] = []
            try:
                pinger.request("tools/list", {})
                caller.request("tools/call", {"name": B001, "arguments": {"arg0": 11}})

                def call(session: ModernSession, value: int) -> None:
                    result = session.request("tools/call", {"name": B001, "arguments": {"arg0": value}})
                    answered.append(result["structuredContent"]["status"] == "ok")

                usual = _usual(lambda: pinger.request("tools/list", {}))
                pings: list[float] = []
                with store_write_lock(db):
                    workers = [threading.Thread(target=call, args=(caller, 20), daemon=True)] + [
                        threading.Thread(target=call, args=(session, 30 + n), daemon=True)
                        for n, session in enumerate(newcomers)
                    ]
                    for worker in workers:
                        worker.start()
                    time.sleep(0.5)  # each waits for the lock now
                    started = time.monotonic()
                    while time.monotonic() - started < HELD_S - 1:
                        began = time.perf_counter()
                        pinger.request("tools/list", {})
                        pings.append(time.perf_counter() - began)
                        time.sleep(0.1)
                for worker in workers:
                    worker.join(timeout=60)
            finally:
                for session in (pinger, caller, *newcomers):
                    session.close()
    _assert_not_held_up(pings, usual)
    assert answered == [True] * 4, answered
