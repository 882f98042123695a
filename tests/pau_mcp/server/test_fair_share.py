"""The sandbox's workers are shared fairly across credentials: one credential keeping its allowed calls in flight,
each running to the CPU limit, made another agent's 10 ms call wait a median of 10.9-17.8 s (issue 32)."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from conftest import ROOT, http_server, tool_of
from loadgen import HOG_CALLS

from pau_mcp.tls import shared_context

MAIN = "main-token-0123456789"
MODERN = "2026-07-28"
#: Trial division up to the square root of a Mersenne prime: runs until the CPU limit stops it.
SLOW = (tool_of("builtin/b017"), {"arg0": 2**61 - 1})
FAST = (tool_of("builtin/b001"), {"arg0": 7})


async def _timed_call(client: httpx2.AsyncClient, url: str, label: str, tool: str, arguments: dict[str, Any]) -> float:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "victim", "version": "1"},
    }  # fmt: skip
    headers = {
        "authorization": f"Bearer {MAIN}", "x-pau-session": label, "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool,
    }  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments,
                                                                          "_meta": meta}}  # fmt: skip
    started = time.perf_counter()
    reply = await client.post(url, json=body, headers=headers)
    elapsed = time.perf_counter() - started
    assert reply.json()["result"]["structuredContent"]["status"] == "ok", reply.text
    return elapsed


def _hog_seconds(db: Path) -> list[float]:
    with sqlite3.connect(db) as store:
        rows = store.execute(
            "SELECT c.duration_ms FROM calls c JOIN sessions s ON s.id = c.session_id WHERE s.key = 'hog'"
        ).fetchall()
    return [ms / 1000 for (ms,) in rows if ms]


def test_another_credentials_fast_call_does_not_wait_for_a_hog_running_calls_to_the_cpu_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    waits: list[float] = []

    async def main(url: str) -> None:
        async with httpx2.AsyncClient(verify=shared_context(), timeout=300) as client:
            await _timed_call(client, url, "victim", *FAST)  # the victim's session is claimed; workers warm
            hog = subprocess.Popen(
                [sys.executable, "-c", HOG_CALLS, url, MAIN, "hog", SLOW[0], json.dumps(SLOW[1]), "4"],
                stderr=subprocess.DEVNULL, cwd=ROOT,
            )  # fmt: skip
            try:
                with anyio.fail_after(120):
                    while len(_hog_seconds(db)) < 2:  # the hog's calls run to the CPU limit, the next ones queued
                        await anyio.sleep(0.1)
                for _ in range(12):
                    waits.append(await _timed_call(client, url, "victim", *FAST))
                    await anyio.sleep(0.15)
                assert hog.poll() is None, "the hog's load generator ended early"
            finally:
                hog.kill()
                hog.wait()

    args = ("--db", str(db), "--token", MAIN, "--budget", "0", "--timeout", "1")
    with http_server(*args) as url:
        anyio.run(main, url)
    hog_call = statistics.median(_hog_seconds(db))
    # Before: the victim's call queued behind the hog's (a median of one to several hog calls). Now it starts at
    # once in a worker reserved for a credential with nothing running: a small fraction of one hog call.
    assert statistics.median(waits) < hog_call / 5, (sorted(waits), hog_call)
