"""What another agent waits while one party takes a shared resource (issue 32), on real `pau-mcp serve` processes.

Scenarios (``--scenario``, repeatable; default all):

* ``hog``: one credential keeps 4 calls in flight, each running to the CPU limit (``--timeout 1``); another
  credential's 10 ms call, 12 times: its median and maximum round trip.
* ``feedback``: with ``--feedback score``, one credential keeps 4 submits of code that spins on every test input
  in flight; another credential's feedback submit of correct code, 3 times.
* ``lock``: another process holds the SQLite run store's write lock for 6 s while one agent's calls and a new
  agent's first call wait for it; a third agent's ping every 0.1 s meanwhile.
* ``replicas``: three replicas on one SQLite file; one credential, its budget spent, floods them with calls (each
  refused as over budget, each written to the store); another agent's ping on the first replica, before and during.
* ``writer``: the same flood on one server, while another writer takes the store's lock over and over (0.4 s held,
  20 ms free), as replicas flooding one file do: the waiting alone, without three servers' CPU.
* ``pipelining``: 200 connections each write 400 requests with no credential and never read; an open session's
  ping during and after, and the server's CPU for the flood.

With ``--baseline REF`` each scenario runs against the server as of git commit REF too, one after the other, so
both see the same machine; the table gives both.

Usage: python benchmarks/contention.py [--scenario hog ...] [--baseline REF] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _markdown import write_section  # noqa: E402
from loadgen import HOG_CALLS, PIPELINE_FLOOD  # noqa: E402
from mcp_server import _baseline_tree  # noqa: E402

from pau_mcp.manifests import ManifestStore, tool_name  # noqa: E402

KEY = "benchmark-deployment-key-0123456789"
TOKEN = "benchmark-main-token-0123"
SLOW = ("builtin/b017", {"arg0": 2**61 - 1})  # trial division: runs to the CPU limit
FAST = ("builtin/b001", {"arg0": 7})
SPIN = "def test_func(arg0):\n    while True:\n        pass\n"
MODERN = "2026-07-28"


@contextlib.contextmanager
def _server(tree: Path, args: list[str]) -> Iterator[tuple[str, int]]:
    """`pau-mcp serve --transport http` from the sources in ``tree``; yields its URL and process id."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--tool-key", KEY,
         "--token", TOKEN, *args],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    try:
        stderr = process.stderr
        assert stderr is not None
        for line in stderr:
            found = re.search(r"serving at (http://\S+)", line)
            if found:
                threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
                yield found.group(1), process.pid
                return
        raise SystemExit("a server did not start")
    finally:
        process.terminate()
        process.wait(timeout=30)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _headers(label: str, method: str, tool: str | None = None) -> dict[str, str]:
    headers = {
        "authorization": f"Bearer {TOKEN}", "x-pau-session": label, "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN, "mcp-method": method,
    }  # fmt: skip
    if tool:
        headers["mcp-name"] = tool
    return headers


def _meta() -> dict[str, object]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "benchmark", "version": "1"},
    }  # fmt: skip


async def _tool_call(
    client: httpx2.AsyncClient, url: str, label: str, tool: str, arguments: Mapping[str, object]
) -> float:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": _meta()}}  # fmt: skip
    started = time.perf_counter()
    await client.post(url, json=body, headers=_headers(label, "tools/call", tool))
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def _pinger(url: str, label: str) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {TOKEN}", "x-pau-session": label}
    async with httpx2.AsyncClient(headers=headers, timeout=600) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.send_ping()
                yield session


async def _timed_pings(session: ClientSession, seconds: float, every: float = 0.1) -> list[float]:
    times = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        started = time.perf_counter()
        with anyio.fail_after(600):
            await session.send_ping()
        times.append(time.perf_counter() - started)
        await anyio.sleep(every)
    return times


