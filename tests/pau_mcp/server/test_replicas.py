"""Replicas: several `pau-mcp serve --transport http` processes sharing one run store behind a plain round-robin
proxy, each request answered by whichever replica the proxy picks. Budgets, submissions and records are the
store's, so the replicas answer as one server: with 24 concurrent calls on a budget of 10, exactly 10 run, and a
replica killed mid-run loses no call that counted.

Each test runs twice: on one SQLite file all the processes open, and on a PostgreSQL database of the test's own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import TEST_KEY, ran, tool_of
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from mcp_types.version import LATEST_MODERN_VERSION
from replicas import Replica, RoundRobin, replicas

from pau_mcp.runstore import RunStore
from pau_mcp.server import TokenSigner
from pau_mcp.tls import shared_context

B001 = "builtin/b001"
MAIN = "main-token-0123456789"
#: A call's argument and its result, or the exception the client raised.
Attempt = tuple[int, CallToolResult | Exception]


@pytest.fixture
def shared_store(store_at: Callable[[str], Path | str]) -> str:
    """The run store every replica of a test opens (``--db``): a SQLite file, then a PostgreSQL database."""
    return str(store_at("replicas"))


def _args(store: str, budget: int) -> list[str]:
    return ["--db", store, "--token", MAIN, "--budget", str(budget), "--methods", B001, "--workers", "1",
            "--run", "replicas-server"]  # fmt: skip


def _spent(store: str, label: str, run: str) -> tuple[int, int, set[str]]:
    """What the store holds for a session: queries taken, counted calls recorded, and their arguments."""
    opened = RunStore(store)
    try:
        record = opened.export_session(run, label)
        assert record is not None, f"no session {label!r} in run {run!r}"
        session = opened.ensure_session(opened.run_id(run), label, "http")  # the existing row's id
        calls = [c for c in record.calls if c["counted"]]
        return opened.budget_spent(session, B001)[0], len(calls), {c["arguments"] for c in calls}
    finally:
        opened.close()


def _client(url: str, http: httpx2.AsyncClient) -> Client:
    return Client(streamable_http_client(url, http_client=http), mode=LATEST_MODERN_VERSION, cache=None)


def test_three_replicas_behind_a_round_robin_proxy_run_exactly_the_budget_of_24_concurrent_calls(
    shared_store: str,
) -> None:
    token = TokenSigner(TEST_KEY).issue("agent", run="replicas")
    tool = tool_of(B001)

    async def main(backends: list[str]) -> tuple[list[CallToolResult], dict[str, int]]:
        async with RoundRobin(backends) as proxy:
            async with httpx2.AsyncClient(
                verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as http:
                async with _client(proxy.url, http) as client:
                    results: list[CallToolResult] = []

                    async def one(i: int) -> None:
                        results.append(await client.call_tool(tool, {"arg0": i}))

                    with anyio.fail_after(240):
                        async with anyio.create_task_group() as group:
                            for i in range(24):
                                group.start_soon(one, i)
            return results, dict(proxy.served)

    with replicas(3, _args(shared_store, 10)) as started:
        results, served = anyio.run(main, [r.url for r in started])
    assert len(results) == 24
    assert sorted(r.structured_content["queries_used"] for r in results if ran(r)) == list(range(1, 11))
    assert all(r.structured_content["status"] == "over_budget" for r in results if not ran(r))
    assert len(served) == 3  # every replica answered some of them
    used, counted, _ = _spent(shared_store, "agent", "replicas")
    assert (used, counted) == (10, 10)


def test_a_replica_killed_mid_run_loses_no_call_that_counted(shared_store: str) -> None:
    token = TokenSigner(TEST_KEY).issue("survivor", run="replicas")
    tool = tool_of(B001)

    async def main(started: list[Replica]) -> tuple[list[Attempt], int, list[CallToolResult]]:
        outcomes: list[Attempt] = []
        async with RoundRobin([r.url for r in started]) as proxy:
            async with httpx2.AsyncClient(
                verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as http:
                async with _client(proxy.url, http) as client:

                    async def one(i: int) -> None:
                        try:
                            outcomes.append((i, await client.call_tool(tool, {"arg0": i})))
                        except Exception as exc:  # noqa: BLE001 - a request in flight on the killed replica
                            outcomes.append((i, exc))

                    with anyio.fail_after(240):
                        async with anyio.create_task_group() as group:
                            for i in range(12):
                                group.start_soon(one, i)
                            while sum(proxy.served.values()) < 3:
                                await anyio.sleep(0.01)
                            await anyio.to_thread.run_sync(started[0].kill)
                        # The survivors serve the rest of the budget, and no more.
                        after: list[CallToolResult] = []
                        for i in range(100, 120):
                            after.append(await client.call_tool(tool, {"arg0": i}))
                            if not ran(after[-1]):
                                break
                        failed = sum(isinstance(o, Exception) for _, o in outcomes)
            return outcomes, failed, after

    with replicas(3, _args(shared_store, 10)) as started:
        outcomes, failed, after = anyio.run(main, started)
    answered = {f"({i},)" for i, o in outcomes if not isinstance(o, Exception) and ran(o)}
    answered |= {f"({100 + n},)" for n, o in enumerate(after) if ran(o)}
    used, counted, recorded = _spent(shared_store, "survivor", "replicas")
    assert answered <= recorded  # every answer an agent saw as run is in the store
    assert used == 10 and counted <= 10  # the budget held, and was served in full by the survivors
    assert used - counted <= failed  # a query without a record is one whose reply never came
    assert after[-1].structured_content["status"] == "over_budget"
