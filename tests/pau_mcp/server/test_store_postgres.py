"""`pau-mcp serve` on a PostgreSQL run store, end to end: a real server process records an agent's call and
submission in the test session's PostgreSQL server, and `runs list/show/export` and `report` read them back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import httpx2
from conftest import ROOT, http_server, ran, tool_of
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pau_command import Ran, run_pau
from postgres_server import PostgresServer

from pau_mcp.tls import shared_context

TOKEN = "test-token-0123456789"


async def _explore_and_submit(url: str, tool: str) -> tuple[bool, str]:
    async with httpx2.AsyncClient(
        verify=shared_context(), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    ) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                called = await session.call_tool(tool, {"arg0": 23})
                submitted = await session.call_tool("submit", {"method": tool, "description": "product of digits"})
                return ran(called), submitted.structured_content["status"]


def test_a_server_on_postgresql_records_what_runs_and_report_then_read(postgres_url: str, tmp_path: Path) -> None:
    tool = tool_of("builtin/b001")
    with http_server("--db", postgres_url, "--run", "on-postgres", "--token", TOKEN, "--budget", "5") as url:
        answered, status = anyio.run(_explore_and_submit, url, tool)
    assert answered and status == "recorded"

    def pau(*args: str) -> Ran:  # the store named by the variable, as a deployment's environment would
        done = run_pau(*args, env={**os.environ, "PAU_MCP_DB": postgres_url}, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return done

    [listed] = [json.loads(line) for line in pau("runs", "list", "--json").stdout.splitlines()]
    assert (listed["name"], listed["calls"], listed["submissions"]) == ("on-postgres", 1, 1)
    shown = json.loads(pau("runs", "show", "on-postgres", "--json").stdout)
    assert [(c["arguments"], c["value"], c["counted"]) for c in shown["calls"]] == [("(23,)", "6", 1)]
    assert shown["submissions"][0]["description"] == "product of digits"
    out = tmp_path / "predictions.jsonl"
    pau("runs", "export", "on-postgres", "-o", str(out))
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["id"], record["num_queries"], record["all_examples"]) == ("builtin/b001", 1, [["(23,)", "6"]])
    reported = pau("report", "on-postgres", "--db", postgres_url)
    assert "on-postgres" in reported.stdout


def test_a_postgresql_store_that_cannot_be_reached_ends_a_command_with_one_line(postgres: PostgresServer) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run_pau("runs", "list", "--db", f"postgresql://pau@127.0.0.1:{port}/runs", env=dict(os.environ), cwd=ROOT)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: cannot use the run store postgresql://pau@127.0.0.1:{port}/runs: ")
    assert "check that PostgreSQL runs there" in line