def _figures(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s, max {max(values):.3f} s (n={len(values)})"


# -- the scenarios -------------------------------------------------------------------------------------------------


def hog(tree: Path, tmp: Path) -> str:
    async def main(url: str) -> list[float]:
        async with httpx2.AsyncClient(timeout=600) as client:
            fast = tool_name(KEY, FAST[0])
            await _tool_call(client, url, "victim", fast, FAST[1])
            load = subprocess.Popen(
                [sys.executable, "-c", HOG_CALLS, url, TOKEN, "hog", tool_name(KEY, SLOW[0]), json.dumps(SLOW[1]), "4"],
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                await anyio.sleep(4)
                waits = []
                for _ in range(12):
                    waits.append(await _tool_call(client, url, "victim", fast, FAST[1]))
                    await anyio.sleep(0.15)
                return waits
            finally:
                load.kill()
                load.wait()

    with _server(tree, ["--db", str(tmp / "hog.db"), "--budget", "0", "--timeout", "1"]) as (url, _):
        return _figures(anyio.run(main, url))


def feedback(tree: Path, tmp: Path) -> str:
    method = ManifestStore().method("builtin/b002")
    tool = tool_name(KEY, method.id)

    async def submit(client: httpx2.AsyncClient, url: str, label: str, code: str) -> float:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "submit",
                "arguments": {"method": tool, "description": "d", "code": code},
                "_meta": _meta(),
            },
        }
        started = time.perf_counter()
        await client.post(url, json=body, headers=_headers(label, "tools/call", "submit"))
        return time.perf_counter() - started

    async def main(url: str) -> list[float]:
        async with httpx2.AsyncClient(timeout=900) as client:
            await submit(client, url, "victim", "def test_func(arg0):\n    return 0\n")  # the scorer is built
            victim: list[float] = []
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(submit, client, url, "hog", SPIN)
                await anyio.sleep(1.5)
                for _ in range(3):
                    victim.append(await submit(client, url, "victim", method.source))
            return victim

    args = ["--db", str(tmp / "feedback.db"), "--feedback", "score", "--feedback-limit", "10", "--methods", method.id,
            "--timeout", "0.5", "--budget", "0"]  # fmt: skip
    with _server(tree, args) as (url, _):
        return _figures(anyio.run(main, url))


def lock(tree: Path, tmp: Path) -> str:
    db = tmp / "lock.db"
    fast = tool_name(KEY, FAST[0])

    async def main(url: str) -> list[float]:
        async with _pinger(url, "pinger") as pinger, httpx2.AsyncClient(timeout=600) as client:
            await _tool_call(client, url, "busy", fast, FAST[1])
            holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            threading.Timer(6.0, lambda: holder.execute("ROLLBACK")).start()
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(_tool_call, client, url, "busy", fast, FAST[1])
                group.start_soon(_tool_call, client, url, "newcomer", fast, FAST[1])
                await anyio.sleep(0.3)
                pings = await _timed_pings(pinger, 5.0)
            holder.close()
            return pings

    with _server(tree, ["--db", str(db), "--budget", "0"]) as (url, _):
        return _figures(anyio.run(main, url))


def replicas(tree: Path, tmp: Path) -> str:
    db = tmp / "replicas.db"
    fast = tool_name(KEY, FAST[0])

    async def flood(urls: list[str], stop: anyio.Event) -> None:
        async with httpx2.AsyncClient(timeout=600, limits=httpx2.Limits(max_connections=64)) as client:
            await _tool_call(client, urls[0], "flood", fast, FAST[1])  # its budget of 1 is spent

            async def one(url: str) -> None:
                while not stop.is_set():
                    await _tool_call(client, url, "flood", fast, FAST[1])

            async with anyio.create_task_group() as group:
                for url in urls:
                    for _ in range(8):
                        group.start_soon(one, url)

    async def main(urls: list[str]) -> tuple[list[float], list[float]]:
        async with _pinger(urls[0], "pinger") as pinger:
            idle = await _timed_pings(pinger, 2.0)
            stop = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(flood, urls, stop)
                await anyio.sleep(2)
                loaded = await _timed_pings(pinger, 6.0)
                stop.set()
            return idle, loaded

    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(_server(tree, ["--db", str(db), "--budget", "1", "--stateless"]))[0]
                for _ in range(3)]  # fmt: skip
        idle, loaded = anyio.run(main, urls)
    return f"idle {_figures(idle)}; flooded {_figures(loaded)}"


def writer(tree: Path, tmp: Path) -> str:
    db = tmp / "writer.db"
    fast = tool_name(KEY, FAST[0])
    stop = threading.Event()

    def other_writer() -> None:  # takes the store's lock over and over, as replicas flooding it do
        holder = sqlite3.connect(db, isolation_level=None, timeout=60)
        while not stop.is_set():
            holder.execute("BEGIN IMMEDIATE")
            stop.wait(0.4)
            holder.execute("ROLLBACK")
            stop.wait(0.02)
        holder.close()

    async def main(url: str) -> list[float]:
        async with _pinger(url, "pinger") as pinger, httpx2.AsyncClient(timeout=600) as client:
            await _tool_call(client, url, "flood", fast, FAST[1])  # its budget of 1 is spent
            done = anyio.Event()

            async def one() -> None:
                while not done.is_set():
                    await _tool_call(client, url, "flood", fast, FAST[1])

            thread = threading.Thread(target=other_writer, daemon=True)
            thread.start()
            try:
                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        group.start_soon(one)
                    await anyio.sleep(1.5)
                    pings = await _timed_pings(pinger, 4.0)
                    done.set()
            finally:
                stop.set()
                thread.join(timeout=30)
            return pings

    with _server(tree, ["--db", str(db), "--budget", "1"]) as (url, _):
        return _figures(anyio.run(main, url))


def pipelining(tree: Path, tmp: Path) -> str:
    async def main(url: str, pid: int) -> tuple[list[float], list[float], float]:
        found = re.match(r"http://([^:/]+):(\d+)", url)
        assert found is not None, url
        host, port = found.groups()
        async with _pinger(url, "legitimate") as pinger:
            before = _cpu_seconds(pid)
            attack = subprocess.Popen(
                [sys.executable, "-c", PIPELINE_FLOOD, host, port, "/mcp", "200", "400"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            during = await _timed_pings(pinger, 5.0, every=0.2)
            assert attack.stdin is not None
            attack.stdin.close()
            attack.wait(timeout=120)
            after = await _timed_pings(pinger, 2.0, every=0.2)
            await anyio.sleep(1)
            return during, after, _cpu_seconds(pid) - before

    with _server(tree, ["--db", str(tmp / "pipelining.db")]) as (url, pid):
        during, after, spent = anyio.run(main, url, pid)
    return f"server CPU for the flood {spent:.1f} s; during: {_figures(during)}; after: {_figures(after)}"


SCENARIOS: dict[str, tuple[str, Callable[[Path, Path], str]]] = {
    "hog": ("another credential's fast call under a hog running 4 calls to the CPU limit", hog),
    "feedback": ("another credential's feedback submit beside 4 spinning submits", feedback),
    "lock": ("another agent's ping while the SQLite store's lock is held 6 s", lock),
    "replicas": ("another agent's ping, three replicas on one SQLite file under an over-budget flood", replicas),
    "writer": (
        "another agent's ping under an over-budget flood while another writer keeps taking the store's lock",
        writer,
    ),
    "pipelining": ("an open session's ping during and after 200 x 400 pipelined requests never read", pipelining),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="default: all")
    parser.add_argument("--baseline", help="a git commit whose server runs the same scenarios")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--smoke", action="store_true", help="one scenario (the first named; default writer): checks the script runs"
    )
    options = parser.parse_args()
    chosen = options.scenario or list(SCENARIOS)
    if options.smoke:
        # The first named, or the cheapest: `writer` costs about 2 s of CPU, `hog` about 18 (its hog spins both cores).
        chosen = chosen[:1] if options.scenario else ["writer"]
    rows = []
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        trees = [("this tree", ROOT)]
        if options.baseline:
            trees.append((f"baseline {options.baseline}", stack.enter_context(_baseline_tree(options.baseline))))
        for name in chosen:
            what, run = SCENARIOS[name]
            for label, tree in trees:
                work = Path(tempfile.mkdtemp(dir=tmp))
                try:
                    figures = run(tree, work)
                except Exception as exc:  # noqa: BLE001 - a server that gave way under the scenario is a result too
                    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                        exc = exc.exceptions[0]  # type: ignore[assignment]
                    figures = f"the measuring client failed: {type(exc).__name__}: {str(exc)[:120]}"
                load = os.getloadavg()[0]
                print(f"{name} / {label}: {figures} (load {load:.1f})", file=sys.stderr)
                rows.append(f"| {what} | {label} | {figures} | {load:.1f} |")
    table = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} by `python benchmarks/contention.py` on {os.cpu_count()} CPUs shared "
        f"with other jobs, Python {platform.python_version()}.",
        "",
        "| scenario | server | figures | load average |",
        "|---|---|---|---|",
        *rows,
    ])  # fmt: skip
    print(table)
    if options.write:
        write_section("contention", table)


if __name__ == "__main__":
    main()
